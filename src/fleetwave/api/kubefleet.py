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
    model_config = validations(
        cel("!(has(self.name) && has(self.labelSelector))", "set name or labelSelector, not both")
    )

    group: str
    version: str
    kind: str
    name: str | None = None
    label_selector: LabelSelector | None = None
    selection_scope: (
        Literal["NamespaceOnly", "NamespaceWithResources", "NamespaceWithResourceSelectors"] | None
    ) = None

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
    operator: Literal["Gt", "Ge", "Eq", "Ne", "Lt", "Le"]
    values: list[Quantity] = Field(min_length=1, max_length=1)


class PropertySelector(Model):
    match_expressions: list[PropertySelectorRequirement]  # ANDed


class PropertySorter(Model):
    """Weights a preferred term by where a cluster's value of `name` lies between the lowest and
    the highest value among the eligible clusters (Descending: the highest gets the full weight)."""

    name: PropertyName
    sort_order: Literal["Ascending", "Descending"]


class ClusterSelectorTerm(Model):
    label_selector: LabelSelector | None = None
    property_selector: PropertySelector | None = None
    property_sorter: PropertySorter | None = None


_DECIMAL = re.compile(v.DECIMAL_PATTERN)


def property_number(value: str) -> Decimal | None:
    """A property value as a number; None when it is not a plain decimal (Kubernetes quantity
    suffixes such as `Gi` or `m` are not read)."""
    return Decimal(value) if _DECIMAL.fullmatch(value) else None


class ClusterSelector(Model):
    cluster_selector_terms: list[ClusterSelectorTerm] = Field(max_length=10)


class PreferredClusterSelector(Model):
    weight: int = Field(ge=-100, le=100)
    preference: ClusterSelectorTerm


class ClusterAffinity(Model):
    required_during_scheduling_ignored_during_execution: ClusterSelector | None = None
    preferred_during_scheduling_ignored_during_execution: list[PreferredClusterSelector] | None = None


class Affinity(Model):
    cluster_affinity: ClusterAffinity | None = None


class TopologySpreadConstraint(Model):
    max_skew: int = Field(1, ge=1)
    topology_key: str
    when_unsatisfiable: Literal["DoNotSchedule", "ScheduleAnyway"] | None = None


class Toleration(Model):
    key: str | None = None
    operator: Literal["Exists", "Equal"] | None = None
    value: str | None = None
    effect: Literal["NoSchedule"] | None = None


class PlacementPolicy(Model):
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
    cluster_names: list[str] | None = Field(None, max_length=100)
    number_of_clusters: int | None = Field(None, ge=0)
    affinity: Affinity | None = None
    topology_spread_constraints: list[TopologySpreadConstraint] | None = None
    tolerations: list[Toleration] | None = Field(None, max_length=100)

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
    max_unavailable: IntOrPercent = "25%"
    max_surge: IntOrPercent = "25%"
    unavailable_period_seconds: int = Field(60, ge=0)


class ServerSideApplyConfig(Model):
    force: bool = False


class ApplyStrategy(Model):
    type: Literal["ClientSideApply", "ServerSideApply", "ReportDiff"] = "ClientSideApply"
    comparison_option: Literal["PartialComparison", "FullComparison"] = "PartialComparison"
    when_to_apply: Literal["Always", "IfNotDrifted"] = "Always"
    when_to_take_over: Literal["Always", "IfNoDiff", "Never"] = "Always"
    allow_co_ownership: bool | None = None
    server_side_apply_config: ServerSideApplyConfig | None = None


class DeleteStrategy(Model):
    propagation_policy: Literal["Delete", "Abandon"] = "Delete"


class ReportBackStrategy(Model):
    type: Literal["Disabled", "Mirror"] = "Disabled"
    destination: Literal["OriginalResource", "WorkAPI"] | None = None


class RolloutStrategy(Model):
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
    rolling_update: RollingUpdateConfig | None = None
    apply_strategy: ApplyStrategy | None = None
    delete_strategy: DeleteStrategy | None = None
    report_back_strategy: ReportBackStrategy | None = None

    @model_validator(mode="after")
    def _external(self) -> RolloutStrategy:
        if self.type == "External" and self.rolling_update is not None:
            raise ValueError("rollingUpdate: rollingUpdate is not allowed with External")
        return self


class PlacementSpec(Model):
    resource_selectors: list[ResourceSelector] = Field(min_length=1, max_length=100)
    policy: PlacementPolicy | None = None
    strategy: RolloutStrategy = Field(default_factory=RolloutStrategy)
    revision_history_limit: int = Field(10, ge=1, le=1000)
    status_reporting_scope: Literal["ClusterScopeOnly", "NamespaceAccessible"] | None = None


class PlacementStatus(StatusModel):
    selected_resources: list[FreeForm] | None = None
    observed_resource_index: str | None = None
    placement_statuses: list[FreeForm] | None = None
    conditions: list[Condition] | None = None


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
    kind_name: ClassVar[str] = "ClusterResourcePlacement"
    plural: ClassVar[str] = "clusterresourceplacements"
    namespaced: ClassVar[bool] = False
    short_names: ClassVar[tuple[str, ...]] = ("crp",)
    printer_columns = _placement_columns("ClusterResourcePlacement")

    kind: Literal["ClusterResourcePlacement"] = "ClusterResourcePlacement"
    spec: PlacementSpec
    status: PlacementStatus | None = None


