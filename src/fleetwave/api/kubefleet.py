"""KubeFleet-family kinds in the native group: placements, resource snapshots, staged update
strategies and runs, approval requests (cluster-scoped and namespaced twins share spec types).

Field names and defaults follow placement.kubernetes-fleet.io v1beta1
(shared/spec/kubefleet-staged-updates.md).
Deliberate deviations are recorded in docs/adr/0012-spec-gap-decisions.md.
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Annotated, Any, ClassVar, Literal

from pydantic import AfterValidator, Field, model_validator

from fleetwave.api import validation as v
from fleetwave.api.analyses import AnalysisGate, analyses_field
from fleetwave.api.analyses import check_unique as check_unique_analyses
from fleetwave.api.meta import (
    AGE,
    AtomicMap,
    Condition,
    DNSLabel,
    Duration,
    FailureBudget,
    FreeForm,
    IntOrPercent,
    LabelSelector,
    MaxConcurrency,
    Model,
    OnFailure,
    Resource,
    StatusModel,
    cel,
    column,
    condition_column,
    validations,
)
from fleetwave.api.validation import check_unique_names, duration_seconds
from fleetwave.api.webhooks import WebhookGate, webhooks_field
from fleetwave.api.webhooks import check_unique as check_unique_webhooks

MAX_STAGES = 31  # upstream limit; also bounds the CEL cost of the uniqueness rule


class ResourceSelector(Model):
    """Selects objects of the management cluster to place: one kind, then one object by name, the
    objects whose labels match, or (with neither) every object of the kind."""

    model_config = validations(
        cel("!(has(self.name) && has(self.labelSelector))", "set name or labelSelector, not both")
    )

    group: str
    """API group of the kind to select; empty for the core group (Namespace, ConfigMap, ...)."""
    version: str
    """API version of the kind to select, such as `v1`."""
    kind: str
    """Kind to select, such as `Namespace` or `ConfigMap`. Built-in kinds are placed out of the box;
    other kinds only once the controller is configured to place them."""
    name: str | None = None
    """Name of the one object to select. Set name or labelSelector, not both; with neither, every
    object of the kind is selected."""
    label_selector: LabelSelector | None = None
    """Selects the objects of the kind whose labels match. Set name or labelSelector, not both."""
    selection_scope: (
        Literal["NamespaceOnly", "NamespaceWithResources", "NamespaceWithResourceSelectors"] | None
    ) = None
    """For a Namespace selector: what the selected namespace brings along. `NamespaceWithResources`
    (the default): the namespace and everything in it; `NamespaceOnly`: the namespace alone;
    `NamespaceWithResourceSelectors`: the namespace and only the objects the placement's other
    selectors match."""

    @model_validator(mode="after")
    def _name_or_selector(self) -> ResourceSelector:
        if self.name is not None and self.label_selector is not None:
            raise ValueError("set name or labelSelector, not both")
        return self


PropertyName = Annotated[
    str,
    AfterValidator(v.check_property_name),
    Field(json_schema_extra={"pattern": v.PROPERTY_NAME_PATTERN, "maxLength": v.PROPERTY_NAME_MAX}),
]
Quantity = Annotated[
    str,
    AfterValidator(v.check_quantity),
    Field(json_schema_extra={"pattern": v.QUANTITY_PATTERN, "maxLength": v.QUANTITY_MAX}),
]


class PropertySelectorRequirement(Model):
    """A cluster's value of property `name` compared with `values[0]`; a cluster without the
    property (or with a value that is not a number) does not match, whatever the operator."""

    name: PropertyName
    """Name of the cluster property to compare, such as `kubernetes-fleet.io/node-count`,
    `k8s.io/k8s-version`, or the key of a member label whose value is a number."""
    operator: Literal["Gt", "Ge", "Eq", "Ne", "Lt", "Le"]
    """How the cluster's value compares with the given value: greater than (`Gt`), greater or
    equal (`Ge`), equal (`Eq`), not equal (`Ne`), less than (`Lt`) or less or equal (`Le`)."""
    values: list[Quantity] = Field(min_length=1, max_length=1)
    """Exactly one value to compare with, written as a plain number such as `3` or `1.30` (a
    version property compares as a version: `1.30` matches v1.30.2). A value with a unit suffix
    such as `4Gi` is not supported yet: the placement reports it and does not roll out."""


class PropertySelector(Model):
    """Selects clusters by their properties: every expression must hold."""

    match_expressions: list[PropertySelectorRequirement]  # ANDed
    """Property comparisons, all of which a cluster must satisfy."""


class PropertySorter(Model):
    """Weights a preferred term by where a cluster's value of `name` lies between the lowest and
    the highest value among the eligible clusters (Descending: the highest gets the full weight)."""

    name: PropertyName
    """Name of the cluster property to rank by, such as `kubernetes-fleet.io/node-count`."""
    sort_order: Literal["Ascending", "Descending"]
    """`Descending`: the cluster with the highest value gets the full weight; `Ascending`: the
    cluster with the lowest value does."""


class ClusterSelectorTerm(Model):
    """Selects clusters by labels and properties; a cluster matches when both selectors match."""

    label_selector: LabelSelector | None = None
    """Selects clusters by the labels of their MemberCluster. Omitted: matches every cluster."""
    property_selector: PropertySelector | None = None
    """Selects clusters by their properties. Omitted: matches every cluster."""
    property_sorter: PropertySorter | None = None
    """Ranks matching clusters by a property, scaling the term's weight. Only allowed in a
    preferred term."""


_DECIMAL = re.compile(v.DECIMAL_PATTERN)


def property_number(value: str) -> Decimal | None:
    """A property value as a number; None when it is not a plain decimal (Kubernetes quantity
    suffixes such as `Gi` or `m` are not read)."""
    return Decimal(value) if _DECIMAL.fullmatch(value) else None


class ClusterSelector(Model):
    """Selects clusters matching any of its terms."""

    cluster_selector_terms: list[ClusterSelectorTerm] = Field(max_length=10)
    """Up to 10 terms; a cluster is selected when it matches at least one of them. An empty list
    selects every cluster."""


class PreferredClusterSelector(Model):
    """A weighted preference: clusters matching it score its weight when a PickN placement ranks
    clusters."""

    weight: int = Field(ge=-100, le=100)
    """Score a matching cluster gets, from -100 to 100; a negative weight steers the placement
    away from matching clusters. With a property sorter the weight is scaled by the cluster's rank."""
    preference: ClusterSelectorTerm
    """The clusters the weight applies to."""


