"""Cluster sets: ClusterSet (cluster-scoped) and Set (namespaced), Sveltos' lib.projectsveltos.io
kinds. A set chooses up to `maxReplicas` of the ready clusters it matches and keeps them chosen
while they stay usable; ClusterProfiles name ClusterSets in `setRefs` to deliver to whatever the set
has chosen (active/passive failover), Profiles the Sets of their namespace. Field names and shapes
follow libsveltos v1beta1; ADR 0108.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from fleetwave.api.meta import AGE, LabelSelector, Model, ObjectReference, Resource, StatusModel, column

MAX_CLUSTER_REFS = 1000


class SetSpec(Model):
    """Which clusters a set chooses from, and how many it chooses."""

    cluster_selector: LabelSelector | None = None
    """Selects the clusters the set chooses from by their labels. Omitted or empty: no cluster by
    label (clusterRefs still count). In a Set, only clusters of the Set's own namespace."""
    cluster_refs: list[ObjectReference] | None = Field(None, max_length=MAX_CLUSTER_REFS)
    """Clusters the set chooses from by namespace and name, besides those clusterSelector matches
    (up to 1000). In a ClusterSet a reference without a namespace means `default`; in a Set every
    reference is to a cluster of the Set's own namespace, whatever namespace it names (as Sveltos
    reads it)."""
    max_replicas: int = Field(0, ge=0)
    """How many clusters the set chooses, at most, from those it matches that are ready (reachable
    and not paused). A chosen cluster stays chosen while it matches and is ready; one that stops
    being either is replaced by another ready match, in order of namespace and name. Omitted or 0:
    no cluster is chosen (as in Sveltos)."""


class SetStatus(StatusModel):
    """Set by the controller: the clusters the set matches and those it has chosen."""

    matching_cluster_refs: list[ObjectReference] | None = None
    """Set by the controller: every member cluster the set's clusterSelector or clusterRefs match,
    ready or not."""
    selected_cluster_refs: list[ObjectReference] | None = None
    """Set by the controller: the clusters the set has chosen, at most maxReplicas of the matching
    ones, each ready when it was chosen. A ClusterProfile naming the set delivers to these."""


_COLUMNS = (column("Max-Replicas", ".spec.maxReplicas", "integer"), AGE)


class ClusterSet(Resource):
    """A cluster-scoped set of member clusters that chooses up to `maxReplicas` of the ready ones it
    matches and fails over to another when a chosen one stops being ready; ClusterProfiles deliver
    to its choice through `setRefs` (Sveltos' ClusterSet)."""

    kind_name: ClassVar[str] = "ClusterSet"
    plural: ClassVar[str] = "clustersets"
    namespaced: ClassVar[bool] = False
    short_names: ClassVar[tuple[str, ...]] = ("cset",)  # fleetwave.io only: upstream has none
    printer_columns: ClassVar[tuple[dict[str, object], ...]] = _COLUMNS

    kind: Literal["ClusterSet"] = "ClusterSet"
    """The object's kind: `ClusterSet`."""
    spec: SetSpec = Field(default_factory=SetSpec)
    """Which clusters the set chooses from, and how many it chooses."""
    status: SetStatus | None = None
    """Set by the controller: the clusters the set matches and those it has chosen."""


class Set(Resource):
    """A namespaced set of the member clusters of its namespace that chooses up to `maxReplicas` of
    the ready ones it matches and fails over to another when a chosen one stops being ready
    (Sveltos' Set). A Profile of the same namespace names it in `setRefs` to deliver to its choice."""

    kind_name: ClassVar[str] = "Set"
    plural: ClassVar[str] = "sets"
    namespaced: ClassVar[bool] = True
    short_names: ClassVar[tuple[str, ...]] = ("nset",)  # fleetwave.io only: upstream has none
    printer_columns: ClassVar[tuple[dict[str, object], ...]] = _COLUMNS

    kind: Literal["Set"] = "Set"
    """The object's kind: `Set`."""
    spec: SetSpec = Field(default_factory=SetSpec)
    """Which clusters of its namespace the set chooses from, and how many it chooses."""
    status: SetStatus | None = None
    """Set by the controller: the clusters the set matches and those it has chosen."""
