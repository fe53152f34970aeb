"""KubeFleet's evictions and placement disruption budgets (ADR 0107).

A ClusterResourcePlacementEviction asks, once, to take a ClusterResourcePlacement's content off one
member cluster; a ClusterResourcePlacementDisruptionBudget, named after the placement, says how many
of its clusters such voluntary removals may leave unavailable. Field names, short names, printer
columns and status conditions follow placement.kubernetes-fleet.io v1beta1.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, model_validator

from fleetwave.api.kubefleet import IMMUTABLE
from fleetwave.api.meta import (
    BudgetValue,
    Condition,
    Model,
    Resource,
    StatusModel,
    cel,
    condition_column,
    validations,
)

_CATEGORIES = ("fleet", "fleet-placement")
_NAME_MAX = 255  # upstream's
EXACTLY_ONE = "set exactly one of maxUnavailable and minAvailable"


class PlacementEvictionSpec(Model):
    """Which placement's content to take off which cluster. Immutable: to try again, delete the
    eviction and create it anew."""

    placement_name: str = Field(
        max_length=_NAME_MAX, json_schema_extra={"minLength": 1, "x-kubernetes-validations": [IMMUTABLE]}
    )
    """Name of the ClusterResourcePlacement whose content is evicted. It must pick its clusters
    with PickAll or PickN and roll out with strategy RollingUpdate. Immutable."""
    cluster_name: str = Field(
        max_length=_NAME_MAX, json_schema_extra={"minLength": 1, "x-kubernetes-validations": [IMMUTABLE]}
    )
    """Name of the MemberCluster to take the content off (`namespace/name` also accepted for
    fleetwave.io members). Immutable."""


class PlacementEvictionStatus(StatusModel):
    """What became of the eviction, written by the controller once."""

    conditions: list[Condition] | None = None
    """Set by the controller. `Valid`: False when the eviction cannot apply (no such placement, a
    PickFixed or External placement, a placement being deleted, a cluster the placement has not
    picked), the reason `ClusterResourcePlacementEvictionInvalid`. `Executed`: True once the
    content is being taken off the cluster, False when the eviction was refused (the disruption
    budget does not allow it, or nothing was placed there yet); the message says why. Either way the
    eviction is done: it is never evaluated again."""


class ClusterResourcePlacementEviction(Resource):
    """Takes a ClusterResourcePlacement's content off one member cluster, once, if its disruption
    budget allows (KubeFleet's ClusterResourcePlacementEviction). While an executed eviction exists
    the placement does not pick that cluster again: a PickN placement picks another one. Delete the
    eviction to let the placement pick the cluster again."""

    kind_name: ClassVar[str] = "ClusterResourcePlacementEviction"
    plural: ClassVar[str] = "clusterresourceplacementevictions"
    namespaced: ClassVar[bool] = False
    short_names: ClassVar[tuple[str, ...]] = ("crpe",)
    categories: ClassVar[tuple[str, ...]] = _CATEGORIES
    printer_columns = (condition_column("Valid", "Valid"), condition_column("Executed", "Executed"))

    kind: Literal["ClusterResourcePlacementEviction"] = "ClusterResourcePlacementEviction"
    spec: PlacementEvictionSpec
    """Which placement's content to take off which cluster. Immutable."""
    status: PlacementEvictionStatus | None = None
    """Set by the controller: whether the eviction was valid and whether it was executed."""


class PlacementDisruptionBudgetSpec(Model):
    """How many of a placement's clusters voluntary disruptions (evictions) may leave unavailable.
    Exactly one of maxUnavailable and minAvailable."""

    model_config = validations(
        cel("has(self.maxUnavailable) != has(self.minAvailable)", EXACTLY_ONE),
    )

    max_unavailable: BudgetValue | None = None
    """At most this many of the placement's clusters may be unavailable for an eviction to go
    ahead, counting those already unavailable for any reason: a count, or (PickN only) a percentage
    of numberOfClusters, rounded up. 0 allows no eviction. Not allowed for a PickAll placement: an
    eviction against it is refused."""
    min_available: BudgetValue | None = None
    """At least this many of the placement's clusters must stay available after an eviction: a
    count, or (PickN only) a percentage of numberOfClusters, rounded up. 0 allows every eviction. A
    PickAll placement takes a count only: an eviction against it with a percentage is refused."""

    @model_validator(mode="after")
    def _exactly_one(self) -> PlacementDisruptionBudgetSpec:
        if (self.max_unavailable is None) == (self.min_available is None):
            raise ValueError(EXACTLY_ONE)
        return self


class ClusterResourcePlacementDisruptionBudget(Resource):
    """Protects a ClusterResourcePlacement from evictions that would leave too few of its clusters
    available (KubeFleet's ClusterResourcePlacementDisruptionBudget). It applies to the placement of
    the same name; evictions of a PickFixed placement are refused anyway."""

    kind_name: ClassVar[str] = "ClusterResourcePlacementDisruptionBudget"
    plural: ClassVar[str] = "clusterresourceplacementdisruptionbudgets"
    namespaced: ClassVar[bool] = False
    short_names: ClassVar[tuple[str, ...]] = ("crpdb",)
    categories: ClassVar[tuple[str, ...]] = _CATEGORIES

    kind: Literal["ClusterResourcePlacementDisruptionBudget"] = "ClusterResourcePlacementDisruptionBudget"
    spec: PlacementDisruptionBudgetSpec
    """How many of the placement's clusters may be unavailable, or must stay available."""
