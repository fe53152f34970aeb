"""Sveltos-family kinds in the native group: ClusterProfile, ClusterPromotion, ClusterSummary.

Field names and defaults follow addon-controller/libsveltos v1beta1 (see shared/spec/sveltos-promotion.md).
Deliberate deviations are recorded in docs/adr/0012-spec-gap-decisions.md.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, model_validator

from fleetwave.api.analyses import AnalysisGate, analyses_field
from fleetwave.api.analyses import check_unique as check_unique_analyses
from fleetwave.api.meta import (
    AGE,
    Condition,
    Cron,
    DNSLabel,
    Duration,
    FailureBudget,
    FreeForm,
    LabelSelector,
    MaxUpdate,
    Model,
    ObjectReference,
    OnFailure,
    Resource,
    StatusModel,
    cel,
    column,
    condition_column,
    validations,
)
from fleetwave.api.validation import check_unique_names
from fleetwave.api.webhooks import WebhookGate, webhooks_field
from fleetwave.api.webhooks import check_unique as check_unique_webhooks

FeatureID = Literal["Resources", "Helm", "Kustomize"]
SourceKind = Literal["ConfigMap", "Secret", "GitRepository", "OCIRepository", "Bucket"]
MAX_STAGES = 64
# Lists whose items carry CEL rules need a bound, or the apiserver's cost estimate assumes ~1M items.
MAX_LIST = 128


class SecretRef(Model):
    name: str
    namespace: str | None = None


class RemoteURL(Model):
    url: str
    interval: Duration | None = None
    secret_ref: SecretRef | None = None
    template: bool | None = None
    insecure_skip_tls_verify: bool | None = Field(None, alias="insecureSkipTLSVerify")
    plain_http: bool | None = Field(None, alias="plainHTTP")


class PolicyRef(Model):
    """A ConfigMap/Secret/Flux source (or remote URL) whose content is deployed."""

    model_config = validations(
        cel("has(self.kind) != has(self.remoteURL)", "set exactly one of kind or remoteURL")
    )

    kind: SourceKind | None = None
    namespace: str | None = None
    name: str | None = None
    path: str | None = None
    remote_url: RemoteURL | None = Field(None, alias="remoteURL")
    deployment_type: Literal["Remote", "Local"] = "Remote"
    optional: bool = False
    tier: int = Field(100, ge=1)
    skip_namespace_creation: bool | None = None
    force: bool | None = None

    @model_validator(mode="after")
    def _one_source(self) -> PolicyRef:
        if (self.kind is None) == (self.remote_url is None):
            raise ValueError("set exactly one of kind or remoteURL")
        return self


class ValueFrom(Model):
    kind: Literal["ConfigMap", "Secret"]
    namespace: str | None = None
    name: str
    optional: bool = False


class HelmChart(Model):
    repository_url: str = Field(alias="repositoryURL")
    repository_name: str | None = None
    chart_name: str | None = None
    chart_version: str | None = None
    release_name: str
    release_namespace: str
    values: str | None = None
    values_from: list[ValueFrom] | None = None
    helm_chart_action: Literal["Install", "Uninstall"] = "Install"
    options: FreeForm | None = None
    registry_credentials_config: FreeForm | None = None
    signature_verification: FreeForm | None = None
    provenance_verification: FreeForm | None = None


class KustomizationRef(Model):
    kind: SourceKind | None = None
    namespace: str | None = None
    name: str | None = None
    remote_url: RemoteURL | None = Field(None, alias="remoteURL")
    path: str | None = None
    components: list[str] | None = None
    target_namespace: str | None = None
    deployment_type: Literal["Remote", "Local"] = "Remote"
    values: dict[str, str] | None = None
    values_from: list[ValueFrom] | None = None
    tier: int = Field(100, ge=1)
    optional: bool = False
    skip_namespace_creation: bool | None = None
    force: bool | None = None


class LabelFilter(Model):
    key: str
    operation: Literal["Equal", "Different", "Has", "DoesNotHave"]
    value: str | None = None


class MetricSource(Model):
    url: str
    path: str = "api/v1/query"
    secret_ref: SecretRef | None = None


class MetricQuery(Model):
    name: str
    query: str


class CELRule(Model):
    """One CEL health rule. Canonical field is `rule`; the docs' `expression` is accepted by the codec.
    The object is bound to both `resource` (upstream) and `self` (docs) when evaluated."""

    name: str
    rule: str


class JobCheck(Model):
    job_ref: PolicyRef
    timeout: Duration = "5m"


class ValidateHealth(Model):
    """libsveltos ValidateHealth. `resourceName` is a fleetwave extension carrying the docs form's
    resource-name filter; `featureID` is optional (absent: checked after every feature of the profile)."""

    model_config = validations(
        cel(
            "!has(self.jobCheck) || (!has(self.script) && !has(self.evaluateCEL))",
            "jobCheck cannot be combined with script or evaluateCEL",
        )
    )

    name: str
    feature_id: FeatureID | None = Field(None, alias="featureID")
    group: str | None = None
    version: str | None = None
    kind: str | None = None
    namespace: str | None = None
    resource_name: str | None = None
    label_filters: list[LabelFilter] | None = None
    metric_source: MetricSource | None = None
    metric_queries: list[MetricQuery] | None = None
    script: str | None = None
    evaluate_cel: list[CELRule] | None = Field(None, alias="evaluateCEL")
    job_check: JobCheck | None = None

    @model_validator(mode="after")
    def _job_check_alone(self) -> ValidateHealth:
        if self.job_check is not None and (self.script is not None or self.evaluate_cel is not None):
            raise ValueError("jobCheck cannot be combined with script or evaluateCEL")
        return self


class TemplateResourceRef(Model):
    resource: ObjectReference
    identifier: str
    optional: bool = False
    ignore_status_changes: bool | None = None
    watch_fields: list[str] | None = None


class PatchSelector(Model):
    group: str | None = None
    version: str | None = None
    kind: str | None = None
    name: str | None = None
    namespace: str | None = None
    label_selector: str | None = None
    annotation_selector: str | None = None


class Patch(Model):
    patch: str
    target: PatchSelector | None = None


class DriftExclusion(Model):
    paths: list[str]
    target: PatchSelector | None = None


class ProfileSpec(Model):
    """ClusterProfile spec minus cluster selection: the shared part a ClusterPromotion copies per stage."""

    sync_mode: Literal["OneTime", "Continuous", "ContinuousWithDriftDetection", "DryRun"] = "Continuous"
    tier: int = Field(100, ge=1)
    continue_on_conflict: bool = False
    continue_on_error: bool = False
    max_update: MaxUpdate | None = None
    stop_matching_behavior: Literal["WithdrawPolicies", "LeavePolicies"] = "WithdrawPolicies"
    reloader: bool = False
    template_resource_refs: list[TemplateResourceRef] | None = Field(None, max_length=MAX_LIST)
    depends_on: list[str] | None = None
    policy_refs: list[PolicyRef] | None = Field(None, max_length=MAX_LIST)
    helm_charts: list[HelmChart] | None = Field(None, max_length=MAX_LIST)
    kustomization_refs: list[KustomizationRef] | None = Field(None, max_length=MAX_LIST)
    pre_deploy_checks: list[ValidateHealth] | None = Field(None, max_length=MAX_LIST)
    validate_healths: list[ValidateHealth] | None = Field(None, max_length=MAX_LIST)
    pre_delete_checks: list[ValidateHealth] | None = Field(None, max_length=MAX_LIST)
    post_delete_checks: list[ValidateHealth] | None = Field(None, max_length=MAX_LIST)
    patches: list[Patch] | None = Field(None, max_length=MAX_LIST)
    patches_from: list[ValueFrom] | None = None
    drift_exclusions: list[DriftExclusion] | None = Field(None, max_length=MAX_LIST)
    max_consecutive_failures: int | None = Field(None, ge=0)


class ClusterProfileSpec(ProfileSpec):
    cluster_selector: LabelSelector | None = None
    cluster_refs: list[ObjectReference] | None = None
    set_refs: list[str] | None = None
    extra_labels: dict[str, str] | None = None
    extra_annotations: dict[str, str] | None = None


class ClustersWithHash(StatusModel):
    hash: str | None = None
    clusters: list[ObjectReference] | None = None


class FailedCluster(StatusModel):
    cluster_ref: ObjectReference | None = None
    failure_message: str | None = None
    last_failure_time: str | None = None


class ClusterProfileStatus(StatusModel):
    matching_clusters: list[ObjectReference] | None = None
    updating_clusters: ClustersWithHash | None = None
    updated_clusters: ClustersWithHash | None = None
    failed_clusters: list[FailedCluster] | None = None
    dependencies_hash: str | None = None
    reconciliation_suspended: bool | None = None
    suspension_reason: str | None = None
    conditions: list[Condition] | None = None


class ClusterProfile(Resource):
    kind_name: ClassVar[str] = "ClusterProfile"
    plural: ClassVar[str] = "clusterprofiles"
    namespaced: ClassVar[bool] = False
    short_names: ClassVar[tuple[str, ...]] = ("cprof",)
    printer_columns: ClassVar[tuple[dict[str, object], ...]] = (
        column("Sync-Mode", ".spec.syncMode"),
        column("Max-Update", ".spec.maxUpdate"),
        condition_column("Ready", "Ready"),
        AGE,
    )

    kind: Literal["ClusterProfile"] = "ClusterProfile"
    spec: ClusterProfileSpec = Field(default_factory=ClusterProfileSpec)
    status: ClusterProfileStatus | None = None


# ---- ClusterPromotion ----


class _TriggerCommon(Model):
    delay: Duration | None = None
    pre_health_check_deployment: list[PolicyRef] | None = Field(None, max_length=MAX_LIST)
    post_delay_health_checks: list[ValidateHealth] | None = Field(None, max_length=MAX_LIST)


class TimeWindow(Model):
    """Opens at each `from` cron fire, closes at the next `to` fire (UTC unless the engine says otherwise)."""

    from_: Cron = Field(alias="from")
    to: Cron


class AutoTrigger(_TriggerCommon):
    promotion_window: TimeWindow | None = None


class ManualTrigger(_TriggerCommon):
    approved: bool | None = None
    automatic_reset: bool = True


class Trigger(Model):
    model_config = validations(cel("has(self.auto) != has(self.manual)", "set exactly one of auto or manual"))

    auto: AutoTrigger | None = None
    manual: ManualTrigger | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> Trigger:
        if (self.auto is None) == (self.manual is None):
            raise ValueError("set exactly one of auto or manual")
        return self


class Stage(Model):
    name: DNSLabel
    cluster_selector: LabelSelector | None = None
    trigger: Trigger | None = None
    webhooks: list[WebhookGate] | None = webhooks_field()  # type: ignore[assignment]
    analyses: list[AnalysisGate] | None = analyses_field()  # type: ignore[assignment]

    @model_validator(mode="after")
    def _unique_webhooks(self) -> Stage:
        check_unique_webhooks(self.webhooks)
        check_unique_analyses(self.analyses)
        return self


UNIQUE_STAGES_CEL = cel(
    "self.stages.all(x, self.stages.exists_one(y, y.name == x.name))", "stage names must be unique"
)


class ClusterPromotionSpec(Model):
    model_config = validations(UNIQUE_STAGES_CEL)

    profile_spec: ProfileSpec = Field(default_factory=ProfileSpec)
    stages: list[Stage] = Field(
        min_length=1,
        max_length=MAX_STAGES,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )
    preserve_cluster_profiles_on_delete: bool = False
    failure_budget: FailureBudget | None = None
    # fleetwave's (Sveltos has none): clusters in flight finish, nothing new starts until false again.
    paused: bool = Field(
        default=False,
        description="Pause the promotion: clusters already being updated finish, no other cluster "
        "or stage starts, gate timers keep their start. Set back to false (or `fleetwave resume "
        "promotion NAME`) to go on from where it stopped.",
    )

    # fleetwave's: how long a stage may go without progress, and a cluster stay unavailable, before
    # the promotion fails (with a failureBudget, the cluster alone fails and counts against it).
    progress_deadline: Duration | None = Field(
        default=None,
        description="How long a stage may make no progress before the promotion fails; with a "
        "failureBudget, how long a cluster whose delivery applied may stay unavailable before it "
        "counts as failed. Unset: no deadline.",
    )

    on_failure: OnFailure = Field(
        default="Halt",
        description="What the promotion does once it fails (a failure budget exceeded, or the "
        "progress deadline): Halt stops where it is; Rollback returns every cluster it updated to "
        "the last revision that succeeded, in reverse stage order. With Rollback and no "
        "failureBudget, no cluster may fail.",
    )

    @model_validator(mode="after")
    def _unique(self) -> ClusterPromotionSpec:
        check_unique_names([s.name for s in self.stages], "stages")
        return self


class StageStatus(StatusModel):
    name: str
    last_update_reconciled_time: str | None = None
    last_successful_applied_time: str | None = None
    last_status_check_time: str | None = None
    failure_message: str | None = None
    current_status_description: str | None = None


class ClusterPromotionStatus(StatusModel):
    profile_spec_hash: str | None = None
    stages_hash: str | None = None
    current_stage_name: str | None = None
    last_promotion_time: str | None = None
    stages: list[StageStatus] | None = None
    conditions: list[Condition] | None = None


class ClusterPromotion(Resource):
    kind_name: ClassVar[str] = "ClusterPromotion"
    plural: ClassVar[str] = "clusterpromotions"
    namespaced: ClassVar[bool] = False
    short_names: ClassVar[tuple[str, ...]] = ("cpromo",)
    printer_columns: ClassVar[tuple[dict[str, object], ...]] = (
        column("Current-Stage", ".status.currentStageName"),
        condition_column("Ready", "Ready"),
        column("Last-Promotion", ".status.lastPromotionTime", "date", priority=1),
        AGE,
    )

    kind: Literal["ClusterPromotion"] = "ClusterPromotion"
    spec: ClusterPromotionSpec
    status: ClusterPromotionStatus | None = None


# ---- ClusterSummary ----


class ClusterSummarySpec(Model):
    cluster_namespace: str
    cluster_name: str
    cluster_type: Literal["Capi", "Sveltos"] = "Sveltos"
    cluster_profile_spec: ClusterProfileSpec = Field(default_factory=ClusterProfileSpec)


class FeatureSummary(StatusModel):
    feature_id: str = Field(alias="featureID")
    hash: str | None = None
    status: str | None = None
    consecutive_failures: int | None = None
    failure_reason: str | None = None
    failure_message: str | None = None
    last_applied_time: str | None = None


class DeployedGVKs(StatusModel):
    feature_id: str = Field(alias="featureID")
    deployed_group_version_kind: list[str] | None = None


class HelmReleaseSummary(StatusModel):
    release_name: str
    release_namespace: str
    status: str | None = None
    values_hash: str | None = None
    conflict_message: str | None = None
    failure_message: str | None = None


class ClusterSummaryStatus(StatusModel):
    feature_summaries: list[FeatureSummary] | None = None
    deployed_gvks: list[DeployedGVKs] | None = Field(None, alias="deployedGVKs")
    helm_release_summaries: list[HelmReleaseSummary] | None = None
    dependencies: str | None = None
    next_reconcile_time: str | None = None
    failure_message: str | None = None
    reconciliation_suspended: bool | None = None
    suspension_reason: str | None = None
    conditions: list[Condition] | None = None


class ClusterSummary(Resource):
    kind_name: ClassVar[str] = "ClusterSummary"
    plural: ClassVar[str] = "clustersummaries"
    namespaced: ClassVar[bool] = True
    short_names: ClassVar[tuple[str, ...]] = ("csum",)
    printer_columns: ClassVar[tuple[dict[str, object], ...]] = (
        column("Cluster", ".spec.clusterName"),
        column("Profile", ".metadata.labels.projectsveltos\\.io/cluster-profile-name"),
        condition_column("Ready", "Ready"),
        AGE,
    )

    kind: Literal["ClusterSummary"] = "ClusterSummary"
    spec: ClusterSummarySpec
    status: ClusterSummaryStatus | None = None