class ClusterAffinity(Model):
    """Which clusters a placement must or should pick."""

    required_during_scheduling_ignored_during_execution: ClusterSelector | None = None
    """Clusters the placement may pick: only those matching at least one term. Omitted: every
    cluster qualifies."""
    preferred_during_scheduling_ignored_during_execution: list[PreferredClusterSelector] | None = None
    """Weighted preferences that rank the eligible clusters; a PickN placement picks the highest
    total score first. Only allowed with PickN."""


class Affinity(Model):
    """Scheduling preferences and requirements of a placement."""

    cluster_affinity: ClusterAffinity | None = None
    """Which clusters the placement must or should pick, by labels and properties."""


class TopologySpreadConstraint(Model):
    """Spreads the clusters a PickN placement picks over the values of a cluster label."""

    max_skew: int = Field(1, ge=1)
    """Largest allowed difference between the number of picked clusters in any two domains (values
    of topologyKey). Defaults to 1."""
    topology_key: str
    """Key of the MemberCluster label whose values form the domains to spread over. A cluster
    without the label belongs to no domain and does not affect the spread."""
    when_unsatisfiable: Literal["DoNotSchedule", "ScheduleAnyway"] | None = None
    """What to do when a cluster would exceed maxSkew: `DoNotSchedule` (the default) does not pick
    it, so fewer clusters than asked for may be picked; `ScheduleAnyway` still picks it, preferring
    the cluster that raises the skew least."""


class Toleration(Model):
    """Allows a placement onto clusters with a matching taint (same rules as Kubernetes pod
    tolerations)."""

    key: str | None = None
    """Taint key the toleration applies to. Empty with operator `Exists`: tolerates every taint."""
    operator: Literal["Exists", "Equal"] | None = None
    """`Equal` (the default): the taint's key and value must match; `Exists`: only the key must
    match (value is ignored)."""
    value: str | None = None
    """Taint value to match, with operator `Equal`."""
    effect: Literal["NoSchedule"] | None = None
    """Taint effect to match; `NoSchedule` is the only one. Empty: matches every effect."""


class PlacementPolicy(Model):
    """Which member clusters a placement places on."""

    model_config = validations(
        cel("self.placementType != 'PickN' || has(self.numberOfClusters)", "PickN requires numberOfClusters"),
        cel(
            "self.placementType == 'PickN' || !has(self.numberOfClusters)",
            "numberOfClusters is only allowed with PickN",
        ),
        cel(
            "self.placementType == 'PickFixed' || !has(self.clusterNames)",
            "clusterNames is only allowed with PickFixed",
        ),
        cel(
            "self.placementType != 'PickFixed' ||"
            " (!has(self.affinity) && !has(self.topologySpreadConstraints)"
            " && !has(self.tolerations))",
            "PickFixed cannot have affinity, topologySpreadConstraints or tolerations",
        ),
    )

    placement_type: Literal["PickAll", "PickN", "PickFixed"] = "PickAll"
    """How clusters are picked. `PickAll` (the default): every cluster the affinity and tolerations
    allow; `PickN`: the numberOfClusters best-ranked ready clusters among those; `PickFixed`: the
    clusters listed in clusterNames."""
    cluster_names: list[str] | None = Field(None, max_length=100)
    """With PickFixed (and only then): the names of the MemberClusters to place on, up to 100
    (`namespace/name` also accepted). Taints do not apply to clusters named here."""
    number_of_clusters: int | None = Field(None, ge=0)
    """With PickN (required, and only then): how many clusters to pick. When fewer clusters
    qualify, the placement reports it and places on those it could pick."""
    affinity: Affinity | None = None
    """Which clusters the placement must pick from (required terms) and, with PickN, which it
    prefers (weighted terms)."""
    topology_spread_constraints: list[TopologySpreadConstraint] | None = None
    """With PickN: spread the picked clusters evenly over the values of cluster labels."""
    tolerations: list[Toleration] | None = Field(None, max_length=100)
    """Taints of member clusters this placement tolerates, up to 100. A PickAll or PickN placement
    leaves out any cluster with a taint it does not tolerate. Not allowed with PickFixed."""

    @model_validator(mode="after")
    def _consistent(self) -> PlacementPolicy:
        t = self.placement_type
        if t == "PickN" and self.number_of_clusters is None:
            raise ValueError("numberOfClusters: PickN requires numberOfClusters")
        if t != "PickN" and self.number_of_clusters is not None:
            raise ValueError("numberOfClusters: numberOfClusters is only allowed with PickN")
        if t != "PickFixed" and self.cluster_names is not None:
            raise ValueError("clusterNames: clusterNames is only allowed with PickFixed")
        if t == "PickFixed" and (self.affinity or self.topology_spread_constraints or self.tolerations):
            raise ValueError("PickFixed cannot have affinity, topologySpreadConstraints or tolerations")
        return self