class ResourcePlacement(Resource):
    kind_name: ClassVar[str] = "ResourcePlacement"
    plural: ClassVar[str] = "resourceplacements"
    namespaced: ClassVar[bool] = True
    short_names: ClassVar[tuple[str, ...]] = ("rp",)
    printer_columns = _placement_columns("ResourcePlacement")

    kind: Literal["ResourcePlacement"] = "ResourcePlacement"
    spec: PlacementSpec
    status: PlacementStatus | None = None


# ---- resource snapshots ----


class ResourceSnapshotSpec(Model):
    selected_resources: list[FreeForm] = Field(default_factory=list)


class ResourceSnapshotStatus(StatusModel):
    conditions: list[Condition] | None = None


_SNAPSHOT_COLUMNS = (column("Gen", ".metadata.generation", "integer"), AGE)


class ClusterResourceSnapshot(Resource):
    kind_name: ClassVar[str] = "ClusterResourceSnapshot"
    plural: ClassVar[str] = "clusterresourcesnapshots"
    namespaced: ClassVar[bool] = False
    short_names: ClassVar[tuple[str, ...]] = ("crs",)
    printer_columns = _SNAPSHOT_COLUMNS

    kind: Literal["ClusterResourceSnapshot"] = "ClusterResourceSnapshot"
    spec: ResourceSnapshotSpec = Field(default_factory=ResourceSnapshotSpec)
    status: ResourceSnapshotStatus | None = None


class ResourceSnapshot(Resource):
    kind_name: ClassVar[str] = "ResourceSnapshot"
    plural: ClassVar[str] = "resourcesnapshots"
    namespaced: ClassVar[bool] = True
    short_names: ClassVar[tuple[str, ...]] = ("rs",)
    printer_columns = _SNAPSHOT_COLUMNS

    kind: Literal["ResourceSnapshot"] = "ResourceSnapshot"
    spec: ResourceSnapshotSpec = Field(default_factory=ResourceSnapshotSpec)
    status: ResourceSnapshotStatus | None = None


# ---- staged update strategies ----


class StageTask(Model):
    model_config = validations(
        cel(
            "self.type == 'TimedWait' ? has(self.waitTime) : !has(self.waitTime)",
            "TimedWait requires waitTime; Approval must not set it",
        ),
    )

    type: Literal["TimedWait", "Approval"]
    wait_time: Duration | None = None

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
    name: DNSLabel
    label_selector: LabelSelector | None = None
    sorting_label_key: str | None = None
    max_concurrency: MaxConcurrency = 1
    before_stage_tasks: list[StageTask] | None = Field(
        None,
        max_length=1,
        json_schema_extra={
            "x-kubernetes-validations": [
                cel("self.all(t, t.type == 'Approval')", "beforeStageTasks may only contain Approval")
            ]
        },
    )
    after_stage_tasks: list[StageTask] | None = Field(
        None,
        max_length=2,
        json_schema_extra={
            "x-kubernetes-validations": [
                cel("self.size() < 2 || self[0].type != self[1].type", "afterStageTasks must differ in type")
            ]
        },
    )

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
    model_config = validations(UNIQUE_STAGES_CEL)

    stages: list[StageConfig] = Field(
        max_length=MAX_STAGES,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )
    # fleetwave's (KubeFleet has none): how many clusters a run of this strategy may lose, and what
    # a run does once it fails.
    failure_budget: FailureBudget | None = None
    on_failure: OnFailure = Field(
        default="Halt",
        description="What a run of this strategy does once it fails (its failure budget exceeded, or "
        "the progress deadline): Halt stops where it is; Rollback returns every cluster the run "
        "updated to the snapshot of the last run of the placement that succeeded, in reverse stage "
        "order, and the run ends Succeeded=False reason UpdateRunRolledBack. With Rollback and no "
        "failureBudget, no cluster may fail.",
    )

    @model_validator(mode="after")
    def _unique(self) -> StagedUpdateStrategySpec:
        check_unique_names([s.name for s in self.stages], "stages")
        return self


class ClusterStagedUpdateStrategy(Resource):
    kind_name: ClassVar[str] = "ClusterStagedUpdateStrategy"
    plural: ClassVar[str] = "clusterstagedupdatestrategies"
    namespaced: ClassVar[bool] = False
    short_names: ClassVar[tuple[str, ...]] = ("csus",)
    printer_columns = (AGE,)

    kind: Literal["ClusterStagedUpdateStrategy"] = "ClusterStagedUpdateStrategy"
    spec: StagedUpdateStrategySpec


class StagedUpdateStrategy(Resource):
    kind_name: ClassVar[str] = "StagedUpdateStrategy"
    plural: ClassVar[str] = "stagedupdatestrategies"
    namespaced: ClassVar[bool] = True
    short_names: ClassVar[tuple[str, ...]] = ("sus",)
    printer_columns = (AGE,)

    kind: Literal["StagedUpdateStrategy"] = "StagedUpdateStrategy"
    spec: StagedUpdateStrategySpec


