"""Evictions and disruption budgets of ClusterResourcePlacements, decided (pure; ADR 0107).

An eviction is decided once, from what the controller sees when it first reads it: whether it can
apply at all (`Valid`), and whether it goes ahead (`Executed`). The conditions' reasons and messages
are KubeFleet's where fleetwave decides as KubeFleet does. A placement's "bindings" are, here, the
clusters it picks now; a cluster is available when its newest delivery of the placement's content
is done and did not fail.

Which clusters an executed eviction keeps out of its placement's picks (`evicted`) is read by the
placement's picking (`parsed.fleet_of`): the placement then withdraws its content from that cluster
as from any cluster it no longer picks, and a PickN placement picks another one.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from fleetwave.api.conditions import cond, find
from fleetwave.api.evictions import PlacementDisruptionBudgetSpec
from fleetwave.api.kubefleet import PlacementSpec
from fleetwave.api.objects import Obj
from fleetwave.controllers.kubefleet import apply_rules, history

EVICTION = "ClusterResourcePlacementEviction"
BUDGET = "ClusterResourcePlacementDisruptionBudget"
VALID, EXECUTED = "Valid", "Executed"
R_VALID = "ClusterResourcePlacementEvictionValid"
R_INVALID = "ClusterResourcePlacementEvictionInvalid"
R_EXECUTED = "ClusterResourcePlacementEvictionExecuted"
R_NOT_EXECUTED = "ClusterResourcePlacementEvictionNotExecuted"

# KubeFleet's messages, where fleetwave decides as KubeFleet does.
MISSING_PLACEMENT = "Failed to find ClusterResourcePlacement targeted by eviction"
DELETING_PLACEMENT = "Found deleting ClusterResourcePlacement targeted by eviction"
PICK_FIXED = "Found ClusterResourcePlacement with PickFixed placement type targeted by eviction"
NOT_PICKED = "Failed to find scheduler decision for placement in cluster targeted by eviction"
IS_VALID = "Eviction is valid"
NO_BUDGET = "Eviction is allowed, no ClusterResourcePlacementDisruptionBudget specified"
BEING_REMOVED = (
    "Eviction is allowed, resources propagated by placement is currently being removed from cluster "
    "targeted by eviction"
)
FAILED_THERE = "Eviction is allowed, placement has failed"
MISCONFIGURED = (
    "Eviction is blocked by misconfigured ClusterResourcePlacementDisruptionBudget, either "
    "MaxUnavailable is specified or MinAvailable is specified as a percentage for PickAll "
    "ClusterResourcePlacement"
)
NOTHING_PLACED = "Eviction is blocked, placement has not propagated resources to target cluster yet"
ALLOWED_BY_BUDGET = (
    "Eviction is allowed by specified ClusterResourcePlacementDisruptionBudget, "
    "availablePlacements: {available}, totalPlacements: {total}"
)
BLOCKED_BY_BUDGET = (
    "Eviction is blocked by specified ClusterResourcePlacementDisruptionBudget, "
    "availablePlacements: {available}, totalPlacements: {total}"
)
# fleetwave's own.
EXTERNAL = (
    "ClusterResourcePlacement {name} uses strategy External: its content moves only with staged update "
    "runs, which an eviction cannot change; evict from a RollingUpdate placement, or leave the cluster "
    "out of the strategy's stages"
)
AMBIGUOUS = (
    "cluster name {cluster} names MemberClusters in more than one namespace ({found}): write it as "
    "namespace/name"
)


@dataclass(frozen=True, slots=True)
class Facts:
    """What one eviction is decided against, as the controller saw it."""

    placement_name: str
    placement: PlacementSpec | None  # None: no such placement
    deleting: bool = False
    clusters: tuple[str, ...] = ()  # keys of the MemberClusters the eviction's clusterName names
    picked: frozenset[str] = frozenset()  # the placement's picks now (other evictions applied)
    held: Mapping[str, history.Held] | None = None  # newest ledger event per cluster
    failed: frozenset[str] = frozenset()  # clusters whose newest delivery failed
    budget: PlacementDisruptionBudgetSpec | None = None
    budget_problem: str = ""  # the budget of the placement's name could not be read as one


@dataclass(frozen=True, slots=True)
class Verdict:
    valid: bool
    executed: bool | None  # None when not valid: no Executed condition, as upstream
    message: str

    @property
    def withdraws(self) -> bool:
        return self.valid and bool(self.executed)


def terminal(status: Mapping[str, Any] | None) -> bool:
    """Whether the eviction was decided already: found invalid, or with an Executed condition
    (true or false). An eviction is decided once and never again (KubeFleet's rule)."""
    valid = find(status, VALID)
    return (valid is not None and valid.get("status") == "False") or find(status, EXECUTED) is not None


def executed(status: Mapping[str, Any] | None) -> bool:
    valid, done = find(status, VALID), find(status, EXECUTED)
    return bool(valid and valid.get("status") == "True" and done and done.get("status") == "True")


def decide(facts: Facts) -> Verdict:
    """Whether the eviction applies, and whether it goes ahead."""
    invalid = _invalid(facts)
    if invalid:
        return Verdict(False, None, invalid)
    cluster, held = facts.clusters[0], facts.held or {}
    if cluster not in facts.picked:
        return Verdict(True, True, BEING_REMOVED)  # no longer picked: its content is on its way out
    there = held.get(cluster)
    if there is None or there.index is None:
        return Verdict(True, False, NOTHING_PLACED)
    assert facts.placement is not None  # _invalid said so
    if cluster in facts.failed or apply_rules.of(facts.placement).report_diff:
        return Verdict(True, True, FAILED_THERE)
    return _within_budget(facts, held)


def _invalid(facts: Facts) -> str:
    """Why the eviction cannot apply ("" when it can)."""
    spec = facts.placement
    if spec is None:
        return MISSING_PLACEMENT
    if facts.deleting:
        return DELETING_PLACEMENT
    if spec.policy is not None and spec.policy.placement_type == "PickFixed":
        return PICK_FIXED
    if spec.strategy.type == "External":
        return EXTERNAL.format(name=facts.placement_name)
    if len(facts.clusters) > 1:
        cluster = facts.clusters[0].partition("/")[2]
        return AMBIGUOUS.format(cluster=cluster, found=", ".join(facts.clusters))
    held = facts.held or {}
    present = [c for c in facts.clusters if c in facts.picked or _holds(held, c)]
    return "" if present else NOT_PICKED


def _holds(held: Mapping[str, history.Held], cluster: str) -> bool:
    there = held.get(cluster)
    return there is not None and there.index is not None


def _within_budget(facts: Facts, held: Mapping[str, history.Held]) -> Verdict:
    budget = facts.budget
    if facts.budget_problem:
        return Verdict(True, False, facts.budget_problem)
    if budget is None:
        return Verdict(True, True, NO_BUDGET)
    assert facts.placement is not None
    policy = facts.placement.policy
    kind = policy.placement_type if policy is not None else "PickAll"
    if kind == "PickAll" and (budget.max_unavailable is not None or isinstance(budget.min_available, str)):
        return Verdict(True, False, MISCONFIGURED)
    wanted = int(policy.number_of_clusters or 0) if policy is not None and kind == "PickN" else 0
    total = len(facts.picked)
    available = sum(1 for c in facts.picked if _available(held, facts.failed, c))
    allowed = disruptions_allowed(budget, wanted=wanted, total=total, available=available) > 0
    said = (ALLOWED_BY_BUDGET if allowed else BLOCKED_BY_BUDGET).format(available=available, total=total)
    return Verdict(True, allowed, said)


def _available(held: Mapping[str, history.Held], failed: frozenset[str], cluster: str) -> bool:
    there = held.get(cluster)
    return there is not None and there.index is not None and there.done and cluster not in failed


def disruptions_allowed(
    budget: PlacementDisruptionBudgetSpec, *, wanted: int, total: int, available: int
) -> int:
    """How many more clusters may be disrupted: maxUnavailable less those unavailable already, or
    those available less minAvailable; never below 0. A percentage is of `wanted` (PickN's
    numberOfClusters; 0 otherwise), rounded up (KubeFleet's rules)."""
    if budget.max_unavailable is not None:
        allowed = scaled(budget.max_unavailable, wanted) - (total - available)
    else:
        allowed = available - scaled(budget.min_available or 0, wanted)
    return max(0, allowed)


def scaled(value: int | str, of: int) -> int:
    """A count as it is, or a percentage of `of` rounded up."""
    if isinstance(value, str):
        return math.ceil(int(value.rstrip("%")) * of / 100)
    return value


def conditions(verdict: Verdict, previous: Mapping[str, Any], generation: int | None, at: str) -> list[Obj]:
    """The eviction's conditions: Valid, and Executed when it was valid."""
    if not verdict.valid:
        return [cond(previous, VALID, "False", R_INVALID, verdict.message, generation, at)]
    done = "True" if verdict.executed else "False"
    reason = R_EXECUTED if verdict.executed else R_NOT_EXECUTED
    return [
        cond(previous, VALID, "True", R_VALID, IS_VALID, generation, at),
        cond(previous, EXECUTED, done, reason, verdict.message, generation, at),
    ]


def failed_clusters(status: Mapping[str, Any]) -> frozenset[str]:
    """Clusters whose newest delivery of the placement's content failed (its ledger entry carries
    the error until a delivery succeeds)."""
    deliveries = status.get("deliveries")
    if not isinstance(deliveries, Mapping):
        return frozenset()
    return frozenset(c for c, e in deliveries.items() if isinstance(e, Mapping) and e.get("error"))


def named(cluster_name: str, member_keys: Iterable[str]) -> tuple[str, ...]:
    """The member clusters (keys, `namespace/name`) a clusterName names: by key, else by name."""
    keys = sorted(member_keys)
    if cluster_name in keys:
        return (cluster_name,)
    return tuple(k for k in keys if k.partition("/")[2] == cluster_name)


def evicted(evictions: Iterable[Obj]) -> dict[str, frozenset[str]]:
    """Placement name -> the clusterNames of its executed evictions: the clusters it leaves out."""
    out: dict[str, set[str]] = {}
    for obj in evictions:
        spec = obj.get("spec")
        if not isinstance(spec, Mapping) or not executed(obj.get("status")):
            continue
        placement, cluster = spec.get("placementName"), spec.get("clusterName")
        if isinstance(placement, str) and isinstance(cluster, str):
            out.setdefault(placement, set()).add(cluster)
    return {p: frozenset(c) for p, c in out.items()}


def left_out(cluster_names: Iterable[str], member_keys: Iterable[str]) -> frozenset[str]:
    """The member keys the executed evictions' clusterNames name (an ambiguous name names none: such
    an eviction was never executed)."""
    keys = list(member_keys)
    out: set[str] = set()
    for name in cluster_names:
        found = named(name, keys)
        if len(found) == 1:
            out.add(found[0])
    return frozenset(out)