class RollingUpdateConfig(Model):
    """Pace of a RollingUpdate rollout."""

    max_unavailable: IntOrPercent = "25%"
    """How many picked clusters may be updating (and so possibly unavailable) at the same time: a
    number, or a percentage of the picked clusters rounded up. At least 1 is always allowed.
    Defaults to 25%."""
    max_surge: IntOrPercent = "25%"
    """KubeFleet's: how many clusters beyond the target may hold the content during a rollout.
    fleetwave never places on extra clusters, so only the default, 25%, is accepted; another value
    makes the placement report it and not roll out."""
    unavailable_period_seconds: int = Field(60, ge=0)
    """KubeFleet's: seconds after which a cluster whose resources cannot be checked for availability
    counts as available. fleetwave checks readiness itself, so only the default, 60, is accepted;
    another value makes the placement report it and not roll out."""


class ServerSideApplyConfig(Model):
    """Options of a server-side apply."""

    force: bool = False
    """Whether to take over fields another field manager owns. `false` (the default): such a
    conflict leaves the object as it is, reported as drifted. Used with applyStrategy type
    ServerSideApply."""


class ApplyStrategy(Model):
    """How a placement's objects are applied to member clusters."""

    type: Literal["ClientSideApply", "ServerSideApply", "ReportDiff"] = "ClientSideApply"
    """How objects are written. `ClientSideApply` (the default) and `ServerSideApply` apply them
    (fleetwave applies server-side in both cases; ServerSideApply overwrites fields other managers
    own only with serverSideApplyConfig.force). `ReportDiff` applies nothing and reports how each
    cluster's objects differ from the snapshot."""
    comparison_option: Literal["PartialComparison", "FullComparison"] = "PartialComparison"
    """Which fields count when an object on a member is compared with the snapshot:
    `PartialComparison` (the default), the fields the snapshot sets. `FullComparison` is not
    supported yet: the placement reports it and does not roll out."""
    when_to_apply: Literal["Always", "IfNotDrifted"] = "Always"
    """`Always` (the default): apply every time, overwriting changes others made to fields
    fleetwave set. `IfNotDrifted`: when someone changed such a field, leave the object alone and
    report it as drifted."""
    when_to_take_over: Literal["Always", "IfNoDiff", "Never"] = "Always"
    """What to do with an object that already exists on a member but was not deployed by
    fleetwave: `Always` (the default) takes it over; `IfNoDiff` takes it over only when applying
    would change nothing, and otherwise reports the differences; `Never` leaves it and reports it."""
    allow_co_ownership: bool | None = None
    """KubeFleet's: whether to apply to objects that other owners also own. `true` is not supported
    yet: the placement reports it and does not roll out."""
    server_side_apply_config: ServerSideApplyConfig | None = None
    """Options for type ServerSideApply."""


class DeleteStrategy(Model):
    """What deleting a placement does to its content on member clusters."""

    propagation_policy: Literal["Delete", "Abandon"] = "Delete"
    """`Delete` (the default): deleting the placement removes the objects it placed from the
    member clusters. `Abandon`: they stay."""


class ReportBackStrategy(Model):
    """KubeFleet's copying of placed objects' status from members back to the management cluster."""

    type: Literal["Disabled", "Mirror"] = "Disabled"
    """`Disabled` (the default): no status is copied back. `Mirror` is not supported yet: the
    placement reports it and does not roll out."""
    destination: Literal["OriginalResource", "WorkAPI"] | None = None
    """Where KubeFleet copies the status to, with type Mirror. Accepted for compatibility with
    KubeFleet; fleetwave does not act on it."""


class RolloutStrategy(Model):
    """How a placement rolls its content out and how objects are applied and deleted."""

    model_config = validations(
        cel(
            "!has(oldSelf.type) || oldSelf.type != 'External' || self.type == 'External'",
            "strategy type cannot change once it is External",
        ),
        cel(
            "self.type != 'External' || !has(self.rollingUpdate)",
            "rollingUpdate is not allowed with External",
        ),
    )

    type: Literal["RollingUpdate", "External"] = "RollingUpdate"
    """`RollingUpdate` (the default): the placement rolls each new resource snapshot out to its
    clusters itself, a few at a time. `External`: staged update runs roll snapshots out; once
    External, the type cannot change back."""
    rolling_update: RollingUpdateConfig | None = None
    """Pace of a RollingUpdate rollout. Not allowed with External."""
    apply_strategy: ApplyStrategy | None = None
    """How objects are applied to member clusters, by this placement and by its staged update
    runs. Omitted: every field takes its default."""
    delete_strategy: DeleteStrategy | None = None
    """What deleting the placement does to its content on member clusters. Omitted: the content is
    removed."""
    report_back_strategy: ReportBackStrategy | None = None
    """KubeFleet's status back-reporting; only type Disabled is supported."""

    @model_validator(mode="after")
    def _external(self) -> RolloutStrategy:
        if self.type == "External" and self.rolling_update is not None:
            raise ValueError("rollingUpdate: rollingUpdate is not allowed with External")
        return self


