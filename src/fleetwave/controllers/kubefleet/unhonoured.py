"""Placement fields fleetwave parses but does not act on, refused by name (pure).

A user who writes `comparisonOption: FullComparison`, a Mirror report-back strategy or a property
value with a unit would otherwise believe it in force. Until each is honoured, the placement says
which field in its status (Scheduled=False, reason UnsupportedField) and its staged runs wait,
naming it. Writing a field's default out is accepted: it asks for what fleetwave does. The apply
strategy's type, take-over and drift rules are honoured (`apply_rules`, ADR 0063); so are preferred
affinity, property selectors and sorters and topology spread constraints (`picking`, ADR 0085) where
KubeFleet accepts them: preferences and spreading with PickN only, a sorter in preferred terms only.
Recorded in ADR 0060.
"""

from __future__ import annotations

from fleetwave.api.kubefleet import (
    ApplyStrategy,
    ClusterSelectorTerm,
    PlacementPolicy,
    PlacementSpec,
    ReportBackStrategy,
    RollingUpdateConfig,
    property_number,
)

NOT_YET = "not supported by fleetwave yet"
ONLY_PICK_N = "only PickN placements use it (KubeFleet refuses it on the others too)"
# KubeFleet's resource properties (`resources.kubernetes-fleet.io/available-cpu`, ...) come from a
# member's `status.resourceUsage`, which fleetwave does not read.
RESOURCE_PREFIX = "resources.kubernetes-fleet.io/"


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
    pick_n = policy.placement_type == "PickN"
    if policy.topology_spread_constraints and not pick_n:
        return f"spec.policy.topologySpreadConstraints: {ONLY_PICK_N}"
    cluster = policy.affinity.cluster_affinity if policy.affinity else None
    affinity = "spec.policy.affinity.clusterAffinity"
    preferred = (cluster.preferred_during_scheduling_ignored_during_execution if cluster else None) or []
    if preferred and not pick_n:
        return f"{affinity}.preferredDuringSchedulingIgnoredDuringExecution: {ONLY_PICK_N}"
    required = cluster.required_during_scheduling_ignored_during_execution if cluster else None
    for i, term in enumerate(required.cluster_selector_terms if required else []):
        where = f"{affinity}.requiredDuringSchedulingIgnoredDuringExecution.clusterSelectorTerms[{i}]"
        if term.property_sorter:
            return f"{where}.propertySorter: only a preferred term sorts clusters (as in KubeFleet)"
        if found := _properties(term, where):
            return found
    for i, pref in enumerate(preferred):
        where = f"{affinity}.preferredDuringSchedulingIgnoredDuringExecution[{i}].preference"
        if found := _properties(pref.preference, where):
            return found
    return ""


def _properties(term: ClusterSelectorTerm, where: str) -> str:
    """Resource properties (`status.resourceUsage`) and quantity suffixes are not read yet."""
    for j, req in enumerate(term.property_selector.match_expressions if term.property_selector else []):
        at = f"{where}.propertySelector.matchExpressions[{j}]"
        if req.name.startswith(RESOURCE_PREFIX):
            return f"{at}.name: {req.name}: resource properties are {NOT_YET}"
        if property_number(req.values[0]) is None:
            return f"{at}.values[0]: {req.values[0]}: a value with a unit is {NOT_YET} (write a plain number)"
    sorter = term.property_sorter
    if sorter is not None and sorter.name.startswith(RESOURCE_PREFIX):
        return f"{where}.propertySorter.name: {sorter.name}: resource properties are {NOT_YET}"
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
