"""Which member clusters a placement picks (PickAll, PickFixed, PickN) and how clusters are named (pure).

PickAll takes every member its required affinity (label and property selectors) and tolerations
allow; PickFixed the named ones; PickN the N best eligible (required affinity, tolerations, ready)
members, one at a time as KubeFleet's scheduler does with topology spread constraints: highest
topology spread score, then highest preference score, then by name (MemberCluster name, then
namespace). ADR 0085 has the rules, the formulas and where they differ from KubeFleet.

Clusters are keyed `namespace/name` (as everywhere in fleetwave) but shown by their MemberCluster
name, as upstream's status does; a name used in two namespaces is shown with its namespace.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict, deque
from collections.abc import Iterable, Mapping, Sequence
from decimal import ROUND_HALF_UP, Decimal

from fleetwave.api.kubefleet import (
    ClusterSelectorTerm,
    PlacementPolicy,
    PreferredClusterSelector,
    PropertySelectorRequirement,
    Toleration,
    TopologySpreadConstraint,
    property_number,
)
from fleetwave.controllers.fleet.members import Member

# A ScheduleAnyway constraint a choice would break costs this much of its topology spread score
# (upstream's penalty), so any choice within maxSkew wins over it.
VIOLATION_PENALTY = 1000

# An observed version is `/version`'s gitVersion (v1.30.2, v1.29.4-eks-036c24b, v1.28.3+k3s1); a
# wanted one is written as a number ("1.30", "1") and sets the precision of the comparison.
_OBSERVED_VERSION = re.compile(r"v?([0-9]+)\.([0-9]+)(?:\.([0-9]+))?(?:[-+].*)?")
_WANTED_VERSION = re.compile(r"v?([0-9]+)(?:\.([0-9]+))?(?:\.([0-9]+))?")


def _version(value: str, pattern: re.Pattern[str]) -> tuple[int, ...] | None:
    found = pattern.fullmatch(value)
    return tuple(int(g) for g in found.groups() if g is not None) if found else None


def _compare(observed: str, wanted: str) -> int | None:
    """-1, 0 or 1 as observed is below, at or above wanted; None when they cannot be compared.
    Numbers compare as numbers; a version (fleetwave's addition: upstream compares quantities only)
    compares on as many parts as `wanted` has, so `Eq 1.30` holds for v1.30.2."""
    a, b = property_number(observed), property_number(wanted)
    if a is not None and b is not None:
        return (a > b) - (a < b)
    va, vb = _version(observed, _OBSERVED_VERSION), _version(wanted, _WANTED_VERSION)
    if va is None or vb is None:
        return None
    va = va[: len(vb)]
    return (va > vb) - (va < vb)


_HOLDS = {
    "Gt": lambda c: c > 0,
    "Ge": lambda c: c >= 0,
    "Eq": lambda c: c == 0,
    "Ne": lambda c: c != 0,
    "Lt": lambda c: c < 0,
    "Le": lambda c: c <= 0,
}


def _satisfies(req: PropertySelectorRequirement, member: Member) -> bool:
    observed = member.properties.get(req.name)
    compared = None if observed is None else _compare(observed, req.values[0])
    return compared is not None and bool(_HOLDS[req.operator](compared))


def _term_matches(term: ClusterSelectorTerm, member: Member) -> bool:
    """Label selector AND property selector (an absent one matches everything)."""
    if term.label_selector is not None and not term.label_selector.matches(dict(member.labels)):
        return False
    expressions = term.property_selector.match_expressions if term.property_selector else []
    return all(_satisfies(req, member) for req in expressions)


def _affinity(policy: PlacementPolicy, member: Member) -> bool:
    required = policy.affinity.cluster_affinity if policy.affinity else None
    terms = (
        required.required_during_scheduling_ignored_during_execution.cluster_selector_terms
        if required and required.required_during_scheduling_ignored_during_execution
        else []
    )
    return not terms or any(_term_matches(t, member) for t in terms)


def _tolerates(toleration: Toleration, taint: tuple[str, str, str]) -> bool:
    """Kubernetes' rule: an empty key with Exists tolerates every taint; an empty effect every effect."""
    key, value, effect = taint
    if toleration.effect and toleration.effect != effect:
        return False
    if toleration.operator == "Exists":
        return not toleration.key or toleration.key == key
    return toleration.key == key and (toleration.value or "") == value


def tolerated(policy: PlacementPolicy | None, member: Member) -> bool:
    """Every taint of the member is tolerated by one of the placement's tolerations (KubeFleet:
    taints keep PickAll and PickN placements off a cluster; PickFixed names clusters and ignores them)."""
    tolerations = (policy.tolerations if policy else None) or []
    return all(any(_tolerates(t, taint) for t in tolerations) for taint in member.taints)


def pick(policy: PlacementPolicy | None, members: Iterable[Member]) -> list[Member]:
    """The picked members: PickAll and PickFixed by name, PickN in the order it picked them."""
    pool = sorted(members, key=lambda mb: (mb.name, mb.namespace))
    if policy is None or policy.placement_type == "PickAll":
        return [mb for mb in pool if tolerated(policy, mb) and (policy is None or _affinity(policy, mb))]
    if policy.placement_type == "PickFixed":
        wanted = set(policy.cluster_names or [])
        return [mb for mb in pool if mb.name in wanted or mb.key in wanted]
    eligible = [mb for mb in pool if _affinity(policy, mb) and tolerated(policy, mb) and mb.ready]
    return _pick_n(policy, eligible)


# ---- PickN -------------------------------------------------------------------------------------


def preference_scores(policy: PlacementPolicy, eligible: Sequence[Member]) -> dict[str, int]:
    """Cluster key -> the sum over preferred terms (weight != 0) of what each gives the cluster: 0
    unless its label and property selectors match; then the weight, or with a property sorter the
    weight scaled by where the cluster's value lies between the lowest and highest value among the
    eligible clusters (0 without a number or when all values are equal), rounded half away from 0."""
    cluster = policy.affinity.cluster_affinity if policy.affinity else None
    preferred = cluster.preferred_during_scheduling_ignored_during_execution if cluster else None
    terms = [t for t in preferred or [] if t.weight]
    bounds: dict[str, tuple[Decimal, Decimal]] = {}
    for name in {t.preference.property_sorter.name for t in terms if t.preference.property_sorter}:
        values = [n for mb in eligible if (n := _number(mb, name)) is not None]
        if values:
            bounds[name] = (min(values), max(values))
    return {mb.key: sum(_term_score(t, mb, bounds) for t in terms) for mb in eligible}


def _number(member: Member, name: str) -> Decimal | None:
    value = member.properties.get(name)
    return None if value is None else property_number(value)


def _term_score(
    term: PreferredClusterSelector, member: Member, bounds: Mapping[str, tuple[Decimal, Decimal]]
) -> int:
    if not _term_matches(term.preference, member):
        return 0
    sorter = term.preference.property_sorter
    if sorter is None:
        return term.weight
    value, (low, high) = _number(member, sorter.name), bounds.get(sorter.name, (Decimal(0), Decimal(0)))
    if value is None or low == high:
        return 0
    share = (value - low) / (high - low)
    if sorter.sort_order == "Ascending":
        share = 1 - share
    return int((share * term.weight).quantize(Decimal(1), rounding=ROUND_HALF_UP))


def _pick_n(policy: PlacementPolicy, eligible: Sequence[Member]) -> list[Member]:
    """Up to numberOfClusters of `eligible`, one at a time. Each step takes the candidate with the
    highest topology spread score (summed over the constraints: +1 for a choice that lowers a
    constraint's skew, 0 for one that keeps it, -1 for one that raises it within maxSkew; past
    maxSkew a DoNotSchedule constraint rules the choice out and a ScheduleAnyway one costs
    VIOLATION_PENALTY), then the highest preference score, then the first by name. Skew is the
    largest minus the smallest count of picked clusters among the topology key's values on eligible
    clusters; a cluster without the key is in no domain and never changes it (KubeFleet's rule)."""
    wanted = policy.number_of_clusters or 0
    constraints = list(policy.topology_spread_constraints or [])
    scores = preference_scores(policy, eligible)
    # Candidates alike for every constraint (same topology values) score alike, so each step only
    # compares the best of each group: a group is kept in preference order.
    groups: dict[tuple[str | None, ...], deque[Member]] = defaultdict(deque)
    for mb in sorted(eligible, key=lambda mb: (-scores[mb.key], mb.name, mb.namespace)):
        groups[tuple(mb.labels.get(c.topology_key) for c in constraints)].append(mb)
    counts = [dict.fromkeys(_domains(c, eligible), 0) for c in constraints]
    picked: list[Member] = []
    while len(picked) < wanted:
        best: tuple[tuple[int, int, str, str], tuple[str | None, ...]] | None = None
        for where, queue in groups.items():
            topology = _topology_score(constraints, counts, where) if queue else None
            if topology is None:
                continue
            head = queue[0]
            rank = (-topology, -scores[head.key], head.name, head.namespace)
            if best is None or rank < best[0]:
                best = (rank, where)
        if best is None:
            break
        where = best[1]
        picked.append(groups[where].popleft())
        for count, value in zip(counts, where, strict=True):
            if value is not None:
                count[value] += 1
    return picked


def _domains(constraint: TopologySpreadConstraint, eligible: Sequence[Member]) -> list[str]:
    return sorted({v for mb in eligible if (v := mb.labels.get(constraint.topology_key)) is not None})


def _topology_score(
    constraints: Sequence[TopologySpreadConstraint],
    counts: Sequence[dict[str, int]],
    where: tuple[str | None, ...],
) -> int | None:
    """A choice's topology spread score; None when it would break a DoNotSchedule constraint."""
    total = 0
    for constraint, count, value in zip(constraints, counts, where, strict=True):
        if value is None:
            continue
        before = max(count.values()) - min(count.values())
        then = [c + (n == value) for n, c in count.items()]
        after = max(then) - min(then)
        if after <= constraint.max_skew:
            total -= after - before
        elif constraint.when_unsatisfiable == "ScheduleAnyway":
            # Past maxSkew anyway: the choice that grows the skew least still wins (upstream scores
            # every breaking choice alike).
            total -= VIOLATION_PENALTY + (after - before)
        else:
            return None
    return total


def namer(members: Iterable[Member]) -> dict[str, str]:
    """Cluster key -> the name shown in status."""
    listed = list(members)
    counts = Counter(mb.name for mb in listed)
    return {mb.key: mb.name if counts[mb.name] == 1 else mb.key for mb in listed}