class PlacementSpec(Model):
    """What a placement selects, where it places it and how changes roll out."""

    resource_selectors: list[ResourceSelector] = Field(min_length=1, max_length=100)
    """What to place: 1 to 100 selectors, an object matching any of them is selected. A
    ClusterResourcePlacement selects cluster-scoped objects such as Namespaces; a ResourcePlacement
    selects namespaced objects of its own namespace. Reserved namespaces (`default`, `kube-*`,
    `fleet-*`, `fleetwave-*`) are never selected."""
    policy: PlacementPolicy | None = None
    """Which member clusters to place on. Omitted: every cluster (PickAll)."""
    strategy: RolloutStrategy = Field(default_factory=RolloutStrategy)
    """How changes roll out to the picked clusters, and how objects are applied and deleted.
    Omitted: a RollingUpdate with default settings."""
    revision_history_limit: int = Field(10, ge=1, le=1000)
    """How many resource snapshots of this placement to keep, from 1 to 1000; older ones are
    deleted. Defaults to 10."""
    status_reporting_scope: Literal["ClusterScopeOnly", "NamespaceAccessible"] | None = None
    """KubeFleet's: who may read the placement's status. `ClusterScopeOnly` (the default
    behaviour): on the placement only. `NamespaceAccessible` is not supported yet: the placement
    reports it and does not roll out."""


# The delivery ledger a RollingUpdate placement and a staged update run keep (ADR 0136, 0137).
_DELIVERIES = Field(
    default=None,
    description="Set by the controller: what it delivered, per cluster (`namespace/name` when the name "
    "is used in more than one namespace): the snapshot index and content hash applied there (a run "
    "leaves the hash out of an entry at its own snapshot), when, and when it became available. Written "
    "after each apply, so a cluster missing here is delivered again.",
)
_DELETIONS = Field(
    default=None,
    description="Set by the controller: per cluster the content is being removed from, when its "
    "removal started and when it was done.",
)


class PlacementStatus(StatusModel):
    """Observed state of a placement, written by the controller."""

    selected_resources: list[FreeForm] | None = None
    """Set by the controller: the objects the placement selects now (group, version, kind,
    namespace and name)."""
    observed_resource_index: str | None = None
    """Set by the controller: the index of the resource snapshot every picked cluster holds; empty
    while the clusters hold different snapshots."""
    placement_statuses: list[FreeForm] | None = None
    """Set by the controller: one entry per picked cluster holding the content, with the snapshot
    index it holds, the overrides applied there, whether it is available (with ReportDiff: its
    reported differences) and an Overridden condition."""
    conditions: list[Condition] | None = None
    """Set by the controller: `<Kind>Scheduled` (which clusters were picked, or why the placement
    cannot roll out) and `<Kind>Available` (every picked cluster holds the same snapshot and it is
    ready), or `<Kind>DiffReported` with applyStrategy ReportDiff."""
    deliveries: AtomicMap | None = _DELIVERIES
    deletions: AtomicMap | None = _DELETIONS


def _placement_columns(prefix: str) -> tuple[dict[str, Any], ...]:
    return (
        column("Gen", ".metadata.generation", "integer"),
        column("Type", ".spec.strategy.type", priority=1),
        condition_column("Scheduled", f"{prefix}Scheduled"),
        condition_column("Scheduled-Gen", f"{prefix}Scheduled", "observedGeneration", "integer"),
        condition_column("Available", f"{prefix}Available"),
        condition_column("Available-Gen", f"{prefix}Available", "observedGeneration", "integer"),
        AGE,
    )


class ClusterResourcePlacement(Resource):
    """Selects cluster-scoped resources (and whole namespaces) of the management cluster and places
    copies on member clusters chosen by its policy (KubeFleet's ClusterResourcePlacement)."""

    kind_name: ClassVar[str] = "ClusterResourcePlacement"
    plural: ClassVar[str] = "clusterresourceplacements"
    namespaced: ClassVar[bool] = False
    short_names: ClassVar[tuple[str, ...]] = ("crp",)
    printer_columns = _placement_columns("ClusterResourcePlacement")

    kind: Literal["ClusterResourcePlacement"] = "ClusterResourcePlacement"
    spec: PlacementSpec
    """What the placement selects, where it places it and how changes roll out."""
    status: PlacementStatus | None = None
    """Set by the controller: what the placement selected and where its content stands."""


