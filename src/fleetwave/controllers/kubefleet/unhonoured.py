"""Placement fields fleetwave parses but does not act on yet, refused by name (pure).

A user who writes `topologySpreadConstraints`, `comparisonOption: FullComparison` or a Mirror report-back
strategy would otherwise believe it in force. Until each is honoured, the placement says which field in
its status (Scheduled=False, reason UnsupportedField) and its staged runs wait, naming it. Writing a
field's default out is accepted: it asks for what fleetwave does. The apply strategy's type, take-over
and drift rules are honoured (`apply_rules`, ADR 0063). Recorded in ADR 0060.
"""

from __future__ import annotations

from fleetwave.api.kubefleet import (
    ApplyStrategy,
    PlacementPolicy,
    PlacementSpec,
    ReportBackStrategy,
    RollingUpdateConfig,
)

NOT_YET = "not supported by fleetwave yet"


def refusal(spec: PlacementSpec) -> str:
    """The first field set to something fleetwave would not do ("" when there is none)."""
    for found in (_policy(spec.policy), _strategy(spec)):
        if found:
            return found
    if spec.status_reporting_scope not in (None, "ClusterScopeOnly"):
        return f"spec.statusReportingScope: {spec.status_reporting_scope} is {NOT_YET}"
    return ""


def _policy(policy: PlacementPolicy | None) -> str:
    if policy is None:
        return ""
    if policy.topology_spread_constraints:
        return f"spec.policy.topologySpreadConstraints: {NOT_YET}"
    cluster = policy.affinity.cluster_affinity if policy.affinity else None
    affinity = "spec.policy.affinity.clusterAffinity"
    if cluster is not None and cluster.preferred_during_scheduling_ignored_during_execution:
        return f"{affinity}.preferredDuringSchedulingIgnoredDuringExecution: {NOT_YET}"
    required = cluster.required_during_scheduling_ignored_during_execution if cluster else None
    for i, term in enumerate(required.cluster_selector_terms if required else []):
        where = f"{affinity}.requiredDuringSchedulingIgnoredDuringExecution.clusterSelectorTerms[{i}]"
        if term.property_selector:
            return f"{where}.propertySelector: {NOT_YET}"
        if term.property_sorter:
            return f"{where}.propertySorter: {NOT_YET}"
    return ""


def _strategy(spec: PlacementSpec) -> str:
    strategy = spec.strategy
    rolling = strategy.rolling_update or RollingUpdateConfig()
    defaults = RollingUpdateConfig()
    if rolling.max_surge != defaults.max_surge:
        return f"spec.strategy.rollingUpdate.maxSurge: {NOT_YET} (clusters are never over-scheduled)"
    if rolling.unavailable_period_seconds != defaults.unavailable_period_seconds:
        return f"spec.strategy.rollingUpdate.unavailablePeriodSeconds: {NOT_YET}"
    return _apply(strategy.apply_strategy) or _report(strategy.report_back_strategy)


def _apply(apply: ApplyStrategy | None) -> str:
    if apply is None:
        return ""
    where = "spec.strategy.applyStrategy"
    if apply.comparison_option != ApplyStrategy().comparison_option:
        return f"{where}.comparisonOption: {apply.comparison_option} is {NOT_YET}"
    if apply.allow_co_ownership:
        return f"{where}.allowCoOwnership: {NOT_YET}"
    return ""


def _report(report: ReportBackStrategy | None) -> str:
    if report is not None and report.type != ReportBackStrategy().type:
        return f"spec.strategy.reportBackStrategy.type: {report.type} is {NOT_YET}"
    return ""