# ---- staged update runs ----

RUN_STATE_CEL = cel(
    "oldSelf == self || (oldSelf == 'Initialize' && self == 'Run') || (oldSelf == 'Run' && self == 'Stop')"
    " || (oldSelf == 'Stop' && self == 'Run')",
    "allowed state transitions are Initialize->Run, Run->Stop and Stop->Run",
)
IMMUTABLE = cel("self == oldSelf", "field is immutable")


class UpdateRunSpec(Model):
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
    resource_snapshot_index: str | None = Field(None, pattern=r"^(0|[1-9][0-9]*)$", max_length=20)
    staged_rollout_strategy_name: str = Field(
        max_length=255, json_schema_extra={"minLength": 1, "x-kubernetes-validations": [IMMUTABLE]}
    )
    # Default Run, not upstream's Initialize: the docs' examples expect a new run to start (ADR 0012).
    state: Literal["Initialize", "Run", "Stop"] = Field(
        "Run", json_schema_extra={"x-kubernetes-validations": [RUN_STATE_CEL]}
    )


class StageTaskStatus(StatusModel):
    type: str
    approval_request_name: str | None = None
    conditions: list[Condition] | None = None


class ClusterUpdatingStatus(StatusModel):
    cluster_name: str
    resource_override_snapshots: list[FreeForm] | None = None  # upstream's NamespacedName: {name, namespace}
    cluster_resource_override_snapshots: list[str] | None = None  # snapshot names
    conditions: list[Condition] | None = None


class StageUpdatingStatus(StatusModel):
    stage_name: str
    start_time: str | None = None
    end_time: str | None = None
    before_stage_task_status: list[StageTaskStatus] | None = None
    after_stage_task_status: list[StageTaskStatus] | None = None
    clusters: list[ClusterUpdatingStatus] | None = None
    conditions: list[Condition] | None = None


class UpdateRunStatus(StatusModel):
    policy_snapshot_index_used: str | None = None
    policy_observed_cluster_count: int | None = None
    resource_snapshot_index_used: str | None = None
    applied_strategy: FreeForm | None = None
    staged_update_strategy_snapshot: StagedUpdateStrategySpec | None = None
    stages_status: list[StageUpdatingStatus] | None = None
    deletion_stage_status: StageUpdatingStatus | None = None
    conditions: list[Condition] | None = None


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
    kind_name: ClassVar[str] = "ClusterStagedUpdateRun"
    plural: ClassVar[str] = "clusterstagedupdateruns"
    namespaced: ClassVar[bool] = False
    short_names: ClassVar[tuple[str, ...]] = ("csur",)
    printer_columns = _RUN_COLUMNS
    root_validations = _RUN_NAME_RULE

    kind: Literal["ClusterStagedUpdateRun"] = "ClusterStagedUpdateRun"
    spec: UpdateRunSpec
    status: UpdateRunStatus | None = None


class StagedUpdateRun(Resource):
    kind_name: ClassVar[str] = "StagedUpdateRun"
    plural: ClassVar[str] = "stagedupdateruns"
    namespaced: ClassVar[bool] = True
    short_names: ClassVar[tuple[str, ...]] = ("sur",)
    printer_columns = _RUN_COLUMNS
    root_validations = _RUN_NAME_RULE

    kind: Literal["StagedUpdateRun"] = "StagedUpdateRun"
    spec: UpdateRunSpec
    status: UpdateRunStatus | None = None


# ---- approval requests ----


class ApprovalRequestSpec(Model):
    model_config = validations(IMMUTABLE)

    parent_stage_rollout: str
    target_stage: str


class ApprovalRequestStatus(StatusModel):
    conditions: list[Condition] | None = None


_APPROVAL_COLUMNS = (
    column("Update-Run", ".spec.parentStageRollout"),
    column("Stage", ".spec.targetStage"),
    condition_column("Approved", "Approved"),
    condition_column("Approval-Accepted", "ApprovalAccepted"),
    AGE,
)


class ClusterApprovalRequest(Resource):
    kind_name: ClassVar[str] = "ClusterApprovalRequest"
    plural: ClassVar[str] = "clusterapprovalrequests"
    namespaced: ClassVar[bool] = False
    short_names: ClassVar[tuple[str, ...]] = ("careq",)
    printer_columns = _APPROVAL_COLUMNS

    kind: Literal["ClusterApprovalRequest"] = "ClusterApprovalRequest"
    spec: ApprovalRequestSpec
    status: ApprovalRequestStatus | None = None


class ApprovalRequest(Resource):
    kind_name: ClassVar[str] = "ApprovalRequest"
    plural: ClassVar[str] = "approvalrequests"
    namespaced: ClassVar[bool] = True
    short_names: ClassVar[tuple[str, ...]] = ("areq",)
    printer_columns = _APPROVAL_COLUMNS

    kind: Literal["ApprovalRequest"] = "ApprovalRequest"
    spec: ApprovalRequestSpec
    status: ApprovalRequestStatus | None = None