class ResourcePlacement(Resource):
    """Selects resources of its own namespace in the management cluster and places copies on member
    clusters chosen by its policy (KubeFleet's ResourcePlacement)."""

    kind_name: ClassVar[str] = "ResourcePlacement"
    plural: ClassVar[str] = "resourceplacements"
    namespaced: ClassVar[bool] = True
    short_names: ClassVar[tuple[str, ...]] = ("rp",)
    printer_columns = _placement_columns("ResourcePlacement")

    kind: Literal["ResourcePlacement"] = "ResourcePlacement"
    spec: PlacementSpec
    """What the placement selects, where it places it and how changes roll out."""
    status: PlacementStatus | None = None
    """Set by the controller: what the placement selected and where its content stands."""


# ---- resource snapshots ----


class ResourceSnapshotSpec(Model):
    """The content of one revision of a placement."""

    selected_resources: list[FreeForm] = Field(default_factory=list)
    """Set by the controller when it makes the snapshot: the manifests of the objects the placement
    selected, without the fields the API server fills in. A snapshot never changes afterwards."""


class ResourceSnapshotStatus(StatusModel):
    """Accepted for compatibility with KubeFleet; fleetwave writes nothing here."""

    conditions: list[Condition] | None = None
    """Accepted for compatibility with KubeFleet; fleetwave writes no conditions here."""


_SNAPSHOT_COLUMNS = (column("Gen", ".metadata.generation", "integer"), AGE)


class ClusterResourceSnapshot(Resource):
    """Set by the controller: an immutable copy of what a ClusterResourcePlacement selected at one
    revision. Staged update runs roll out a chosen snapshot."""

    kind_name: ClassVar[str] = "ClusterResourceSnapshot"
    plural: ClassVar[str] = "clusterresourcesnapshots"
    namespaced: ClassVar[bool] = False
    short_names: ClassVar[tuple[str, ...]] = ("crs",)
    printer_columns = _SNAPSHOT_COLUMNS

    kind: Literal["ClusterResourceSnapshot"] = "ClusterResourceSnapshot"
    spec: ResourceSnapshotSpec = Field(default_factory=ResourceSnapshotSpec)
    """Set by the controller: the content of one revision of a placement."""
    status: ResourceSnapshotStatus | None = None
    """Accepted for compatibility with KubeFleet; fleetwave writes nothing here."""


class ResourceSnapshot(Resource):
    """Set by the controller: an immutable copy of what a ResourcePlacement selected at one revision.
    Staged update runs roll out a chosen snapshot."""

    kind_name: ClassVar[str] = "ResourceSnapshot"
    plural: ClassVar[str] = "resourcesnapshots"
    namespaced: ClassVar[bool] = True
    short_names: ClassVar[tuple[str, ...]] = ("rs",)
    printer_columns = _SNAPSHOT_COLUMNS

    kind: Literal["ResourceSnapshot"] = "ResourceSnapshot"
    spec: ResourceSnapshotSpec = Field(default_factory=ResourceSnapshotSpec)
    """Set by the controller: the content of one revision of a placement."""
    status: ResourceSnapshotStatus | None = None
    """Accepted for compatibility with KubeFleet; fleetwave writes nothing here."""


# ---- staged update strategies ----


class StageTask(Model):
    """Something a stage waits for: a timed wait or an approval."""

    model_config = validations(
        cel(
            "self.type == 'TimedWait' ? has(self.waitTime) : !has(self.waitTime)",
            "TimedWait requires waitTime; Approval must not set it",
        ),
    )

    type: Literal["TimedWait", "Approval"]
    """`TimedWait`: wait for waitTime. `Approval`: wait until someone approves the approval request
    the run creates for this stage."""
    wait_time: Duration | None = None
    """With TimedWait (required, and only then): how long to wait after every cluster of the stage
    succeeded. A duration greater than zero, such as `30s`, `5m` or `1h30m`."""

    @model_validator(mode="after")
    def _wait_time(self) -> StageTask:
        if self.type == "TimedWait":
            if self.wait_time is None:
                raise ValueError("waitTime: TimedWait requires waitTime")
            if duration_seconds(self.wait_time) <= 0:
                raise ValueError("waitTime: must be greater than 0")
        elif self.wait_time is not None:
            raise ValueError("waitTime: Approval must not set waitTime")
        return self


