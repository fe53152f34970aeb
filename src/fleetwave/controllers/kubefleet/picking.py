"""Which member clusters a placement picks (PickAll, PickFixed, PickN) and how clusters are named (pure).

Clusters are keyed `namespace/name` (as everywhere in fleetwave) but shown by their MemberCluster
name, as upstream's status does; a name used in two namespaces is shown with its namespace.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from fleetwave.api.kubefleet import ClusterSelectorTerm, PlacementPolicy, Toleration
from fleetwave.controllers.members import Member


def _term_matches(term: ClusterSelectorTerm, member: Member) -> bool:
    return term.label_selector is None or term.label_selector.matches(dict(member.labels))


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
    pool = sorted(members, key=lambda mb: (mb.name, mb.namespace))
    if policy is None or policy.placement_type == "PickAll":
        return [mb for mb in pool if tolerated(policy, mb) and (policy is None or _affinity(policy, mb))]
    if policy.placement_type == "PickFixed":
        wanted = set(policy.cluster_names or [])
        return [mb for mb in pool if mb.name in wanted or mb.key in wanted]
    eligible = [mb for mb in pool if _affinity(policy, mb) and tolerated(policy, mb) and mb.ready]
    return eligible[: policy.number_of_clusters or 0]


def namer(members: Iterable[Member]) -> dict[str, str]:
    """Cluster key -> the name shown in status."""
    listed = list(members)
    counts = Counter(mb.name for mb in listed)
    return {mb.key: mb.name if counts[mb.name] == 1 else mb.key for mb in listed}