class StageConfig(Model):
    """One stage of a staged update: a group of clusters updated together, with what it waits for."""

    name: DNSLabel
    """Name of the stage, unique within the strategy: up to 63 lowercase letters, digits and `-`,
    starting and ending with a letter or digit. Approval requests are named after it."""
    label_selector: LabelSelector | None = None
    """Which of the placement's picked clusters belong to this stage, by MemberCluster labels. `{}`
    selects every picked cluster; omitted selects none. A cluster matching several stages belongs to
    the first of them."""
    sorting_label_key: str | None = None
    """Key of a cluster label that sets the order of updates within the stage: integer values first,
    ascending, then other values as text, then clusters without the label, ties by name. Omitted:
    clusters are updated in name order."""
    max_concurrency: MaxConcurrency = 1
    """How many clusters of the stage may be updating at the same time: a number of at least 1, or a
    percentage of the stage's clusters (`1%` to `100%`) rounded down, at least 1. Defaults to 1."""
    before_stage_tasks: list[StageTask] | None = Field(
        None,
        max_length=1,
        json_schema_extra={
            "x-kubernetes-validations": [
                cel("self.all(t, t.type == 'Approval')", "beforeStageTasks may only contain Approval")
            ]
        },
    )
    """What must happen before the stage's clusters start updating: at most one task, an Approval.
    Skipped when the stage has no clusters."""
    after_stage_tasks: list[StageTask] | None = Field(
        None,
        max_length=2,
        json_schema_extra={
            "x-kubernetes-validations": [
                cel("self.size() < 2 || self[0].type != self[1].type", "afterStageTasks must differ in type")
            ]
        },
    )
    """What must happen after every cluster of the stage succeeded, before the next stage starts: at
    most two tasks of different types (a TimedWait and an Approval run at the same time). Skipped
    when the stage has no clusters."""

    webhooks: list[WebhookGate] | None = webhooks_field()  # type: ignore[assignment]
    analyses: list[AnalysisGate] | None = analyses_field()  # type: ignore[assignment]

    @model_validator(mode="after")
    def _tasks(self) -> StageConfig:
        check_unique_webhooks(self.webhooks)
        check_unique_analyses(self.analyses)
        for i, t in enumerate(self.before_stage_tasks or []):
            if t.type != "Approval":
                raise ValueError(f"beforeStageTasks[{i}].type: beforeStageTasks may only contain Approval")
        after = self.after_stage_tasks or []
        if len(after) == 2 and after[0].type == after[1].type:
            raise ValueError("afterStageTasks[1].type: afterStageTasks must differ in type")
        return self


UNIQUE_STAGES_CEL = cel(
    "self.stages.all(x, self.stages.exists_one(y, y.name == x.name))", "stage names must be unique"
)


class StagedUpdateStrategySpec(Model):
    """The stages of a staged update, and what a run does when clusters fail."""

    model_config = validations(UNIQUE_STAGES_CEL)

    stages: list[StageConfig] = Field(
        max_length=MAX_STAGES,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )
    """The stages, up to 31 with unique names, run one after another in the order listed."""
    # fleetwave's (KubeFleet has none): how many clusters a run of this strategy may lose, and what
    # a run does once it fails.
    failure_budget: FailureBudget | None = None
    """fleetwave's: how many clusters a run of this strategy may lose and still go on. Omitted: a
    failed cluster holds its stage (with onFailure Rollback, the run fails at the first one)."""
    on_failure: OnFailure = Field(
        default="Halt",
        description="What a run of this strategy does once it fails (its failure budget exceeded, or "
        "the progress deadline): Halt stops where it is; Rollback returns every cluster the run "
        "updated to the snapshot of the last run of the placement that succeeded, in reverse stage "
        "order, and the run ends Succeeded=False reason UpdateRunRolledBack. With Rollback and no "
        "failureBudget, no cluster may fail. Defaults to Halt.",
    )

    @model_validator(mode="after")
    def _unique(self) -> StagedUpdateStrategySpec:
        check_unique_names([s.name for s in self.stages], "stages")
        return self


class ClusterStagedUpdateStrategy(Resource):
    """The stages a ClusterStagedUpdateRun goes through: which clusters each stage takes, in which
    order, how many at once, and the waits and approvals before and after each (KubeFleet's
    ClusterStagedUpdateStrategy)."""

    kind_name: ClassVar[str] = "ClusterStagedUpdateStrategy"
    plural: ClassVar[str] = "clusterstagedupdatestrategies"
    namespaced: ClassVar[bool] = False
    short_names: ClassVar[tuple[str, ...]] = ("csus",)
    printer_columns = (AGE,)

    kind: Literal["ClusterStagedUpdateStrategy"] = "ClusterStagedUpdateStrategy"
    spec: StagedUpdateStrategySpec
    """The stages staged update runs go through. A run copies them when it starts: later edits do
    not change runs already started."""


class StagedUpdateStrategy(Resource):
    """The stages a StagedUpdateRun in the same namespace goes through: which clusters each stage takes,
    in which order, how many at once, and the waits and approvals before and after each (KubeFleet's
    StagedUpdateStrategy)."""

    kind_name: ClassVar[str] = "StagedUpdateStrategy"
    plural: ClassVar[str] = "stagedupdatestrategies"
    namespaced: ClassVar[bool] = True
    short_names: ClassVar[tuple[str, ...]] = ("sus",)
    printer_columns = (AGE,)

    kind: Literal["StagedUpdateStrategy"] = "StagedUpdateStrategy"
    spec: StagedUpdateStrategySpec
    """The stages staged update runs go through. A run copies them when it starts: later edits do
    not change runs already started."""


# ---- staged update runs ----

RUN_STATE_CEL = cel(
    "oldSelf == self || (oldSelf == 'Initialize' && self == 'Run') || (oldSelf == 'Run' && self == 'Stop')"
    " || (oldSelf == 'Stop' && self == 'Run')",
    "allowed state transitions are Initialize->Run, Run->Stop and Stop->Run",
)
IMMUTABLE = cel("self == oldSelf", "field is immutable")


class UpdateRunSpec(Model):
    """Which placement, snapshot and strategy a staged update run uses, and whether it runs."""

    model_config = validations(
        cel(
            "has(self.resourceSnapshotIndex) == has(oldSelf.resourceSnapshotIndex) &&"
            " (!has(self.resourceSnapshotIndex) ||"
            " self.resourceSnapshotIndex == oldSelf.resourceSnapshotIndex)",
            "resourceSnapshotIndex is immutable",
        ),
    )

    placement_name: str = Field(
        max_length=255, json_schema_extra={"minLength": 1, "x-kubernetes-validations": [IMMUTABLE]}
    )
    """Name of the placement whose content the run rolls out: a ClusterResourcePlacement, or for a
    StagedUpdateRun a ResourcePlacement of its namespace. The placement must use strategy type
    External. Immutable."""
    resource_snapshot_index: str | None = Field(None, pattern=r"^(0|[1-9][0-9]*)$", max_length=20)
    """Index of the placement's resource snapshot to roll out, such as `3`. Omitted: the newest
    snapshot when the run starts. The run waits for an index not made yet and fails on one already
    deleted. Immutable."""
    staged_rollout_strategy_name: str = Field(
        max_length=255, json_schema_extra={"minLength": 1, "x-kubernetes-validations": [IMMUTABLE]}
    )
    """Name of the ClusterStagedUpdateStrategy (for a StagedUpdateRun: the StagedUpdateStrategy of its
    namespace) that gives the stages. The run copies it when it starts. Immutable."""
    # Default Run, not upstream's Initialize: the docs' examples expect a new run to start (ADR 0012).
    state: Literal["Initialize", "Run", "Stop"] = Field(
        "Run", json_schema_extra={"x-kubernetes-validations": [RUN_STATE_CEL]}
    )
    """`Run` (the default; KubeFleet's is `Initialize`) rolls out. `Initialize` prepares the plan
    without rolling out. `Stop` pauses: clusters already updating finish and nothing new starts. It
    may change from Initialize to Run, from Run to Stop and from Stop to Run."""


class StageTaskStatus(StatusModel):
    """Progress of one before-stage or after-stage task, written by the controller."""

    type: str
    """The task's type: TimedWait or Approval."""
    approval_request_name: str | None = None
    """For an Approval task: the name of the approval request to approve."""
    conditions: list[Condition] | None = None
    """Set by the controller: `ApprovalRequestCreated` and `ApprovalRequestApproved` for an Approval
    task, `WaitTimeElapsed` for a TimedWait."""


class ClusterUpdatingStatus(StatusModel):
    """Progress of one cluster in a stage, written by the controller."""

    cluster_name: str
    """Name of the MemberCluster (`namespace/name` when the name is used in more than one namespace)."""
    resource_override_snapshots: list[FreeForm] | None = None  # upstream's NamespacedName: {name, namespace}
    """The ResourceOverride snapshots (name and namespace) chosen for this cluster when the run
    started; the run applies exactly these."""
    cluster_resource_override_snapshots: list[str] | None = None  # snapshot names
    """Names of the ClusterResourceOverride snapshots chosen for this cluster when the run started;
    the run applies exactly these."""
    conditions: list[Condition] | None = None
    """Set by the controller once the cluster's update started: `Started`, `Succeeded`, and
    `Overridden` (False) when an override could not be applied."""


class StageUpdatingStatus(StatusModel):
    """Progress of one stage of a staged update run, written by the controller."""

    stage_name: str
    """Name of the stage; `kubernetes-fleet.io/deleteStage` for the deletion stage."""
    start_time: str | None = None
    """When the stage started (RFC 3339)."""
    end_time: str | None = None
    """When the stage succeeded (RFC 3339)."""
    before_stage_task_status: list[StageTaskStatus] | None = None
    """Progress of the stage's before-stage tasks."""
    after_stage_task_status: list[StageTaskStatus] | None = None
    """Progress of the stage's after-stage tasks."""
    clusters: list[ClusterUpdatingStatus] | None = None
    """The stage's clusters, in the order they are updated."""
    conditions: list[Condition] | None = None
    """Set by the controller: the stage's `Progressing` and `Succeeded` conditions."""


class UpdateRunStatus(StatusModel):
    """Observed state of a staged update run, written by the controller."""

    policy_snapshot_index_used: str | None = None
    """Set by the controller. fleetwave keeps no scheduling policy snapshots, so this is always `0`;
    kept for compatibility with KubeFleet."""
    policy_observed_cluster_count: int | None = None
    """Set by the controller when the run starts: how many clusters the placement picked."""
    resource_snapshot_index_used: str | None = None
    """Set by the controller when the run starts: the index of the resource snapshot the run rolls
    out, whether named in spec or the newest one."""
    applied_strategy: FreeForm | None = None
    """Set by the controller when the run starts: a copy of the placement's applyStrategy at that
    time, for reference. Deliveries follow the placement's current applyStrategy."""
    staged_update_strategy_snapshot: StagedUpdateStrategySpec | None = None
    """Set by the controller when the run starts: the strategy's spec as the run follows it. Later
    edits of the strategy do not change the run."""
    stages_status: list[StageUpdatingStatus] | None = None
    """Set by the controller: the progress of each stage, in order, listing all its clusters."""
    deletion_stage_status: StageUpdatingStatus | None = None
    """Set by the controller: the clusters that held the placement's content but are no longer
    picked. The content is removed from them after the last stage."""
    conditions: list[Condition] | None = None
    """Set by the controller: the run's `Initialized`, `Progressing` and `Succeeded` conditions."""
    deliveries: AtomicMap | None = _DELIVERIES
    deletions: AtomicMap | None = _DELETIONS


_RUN_COLUMNS = (
    column("Placement", ".spec.placementName"),
    # The index actually rolled out (spec's is blank when the run snapshots the placement itself).
    column("Resource-Snapshot-Index", ".status.resourceSnapshotIndexUsed"),
    column("Policy-Snapshot-Index", ".status.policySnapshotIndexUsed"),
    condition_column("Initialized", "Initialized"),
    condition_column("Progressing", "Progressing"),
    condition_column("Succeeded", "Succeeded"),
    AGE,
    column("State", ".spec.state", priority=1),
    column("Strategy", ".spec.stagedRolloutStrategyName", priority=1),
)
_RUN_NAME_RULE = (cel("size(self.metadata.name) < 64", "metadata.name must be shorter than 64 characters"),)


class ClusterStagedUpdateRun(Resource):
    """Rolls one resource snapshot of a ClusterResourcePlacement out to its clusters, stage by stage, as
    a ClusterStagedUpdateStrategy says (KubeFleet's ClusterStagedUpdateRun)."""

    kind_name: ClassVar[str] = "ClusterStagedUpdateRun"
    plural: ClassVar[str] = "clusterstagedupdateruns"
    namespaced: ClassVar[bool] = False
    short_names: ClassVar[tuple[str, ...]] = ("csur",)
    printer_columns = _RUN_COLUMNS
    root_validations = _RUN_NAME_RULE

    kind: Literal["ClusterStagedUpdateRun"] = "ClusterStagedUpdateRun"
    spec: UpdateRunSpec
    """Which placement, snapshot and strategy the run uses, and whether it runs."""
    status: UpdateRunStatus | None = None
    """Set by the controller: the run's frozen plan and its progress."""


class StagedUpdateRun(Resource):
    """Rolls one resource snapshot of a ResourcePlacement out to its clusters, stage by stage, as a
    StagedUpdateStrategy says (KubeFleet's StagedUpdateRun)."""

    kind_name: ClassVar[str] = "StagedUpdateRun"
    plural: ClassVar[str] = "stagedupdateruns"
    namespaced: ClassVar[bool] = True
    short_names: ClassVar[tuple[str, ...]] = ("sur",)
    printer_columns = _RUN_COLUMNS
    root_validations = _RUN_NAME_RULE

    kind: Literal["StagedUpdateRun"] = "StagedUpdateRun"
    spec: UpdateRunSpec
    """Which placement, snapshot and strategy the run uses, and whether it runs."""
    status: UpdateRunStatus | None = None
    """Set by the controller: the run's frozen plan and its progress."""


# ---- approval requests ----


class ApprovalRequestSpec(Model):
    """Which run and stage an approval is for. Set by the run that creates the request; immutable."""

    model_config = validations(IMMUTABLE)

    parent_stage_rollout: str
    """Name of the staged update run waiting for this approval."""
    target_stage: str
    """Name of the stage the approval is for."""


class ApprovalRequestStatus(StatusModel):
    """Approve a request by setting its Approved condition here."""

    conditions: list[Condition] | None = None
    """`Approved`: set to True by whoever approves (through the status subresource), with
    observedGeneration equal to the request's generation or left out. `ApprovalAccepted`: set by the
    controller when the run takes the approval; an accepted approval cannot be withdrawn."""


_APPROVAL_COLUMNS = (
    column("Update-Run", ".spec.parentStageRollout"),
    column("Stage", ".spec.targetStage"),
    condition_column("Approved", "Approved"),
    condition_column("Approval-Accepted", "ApprovalAccepted"),
    AGE,
)


class ClusterApprovalRequest(Resource):
    """Created by the controller when a stage of a ClusterStagedUpdateRun waits for approval; approve it
    by setting its Approved condition to True (`fleetwave approve run` does)."""

    kind_name: ClassVar[str] = "ClusterApprovalRequest"
    plural: ClassVar[str] = "clusterapprovalrequests"
    namespaced: ClassVar[bool] = False
    short_names: ClassVar[tuple[str, ...]] = ("careq",)
    printer_columns = _APPROVAL_COLUMNS

    kind: Literal["ClusterApprovalRequest"] = "ClusterApprovalRequest"
    spec: ApprovalRequestSpec
    """Which run and stage the approval is for. Set by the run that creates the request; immutable."""
    status: ApprovalRequestStatus | None = None
    """Approve the request by setting its `Approved` condition to True here."""


class ApprovalRequest(Resource):
    """Created by the controller when a stage of a StagedUpdateRun waits for approval; approve it by
    setting its Approved condition to True (`fleetwave approve run` does)."""

    kind_name: ClassVar[str] = "ApprovalRequest"
    plural: ClassVar[str] = "approvalrequests"
    namespaced: ClassVar[bool] = True
    short_names: ClassVar[tuple[str, ...]] = ("areq",)
    printer_columns = _APPROVAL_COLUMNS

    kind: Literal["ApprovalRequest"] = "ApprovalRequest"
    spec: ApprovalRequestSpec
    """Which run and stage the approval is for. Set by the run that creates the request; immutable."""
    status: ApprovalRequestStatus | None = None
    """Approve the request by setting its `Approved` condition to True here."""
