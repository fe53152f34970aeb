"""Sveltos-family kinds in the native group: ClusterProfile, ClusterPromotion, ClusterSummary.

Field names and defaults follow addon-controller/libsveltos v1beta1 (see shared/spec/sveltos-promotion.md).
Deliberate deviations are recorded in docs/adr/0012-spec-gap-decisions.md.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import ConfigDict, Field, model_validator

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
    """A reference to a Secret by name and namespace."""

    name: str
    """Name of the Secret."""
    namespace: str | None = None
    """Namespace of the Secret."""


class RemoteURL(Model):
    """Content fetched from a URL instead of a source object. fleetwave does not fetch remote URLs
    yet: a reference that sets remoteURL is refused."""

    url: str
    """The address of the content: an http(s) URL of a file or tar.gz archive, or an `oci://`
    artifact."""
    interval: Duration | None = None
    """How often Sveltos fetches the URL again: a duration such as `5m` or `1h`. Sveltos defaults
    to 5m."""
    secret_ref: SecretRef | None = None
    """A Secret with the credentials for the URL."""
    template: bool | None = None
    """Whether the fetched content is a template, rendered for each cluster."""
    insecure_skip_tls_verify: bool | None = Field(None, alias="insecureSkipTLSVerify")
    """Skip verifying the server's TLS certificate."""
    plain_http: bool | None = Field(None, alias="plainHTTP")
    """Use plain HTTP instead of HTTPS to reach an `oci://` registry."""


class PolicyRef(Model):
    """A ConfigMap, Secret or Flux source whose manifests are deployed (Sveltos also takes remote
    URLs, which fleetwave refuses)."""

    model_config = validations(
        cel("has(self.kind) != has(self.remoteURL)", "set exactly one of kind or remoteURL")
    )

    kind: SourceKind | None = None
    """Kind of the source: `ConfigMap`, or `Secret` of type `addons.projectsveltos.io/cluster-profile`,
    each key of its data holding manifests (YAML or JSON); or Flux's `GitRepository`, `OCIRepository`
    or `Bucket` when the controller runs with `--flux-sources`: the manifests under `path` of the
    artifact its status announces, pinned with its revision. Set exactly one of kind and remoteURL."""
    namespace: str | None = None
    """Namespace of the source. fleetwave requires it: an empty namespace is not read as the
    cluster's own, as Sveltos does, and fleetwave's own namespace is never a source."""
    name: str | None = None
    """Name of the source. Required with kind."""
    path: str | None = None
    """The directory (or one file) inside a Flux source's artifact whose `.yaml`, `.yml` and `.json`
    files are deployed, subdirectories included. Defaults to the artifact's root; refused on a
    ConfigMap or Secret."""
    remote_url: RemoteURL | None = Field(None, alias="remoteURL")
    """Sveltos: content fetched from a URL instead of a source object. fleetwave does not fetch remote
    URLs yet and refuses a reference that sets it."""
    deployment_type: Literal["Remote", "Local"] = "Remote"
    """Where the content goes: `Remote` (the default) to each selected cluster; `Local` to the
    management cluster, once per revision and with only the rights an administrator granted the
    controller."""
    optional: bool = False
    """If true, a missing source is skipped instead of failing the delivery. Defaults to false."""
    tier: int = Field(100, ge=1)
    """Priority of this reference's objects when another profile deploys the same object: compared
    after the profile's own tier, the lower value wins. Defaults to 100."""
    skip_namespace_creation: bool | None = None
    """Sveltos: do not create a missing namespace for the content. fleetwave never creates one for
    policyRef content, so `false` is refused."""
    force: bool | None = None
    """Sveltos: delete and re-create an object whose immutable fields changed. fleetwave does not
    re-create objects; it always applies with force (taking over fields other managers set), so
    `false` is refused."""

    @model_validator(mode="after")
    def _one_source(self) -> PolicyRef:
        if (self.kind is None) == (self.remote_url is None):
            raise ValueError("set exactly one of kind or remoteURL")
        return self


class ValueFrom(Model):
    """A ConfigMap or Secret whose data is read as values."""

    kind: Literal["ConfigMap", "Secret"]
    """`ConfigMap`, or `Secret` of type `addons.projectsveltos.io/cluster-profile`."""
    namespace: str | None = None
    """Namespace of the ConfigMap or Secret. fleetwave requires it: an empty namespace is not read as
    the cluster's own, as Sveltos does."""
    name: str
    """Name of the ConfigMap or Secret."""
    optional: bool = False
    """If true, a missing ConfigMap or Secret is skipped instead of failing the delivery. Defaults to
    false."""


class RegistryCredentialsConfig(Model):
    """How helm reaches a private chart registry or repository: credentials, a CA, TLS and plain HTTP.

    The Secrets are read at each delivery from the management cluster (rotating a password needs no
    new revision) within the content boundary: never fleetwave's own namespace, never a member
    cluster's kubeconfig. Their values reach helm only through files private to one helm process,
    removed when it exits, and never appear in a log, an Event, a status or a message."""

    credentials: SecretRef | None = None
    """The Secret with the credentials; its namespace is required. Either of type
    `kubernetes.io/dockerconfigjson`, whose docker config must have an entry for the host of
    repositoryURL (only that entry is used: the credential reaches no other host), or of type
    `kubernetes.io/basic-auth` with keys `username` and `password` and the annotation
    `fleetwave.io/registry-hosts` naming the hosts (`host` or `host:port`, comma-separated) it may be
    sent to. Any other type is refused."""
    key: str | None = None
    """The key of a `kubernetes.io/dockerconfigjson` Secret that holds the docker config. Defaults to
    `.dockerconfigjson`."""
    ca: SecretRef | None = None
    """A Secret (any type; its namespace is required) whose key `ca.crt` holds the PEM certificates
    that sign the registry's TLS certificate, passed to helm as `--ca-file`."""
    insecure_skip_tls_verify: bool | None = Field(None, alias="insecureSkipTLSVerify")
    """Do not verify the registry's TLS certificate (`--insecure-skip-tls-verify`). Refused together
    with `ca` or `plainHTTP`."""
    plain_http: bool | None = Field(None, alias="plainHTTP")
    """Reach an `oci://` registry over plain HTTP (`--plain-http`). Refused with an `https://`
    repositoryURL, and together with `ca` or `insecureSkipTLSVerify`."""


class HelmChart(Model):
    """A Helm chart installed (or uninstalled) in each cluster."""

    repository_url: str = Field(alias="repositoryURL")
    """Where the chart comes from: an http(s) chart repository or an `oci://` registry. Sveltos'
    Flux-source URLs (`gitrepository://...`) are refused."""
    repository_name: str | None = None
    """Name of the repository, as in `helm repo add NAME`. Accepted for compatibility with Sveltos;
    fleetwave finds the chart from repositoryURL and chartName alone."""
    chart_name: str | None = None
    """Name of the chart, optionally written `<repositoryName>/<chart>`. Required with an http(s)
    repository; with `oci://` it is appended to the URL unless the URL already ends with it."""
    chart_version: str | None = None
    """Version of the chart: an exact version or a constraint such as `^1.2`. Omitted: the latest
    version."""
    release_name: str
    """Name of the Helm release: a DNS-1123 name of at most 53 characters."""
    release_namespace: str
    """Namespace of the release; it is created when missing unless
    `options.installOptions.createNamespace` is false."""
    values: str | None = None
    """Helm values as a YAML document. Text containing `{{` is a Go template, rendered for each
    cluster."""
    values_from: list[ValueFrom] | None = None
    """ConfigMaps or Secrets whose every key holds a YAML values document, merged over `values` in list
    order (a later value wins). A source annotated `projectsveltos.io/template` is rendered for each
    cluster first."""
    helm_chart_action: Literal["Install", "Uninstall"] = "Install"
    """`Install` (the default) installs or upgrades the release; `Uninstall` removes it."""
    options: FreeForm | None = None
    """Helm options, as Sveltos spells them. fleetwave honours `wait`, `waitForJobs`, `skipCRDs`,
    `disableHooks`, `skipSchemaValidation`, `atomic`, `dependencyUpdate`, `timeout`, `description`,
    `installOptions.createNamespace` and `upgradeOptions.force`, `cleanupOnFail` and `maxHistory`;
    any other option is refused unless it is set to what fleetwave does anyway."""
    registry_credentials_config: RegistryCredentialsConfig | None = None
    """Credentials, CA and transport for a private `oci://` registry or http(s) chart repository. The
    Secret references (not their values) are part of the revision; the values are read at each
    delivery."""
    signature_verification: FreeForm | None = None
    """Sveltos: verify the chart's signature with cosign. Not supported by fleetwave yet: a chart that
    sets it is refused."""
    provenance_verification: FreeForm | None = None
    """Sveltos: verify the chart's provenance file with a GPG keyring. Not supported by fleetwave yet:
    a chart that sets it is refused."""


class KustomizationRef(Model):
    """A kustomize directory, built for and deployed to each cluster."""

    kind: SourceKind | None = None
    """Kind of the source: a `ConfigMap` holding the directory as a tar.gz archive in
    `binaryData["kustomize.tar.gz"]`, or a `Secret` (of type `addons.projectsveltos.io/cluster-profile`)
    holding it in `data["kustomize.tar.gz"]`; or Flux's `GitRepository`, `OCIRepository` or `Bucket`
    when the controller runs with `--flux-sources`: its artifact, pinned with its revision."""
    namespace: str | None = None
    """Namespace of the source. fleetwave requires it: an empty namespace is not read as the
    cluster's own, as Sveltos does."""
    name: str | None = None
    """Name of the source. Required."""
    remote_url: RemoteURL | None = Field(None, alias="remoteURL")
    """Sveltos: a directory fetched from a URL. fleetwave does not fetch remote URLs yet and refuses a
    reference that sets it."""
    path: str | None = None
    """The directory inside the archive (or the Flux artifact) to build. Defaults to its root."""
    components: list[str] | None = None
    """Kustomize components to add to the build, as paths inside the archive."""
    target_namespace: str | None = None
    """Namespace set on the objects the build produces. Omitted: as the kustomization says."""
    deployment_type: Literal["Remote", "Local"] = "Remote"
    """Where the output goes: `Remote` (the default), each selected cluster. fleetwave refuses `Local`
    (the management cluster) for kustomizations."""
    values: dict[str, str] | None = None
    """Substitution values: when there are any, the build's output is a Go template rendered with them
    (`{{ .KEY }}`). Each value may itself be a template, rendered for the cluster."""
    values_from: list[ValueFrom] | None = None
    """ConfigMaps or Secrets whose every key is added to `values`; on the same key they win over
    `values`, and a later source over an earlier one."""
    tier: int = Field(100, ge=1)
    """Priority of this reference's objects when another profile deploys the same object: compared
    after the profile's own tier, the lower value wins. Defaults to 100."""
    optional: bool = False
    """If true, a missing source is skipped instead of failing the delivery. Defaults to false."""
    skip_namespace_creation: bool | None = None
    """Sveltos: do not create a missing namespace for the output. fleetwave never creates one, so
    `false` is refused."""
    force: bool | None = None
    """Sveltos: delete and re-create an object whose immutable fields changed. fleetwave always
    applies with force instead, so `false` is refused."""


class LabelFilter(Model):
    """A condition on one label of the checked resources."""

    key: str
    """The label key."""
    operation: Literal["Equal", "Different", "Has", "DoesNotHave"]
    """`Equal` (the label has `value`), `Different` (it is absent or has another value), `Has` (it is
    present) or `DoesNotHave` (it is absent)."""
    value: str | None = None
    """The value to compare with, for `Equal` and `Different`."""


class MetricSource(Model):
    """The Prometheus server a health check's metric queries are sent to."""

    url: str
    """Base URL of the Prometheus server: http:// or https://, without credentials, query or fragment.
    Link-local and cloud-metadata addresses are refused."""
    path: str = "api/v1/query"
    """The instant-query API path under url. Defaults to `api/v1/query`."""
    secret_ref: SecretRef | None = None
    """A Secret in the member cluster (its namespace is required) with the credentials: key `token`
    for a bearer token, or keys `username` and `password` for basic authentication. Omitted: no
    credentials."""


class MetricQuery(Model):
    """A named Prometheus query whose value the check's script and rules can read."""

    name: str
    """The name the value is read by (`metrics["NAME"]` in Lua and CEL); unique in the check."""
    query: str
    """A PromQL instant query that must answer exactly one number (a scalar or a one-sample vector);
    anything else fails the check."""


# One CEL health rule. The canonical field is `rule`; the docs' `expression` is accepted by the codec.
# The object is bound to both `resource` (upstream) and `self` (docs) when evaluated.
class CELRule(Model):
    """A named CEL rule that judges one checked resource."""

    name: str
    """Name of the rule, shown in messages."""
    rule: str
    """A CEL expression returning a boolean, over `resource` (also `self`: the checked object) and
    `metrics` (the check's metric values). A rule that does not compile or returns no boolean fails
    the check; one that cannot be evaluated (a missing field, say) counts as false."""


class JobCheck(Model):
    """Sveltos: a Job run in the cluster, whose outcome is the check's verdict. fleetwave does not
    run Job checks."""

    job_ref: PolicyRef
    """The ConfigMap or Secret holding the Job to run."""
    timeout: Duration = "5m"
    """How long the Job may run before the check fails: a duration such as `5m` or `1h`. Defaults to
    5m."""


# libsveltos ValidateHealth. `resourceName` is a fleetwave extension carrying the docs form's
# resource-name filter; `featureID` is optional (absent: checked after every feature of the
# profile; ADR 0113).
class ValidateHealth(Model):
    """A health check: resources of one kind in the member cluster and/or Prometheus metrics, judged
    by a Lua script and/or CEL rules. It passes when every matching resource passes; a check that
    matches no resource fails."""

    model_config = validations(
        cel(
            "!has(self.jobCheck) || (!has(self.script) && !has(self.evaluateCEL))",
            "jobCheck cannot be combined with script or evaluateCEL",
        )
    )

    name: str
    """Name of the check, shown in messages. It does not select resources (see resourceName)."""
    feature_id: FeatureID | None = Field(None, alias="featureID")
    """In validateHealths: the feature (`Resources`, `Helm` or `Kustomize`) after whose deployment the
    check runs; a failure is reported on that feature's featureSummary (status Failed, a message
    naming the check). The check does not run when the profile has no content of that feature.
    Omitted: the check runs after every feature. Ignored in preDeployChecks, preDeleteChecks and
    postDeleteChecks, which run at their own points."""
    group: str | None = None
    """API group of the resources to check; empty for the core group."""
    version: str | None = None
    """API version of the resources to check, such as `v1`; required when kind is set."""
    kind: str | None = None
    """Kind of the resources to check. Omitted: the check reads no resources and judges only its
    metricQueries."""
    namespace: str | None = None
    """Only resources in this namespace. Omitted: every namespace (and cluster-scoped resources)."""
    resource_name: str | None = None
    """A fleetwave extension: only the resource of this name."""
    label_filters: list[LabelFilter] | None = None
    """Only resources whose labels pass every filter."""
    metric_source: MetricSource | None = None
    """The Prometheus server metricQueries are sent to; required with metricQueries."""
    metric_queries: list[MetricQuery] | None = None
    """Prometheus queries run once per check, before the resources are judged; their values are the
    `metrics` the script and rules read. A query that gives no single number fails the check."""
    script: str | None = None
    """A Lua script defining `evaluate()`, called for each resource (the global `obj`; nil in a
    metrics-only check). It returns a table with `healthy` (a boolean) and an optional `message`; a
    result without `healthy` is unhealthy."""
    evaluate_cel: list[CELRule] | None = Field(None, alias="evaluateCEL")
    """CEL rules judging each resource: it passes when at least one rule is true (and the script, if
    any, passes too)."""
    job_check: JobCheck | None = None
    """Sveltos: run a Job and judge by its outcome. fleetwave does not run Job checks: a check that
    sets it always fails. Cannot be combined with script or evaluateCEL."""

    @model_validator(mode="after")
    def _job_check_alone(self) -> ValidateHealth:
        if self.job_check is not None and (self.script is not None or self.evaluate_cel is not None):
            raise ValueError("jobCheck cannot be combined with script or evaluateCEL")
        return self


class TemplateResourceRef(Model):
    """A management-cluster ConfigMap or Secret that Go templates in the content can read."""

    resource: ObjectReference
    """The ConfigMap or Secret to read, by kind, namespace and name. An empty namespace is the
    cluster's; namespace and name may be templates over `.Cluster`."""
    identifier: str
    """The name templates read the object by: `(getResource "ID")` or `.MgmtResources.ID`. Unique in
    the profile."""
    optional: bool = False
    """If true, a missing object is left out instead of failing the delivery. Defaults to false."""
    ignore_status_changes: bool | None = None
    """Sveltos: do not redeploy when only the object's status changes. Not supported by fleetwave yet:
    `true` is refused."""
    watch_fields: list[str] | None = None
    """Sveltos: redeploy only when these fields of the object change. Not supported by fleetwave yet:
    a non-empty list is refused."""


class PatchSelector(Model):
    """Selects the objects a patch or a drift exclusion applies to. A field left out matches every
    object."""

    group: str | None = None
    """Only objects of this API group."""
    version: str | None = None
    """Only objects of this API version."""
    kind: str | None = None
    """Only objects of this kind."""
    name: str | None = None
    """Only objects of this name."""
    namespace: str | None = None
    """Only objects in this namespace."""
    label_selector: str | None = None
    """Only objects whose labels match this selector, written as a string such as `app=web,tier!=db`."""
    annotation_selector: str | None = None
    """Only objects whose annotations match this selector, written like labelSelector."""


class Patch(Model):
    """A patch applied, with kustomize, to the profile's objects before they are deployed."""

    patch: str
    """The patch: a strategic-merge patch (YAML of the fields to change) or a JSON 6902 patch (a list
    of operations). Text containing `{{` is a Go template, rendered for each cluster."""
    target: PatchSelector | None = None
    """The objects to patch. Omitted: the object a strategic-merge patch names by its kind and
    name."""


class DriftExclusion(Model):
    """Fields of the matching objects that fleetwave neither sets nor checks for drift."""

    paths: list[str]
    """JSON pointers of the fields to leave alone, such as `/spec/replicas` (1 to 100 of them)."""
    target: PatchSelector | None = None
    """The objects the exclusion applies to. Omitted: every object. fleetwave matches group, version,
    kind, and a literal name and namespace; it refuses labelSelector, annotationSelector and name
    patterns."""


class ProfileSpec(Model):
    """What a profile deploys and how, without the choice of clusters."""

    sync_mode: Literal["OneTime", "Continuous", "ContinuousWithDriftDetection", "DryRun"] = "Continuous"
    """How the content is kept on the clusters: `Continuous` (the default) applies every change;
    `ContinuousWithDriftDetection` also puts back objects changed or deleted on the cluster, those of
    Helm releases included (from the deployed revision, without a new one), as soon as a watch on
    the cluster sees the change (every 30s where the cluster is not watched); `OneTime` deploys once
    and never applies later changes; `DryRun` changes nothing."""
    tier: int = Field(100, ge=1)
    """Priority against other profiles that deploy the same object or Helm release: the one with the
    lower tier takes it over; with equal tiers, the first to deploy it keeps it. Defaults to 100."""
    continue_on_conflict: bool = False
    """If false (the default), delivery to a cluster stops at the first object another profile owns;
    if true, the rest is still deployed. The conflict is reported either way."""
    continue_on_error: bool = False
    """If false (the default), delivery to a cluster stops at the first object or Helm chart that
    fails; if true, the rest is still deployed. The failure is reported either way."""
    max_update: MaxUpdate | None = None
    """How many clusters are updated at a time: a count, or a percentage of the clusters (of each stage,
    in a promotion) rounded up to at least one. Omitted or 0: all at once. Deleting a ClusterProfile
    withdraws its content at the same pace."""
    stop_matching_behavior: Literal["WithdrawPolicies", "LeavePolicies"] = "WithdrawPolicies"
    """What happens to the content of a cluster the profile stops selecting, or when the profile is
    deleted: `WithdrawPolicies` (the default) removes it; `LeavePolicies` leaves it in place."""
    reloader: bool = False
    """Sveltos: restart Deployments, StatefulSets and DaemonSets when a ConfigMap or Secret they mount
    changes. Not supported by fleetwave yet: `true` is refused. Defaults to false."""
    template_resource_refs: list[TemplateResourceRef] | None = Field(None, max_length=MAX_LIST)
    """Management-cluster ConfigMaps and Secrets that Go templates in the content can read. One named
    outright is read once and pinned with the revision, so editing it starts a new rollout."""
    depends_on: list[str] | None = None
    """Names of ClusterProfiles that must be provisioned on a cluster before this content is delivered
    there. A cycle is refused. Unlike newer Sveltos versions, fleetwave does not deploy those profiles
    to the cluster itself."""
    policy_refs: list[PolicyRef] | None = Field(None, max_length=MAX_LIST)
    """ConfigMaps and Secrets whose manifests are deployed. Editing one starts a new rollout."""
    helm_charts: list[HelmChart] | None = Field(None, max_length=MAX_LIST)
    """Helm charts installed in each cluster, in list order."""
    kustomization_refs: list[KustomizationRef] | None = Field(None, max_length=MAX_LIST)
    """Kustomize directories built for each cluster and deployed with the policyRefs' objects."""
    pre_deploy_checks: list[ValidateHealth] | None = Field(None, max_length=MAX_LIST)
    """Health checks that must pass on a cluster before a new revision is deployed there; until they
    do, nothing is deployed and the cluster waits."""
    validate_healths: list[ValidateHealth] | None = Field(None, max_length=MAX_LIST)
    """Health checks run on each cluster once the content is deployed: the cluster counts as updated
    only when the deployed objects are ready and these checks all pass. Editing them starts a new
    rollout."""
    pre_delete_checks: list[ValidateHealth] | None = Field(None, max_length=MAX_LIST)
    """Health checks that must pass on a cluster before the content is withdrawn from it; the
    withdrawal waits until they do."""
    post_delete_checks: list[ValidateHealth] | None = Field(None, max_length=MAX_LIST)
    """Health checks run on a cluster after the content is withdrawn; the withdrawal is not finished
    until they pass."""
    patches: list[Patch] | None = Field(None, max_length=MAX_LIST)
    """Patches applied to the objects of policyRefs and kustomizationRefs before they are deployed, and
    to each Helm chart's rendered objects (helm's post-renderer; hooks are not patched). A
    strategic-merge patch without target must match an object wherever it is applied: with several
    charts, or charts and policyRefs, give it a target."""
    patches_from: list[ValueFrom] | None = None
    """ConfigMaps or Secrets whose every key holds a patch (YAML with `patch` and an optional
    `target`), applied after `patches`, to the same objects."""
    drift_exclusions: list[DriftExclusion] | None = Field(None, max_length=MAX_LIST)
    """Fields of the deployed objects that fleetwave neither sets nor checks for drift, so another
    controller may own them (`/spec/replicas` under an autoscaler). For Helm releases' objects, helm
    still sets what the chart renders; drift detection leaves the excluded fields as they are."""
    max_consecutive_failures: int | None = Field(None, ge=0)
    """After this many failed deliveries of the same content in a row, a cluster stops retrying until
    a new revision or a change of the spec. Omitted or 0: retry forever."""


class ClusterProfileSpec(ProfileSpec):
    """What a ClusterProfile deploys, and to which member clusters."""

    cluster_selector: LabelSelector | None = None
    """Selects member clusters to deploy to by their labels. Omitted or empty: no cluster by label.
    The profile deploys to the clusters of clusterSelector, clusterRefs and setRefs together."""
    cluster_refs: list[ObjectReference] | None = None
    """Member clusters to deploy to, by kind, namespace and name (a reference without a namespace
    means `default`), besides those of clusterSelector and setRefs. `kind: Cluster` (apiVersion
    `cluster.x-k8s.io/...`) names a Cluster API cluster; `SveltosCluster`, `MemberCluster` or no kind
    names a registered member cluster, so a SveltosCluster and a Cluster of the same namespace and
    name are two clusters. Any other kind, or an apiVersion whose group does not serve the kind, makes
    the spec invalid."""
    set_refs: list[str] | None = Field(None, max_length=MAX_LIST)
    """Names of ClusterSets (up to 128) whose chosen clusters (`status.selectedClusterRefs`) the
    profile deploys to, besides those of clusterSelector and clusterRefs. When a set chooses another
    cluster (one it had chosen is no longer ready), the profile's rollout starts again over the new
    choice, and the cluster the set let go is treated as one the profile stopped selecting
    (stopMatchingBehavior). A ClusterSet that does not exist chooses no cluster."""
    extra_labels: dict[str, str] | None = None
    """Labels added to every object deployed from policyRefs and kustomizationRefs. Not supported
    together with helmCharts."""
    extra_annotations: dict[str, str] | None = None
    """Annotations added to every object deployed from policyRefs and kustomizationRefs. Not supported
    together with helmCharts."""


class ClustersWithHash(StatusModel):
    """A set of clusters and the revision they concern."""

    hash: str | None = None
    """The content revision (a hash) these clusters are updated to."""
    clusters: list[ObjectReference] | None = None
    """The member clusters."""


class FailedCluster(StatusModel):
    """A cluster whose delivery failed."""

    cluster_ref: ObjectReference | None = None
    """The member cluster."""
    failure_message: str | None = None
    """Why delivery to the cluster failed."""
    last_failure_time: str | None = None
    """A Sveltos field (when delivery last failed); fleetwave does not set it."""


class ClusterProfileStatus(StatusModel):
    """Set by the controller: how the profile's rollout is going."""

    matching_clusters: list[ObjectReference] | None = None
    """Set by the controller: the member clusters the profile selects."""
    updating_clusters: ClustersWithHash | None = None
    """Set by the controller: the clusters the current revision is being delivered to. Not set on a
    promotion's stage profile: its ClusterPromotion's status shows the progress."""
    updated_clusters: ClustersWithHash | None = None
    """Set by the controller: the clusters where the current revision is deployed and healthy. Not set
    on a promotion's stage profile."""
    failed_clusters: list[FailedCluster] | None = None
    """Set by the controller: the clusters where delivering the current revision failed, with why."""
    dependencies_hash: str | None = None
    """A Sveltos field; fleetwave does not set it."""
    reconciliation_suspended: bool | None = None
    """A Sveltos field (reconciliation paused by an annotation); fleetwave does not set it."""
    suspension_reason: str | None = None
    """A Sveltos field (why reconciliation is paused); fleetwave does not set it."""
    conditions: list[Condition] | None = None
    """Set by the controller: `Ready` (True once the current revision is on every selected cluster),
    `Progressing`, and `DependenciesProvisioned` (False while a cluster waits for a profile named in
    dependsOn)."""


class ClusterProfile(Resource):
    """Deploys Helm charts, Kubernetes manifests and Kustomize output to every member cluster its
    selector matches, and keeps them there (Sveltos' ClusterProfile)."""

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
    """The object's kind: `ClusterProfile`."""
    spec: ClusterProfileSpec = Field(default_factory=ClusterProfileSpec)
    """What the profile deploys, and to which member clusters."""
    status: ClusterProfileStatus | None = None
    """Set by the controller: how the profile's rollout is going."""


class ProfileStatus(ClusterProfileStatus):
    """Set by the controller: how the profile's rollout is going, mirrored from the ClusterProfile
    fleetwave generated for it, and where its deliveries are."""

    cluster_profile_name: str | None = None
    """Set by the controller: the cluster-scoped ClusterProfile fleetwave generated to deliver this
    Profile (`p--<namespace>.<name>`), whose status this one mirrors."""
    cluster_summaries: list[str] | None = None
    """Set by the controller: the names of the ClusterSummaries of this Profile, one per matching
    cluster, in the Profile's namespace."""


class Profile(Resource):
    """A ClusterProfile confined to its own namespace (Sveltos' Profile): it deploys only to member
    clusters of its namespace, and reads ConfigMaps, Secrets and Flux sources only from there. A
    platform team grants it to a tenant through a namespaced Role."""

    kind_name: ClassVar[str] = "Profile"
    plural: ClassVar[str] = "profiles"
    namespaced: ClassVar[bool] = True
    short_names: ClassVar[tuple[str, ...]] = ("prof",)
    printer_columns: ClassVar[tuple[dict[str, object], ...]] = (
        column("Sync-Mode", ".spec.syncMode"),
        column("Max-Update", ".spec.maxUpdate"),
        condition_column("Ready", "Ready"),
        AGE,
    )

    kind: Literal["Profile"] = "Profile"
    """The object's kind: `Profile`."""
    spec: ClusterProfileSpec = Field(default_factory=ClusterProfileSpec)
    """What the profile deploys, and to which member clusters of its namespace. Cluster references
    and content references that name another namespace are refused; an empty namespace is the
    Profile's own."""
    status: ProfileStatus | None = None
    """Set by the controller: how the profile's rollout is going."""


# ---- ClusterPromotion ----


class _TriggerCommon(Model):
    delay: Duration | None = None
    """How long to wait, once every cluster of the stage is updated and healthy, before the stage may
    promote: a duration such as `5m` or `1h30m`. Omitted: no wait."""
    pre_health_check_deployment: list[PolicyRef] | None = Field(None, max_length=MAX_LIST)
    """ConfigMaps or Secrets deployed to the stage's clusters after the delay, for the
    postDelayHealthChecks to use (a test Job, say), and removed once the stage promotes. The stage does
    not wait for them: the postDelayHealthChecks do."""
    post_delay_health_checks: list[ValidateHealth] | None = Field(None, max_length=MAX_LIST)
    """Health checks run on every cluster of the stage after the delay; the stage promotes only while
    they all pass."""


class TimeWindow(Model):
    """A recurring window, in UTC: it opens at each `from` time and closes at the first `to` time
    after it."""

    from_: Cron = Field(alias="from")
    """When the window opens: a 5-field cron expression or a descriptor such as `@daily`, in UTC."""
    to: Cron
    """When the window closes: a 5-field cron expression or a descriptor, in UTC."""


class AutoTrigger(_TriggerCommon):
    """Promote the stage by itself once its delay and checks have passed."""

    promotion_window: TimeWindow | None = None
    """Promote only while this window is open; checked last, after the delay and the checks. A stage
    that already started is not stopped when the window closes. Omitted: at any time."""


class ManualTrigger(_TriggerCommon):
    """Promote the stage only once someone approves it (and its delay and checks have passed)."""

    approved: bool | None = None
    """Set to true to approve promoting the stage, now or ahead of time. The stage promotes once it is
    approved and its checks pass."""
    automatic_reset: bool = True
    """If true (the default), fleetwave sets approved back to false once the stage promotes, and an
    approval given before the current revision started does not count. If false, an approval stands
    for later revisions too."""


class Trigger(Model):
    """What must happen before the next stage starts: set exactly one of auto or manual."""

    model_config = validations(cel("has(self.auto) != has(self.manual)", "set exactly one of auto or manual"))

    auto: AutoTrigger | None = None
    """Promote by itself after an optional delay, checks and time window."""
    manual: ManualTrigger | None = None
    """Promote once approved, after an optional delay and checks."""

    @model_validator(mode="after")
    def _exactly_one(self) -> Trigger:
        if (self.auto is None) == (self.manual is None):
            raise ValueError("set exactly one of auto or manual")
        return self


class Stage(Model):
    """One step of a promotion: the clusters that get the content, and what must happen before the
    next stage starts."""

    name: DNSLabel
    """Name of the stage: a DNS-1123 label, unique in the promotion. The stage's ClusterProfile is
    named `<promotion>-<stage>`."""
    cluster_selector: LabelSelector | None = None
    """Selects the stage's member clusters by their labels. Omitted or empty: the stage has no clusters
    (its trigger still applies)."""
    trigger: Trigger | None = None
    """What must happen before the next stage starts; on the last stage, before the promotion
    completes. Omitted: the next stage starts once this one's clusters are updated and healthy (and its
    webhooks and analyses pass)."""
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
    """A rollout of one profile through stages of clusters, one stage after the other."""

    model_config = validations(UNIQUE_STAGES_CEL)

    profile_spec: ProfileSpec = Field(default_factory=ProfileSpec)
    """What every stage deploys and how: a ClusterProfile's spec without the choice of clusters.
    Editing what it deploys starts the rollout again from the first stage; maxUpdate paces each
    stage."""
    stages: list[Stage] = Field(
        min_length=1,
        max_length=MAX_STAGES,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )
    """The stages, rolled out in list order (1 to 64). Adding, removing, renaming or reselecting a
    stage starts the rollout again from the first stage."""
    preserve_cluster_profiles_on_delete: bool = False
    """If true, deleting the promotion leaves its stage ClusterProfiles, and what they deployed, in
    place as standalone profiles. If false (the default), the content is withdrawn stage by stage, the
    last stage first."""
    failure_budget: FailureBudget | None = None
    """A fleetwave extension: how many clusters may fail, after `gracePeriod`, before the promotion
    stops; a failed cluster within the budget is set aside and its stage goes on without it. Omitted:
    a failed cluster holds its stage."""
    # fleetwave's (Sveltos has none): clusters in flight finish, nothing new starts until false again.
    paused: bool = Field(
        default=False,
        description="Pause the promotion: clusters already being updated finish, no other cluster "
        "or stage starts, gate timers keep their start. Set back to false (or `fleetwave resume "
        "promotion NAME`) to go on from where it stopped. Defaults to false.",
    )

    # fleetwave's: how long a stage may go without progress, and a cluster stay unavailable, before
    # the promotion fails (with a failureBudget, the cluster alone fails and counts against it).
    progress_deadline: Duration | None = Field(
        default=None,
        description="How long a stage may make no progress before the promotion fails; with a "
        "failureBudget, how long a cluster whose delivery applied may stay unavailable before it "
        "counts as failed. A duration such as `10m` or `1h`. Unset: no deadline.",
    )

    on_failure: OnFailure = Field(
        default="Halt",
        description="What the promotion does once it fails (a failure budget exceeded, or the "
        "progress deadline): Halt (the default) stops where it is; Rollback returns every cluster it "
        "updated to the last revision that succeeded, in reverse stage order. With Rollback and no "
        "failureBudget, no cluster may fail.",
    )

    @model_validator(mode="after")
    def _unique(self) -> ClusterPromotionSpec:
        check_unique_names([s.name for s in self.stages], "stages")
        return self


class StageStatus(StatusModel):
    """Set by the controller: the progress of one stage."""

    name: str
    """Name of the stage."""
    last_update_reconciled_time: str | None = None
    """When delivery to the stage's clusters started."""
    last_successful_applied_time: str | None = None
    """When the stage succeeded: its clusters updated and its trigger passed."""
    last_status_check_time: str | None = None
    """When the stage last changed state."""
    failure_message: str | None = None
    """Why the stage failed; once it succeeded, `All matching clusters are successfully deployed.`
    (as Sveltos reports it)."""
    current_status_description: str | None = None
    """What the stage is doing or waiting for, in words: a delay, a window, an approval, a failing
    check."""


class ClusterPromotionStatus(StatusModel):
    """Set by the controller: how the promotion is going."""

    profile_spec_hash: str | None = None
    """Set by the controller: the hash of the revision being rolled out (profileSpec's content)."""
    stages_hash: str | None = None
    """Set by the controller: the hash of the stages' names and cluster selectors."""
    current_stage_name: str | None = None
    """Set by the controller: the stage being rolled out; the last stage once the promotion is done."""
    last_promotion_time: str | None = None
    """Set by the controller: when a stage last succeeded."""
    stages: list[StageStatus] | None = None
    """Set by the controller: the progress of each stage."""
    conditions: list[Condition] | None = None
    """Set by the controller: `Ready` (True once every stage succeeded) and `Progressing`."""


class ClusterPromotion(Resource):
    """Rolls one profile out through an ordered list of stages of member clusters: each stage is
    deployed and verified before the next starts, behind gates such as delays, health checks, time
    windows and manual approvals (Sveltos' ClusterPromotion)."""

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
    """The object's kind: `ClusterPromotion`."""
    spec: ClusterPromotionSpec
    """What to roll out, and through which stages of clusters."""
    status: ClusterPromotionStatus | None = None
    """Set by the controller: how the promotion is going."""


# ---- ClusterSummary ----


class ClusterSummarySpec(Model):
    """Written by the controller: one profile's content for one member cluster. Not meant to be edited
    by hand."""

    # One value to the API server (ADR 0146): its one writer applies it whole, and managedFields then
    # name `spec` once instead of every field of the profile spec copied in, on each of 100,000 objects.
    model_config = ConfigDict(json_schema_extra={"x-kubernetes-map-type": "atomic"})

    cluster_namespace: str
    """Namespace of the member cluster."""
    cluster_name: str
    """Name of the member cluster."""
    cluster_type: Literal["Capi", "Sveltos"] = "Sveltos"
    """Sveltos' kind of cluster: `Capi` for a Cluster API cluster (a `Cluster` of
    `cluster.x-k8s.io`, whose kubeconfig is the Secret `<clusterName>-kubeconfig`), `Sveltos` for a
    registered member cluster. The summary delivers to the cluster of this type, namespace and name."""
    cluster_profile_spec: ClusterProfileSpec = Field(default_factory=ClusterProfileSpec)
    """A copy of the spec of the profile this summary delivers."""


class FeatureSummary(StatusModel):
    """Set by the controller: the delivery of one kind of content."""

    feature_id: str = Field(alias="featureID")
    """The kind of content: `Resources` (policyRefs), `Kustomize` (kustomizationRefs) or `Helm`
    (helmCharts)."""
    hash: str | None = None
    """The hash of what was delivered."""
    status: str | None = None
    """`Provisioned` (deployed), `Failed` (retried) or `FailedNonRetriable` (maxConsecutiveFailures
    reached: retried only for a new revision or a spec change)."""
    consecutive_failures: int | None = None
    """Failed deliveries of the same content in a row."""
    failure_reason: str | None = None
    """A Sveltos field; fleetwave does not set it."""
    failure_message: str | None = None
    """Why the last delivery failed."""
    last_applied_time: str | None = None
    """When what was delivered, or its status, last changed."""


class DeployedGVKs(StatusModel):
    """Set by the controller: the kinds of object one feature deployed."""

    feature_id: str = Field(alias="featureID")
    """The kind of content, such as `Resources`."""
    deployed_group_version_kind: list[str] | None = None
    """Each kind deployed, as `Kind.version.group`."""


class HelmReleaseSummary(StatusModel):
    """Set by the controller: one Helm release on the cluster."""

    release_name: str
    """Name of the release."""
    release_namespace: str
    """Namespace of the release."""
    status: str | None = None
    """`Managing` (installed and kept by this profile), `Failed` or `Uninstalled`."""
    values_hash: str | None = None
    """The hash of the values the release was installed with."""
    conflict_message: str | None = None
    """A Sveltos field; fleetwave does not set it."""
    failure_message: str | None = None
    """Why installing, upgrading or uninstalling the release failed."""


class ClusterSummaryStatus(StatusModel):
    """Set by the controller: what was delivered to the cluster, and how it is doing."""

    # One value to the API server, as the spec is (ADR 0146); unknown fields are still kept.
    model_config = ConfigDict(
        json_schema_extra={"x-kubernetes-preserve-unknown-fields": True, "x-kubernetes-map-type": "atomic"}
    )

    feature_summaries: list[FeatureSummary] | None = None
    """Set by the controller: the delivery state of each kind of content."""
    deployed_gvks: list[DeployedGVKs] | None = Field(None, alias="deployedGVKs")
    """Set by the controller: the kinds of object each feature deployed."""
    helm_release_summaries: list[HelmReleaseSummary] | None = None
    """Set by the controller: the Helm releases this summary manages."""
    dependencies: str | None = None
    """Sveltos' note on dependencies; fleetwave always writes `no dependencies` (a ClusterProfile's
    dependsOn shows in its own status)."""
    next_reconcile_time: str | None = None
    """A Sveltos field; fleetwave does not set it."""
    failure_message: str | None = None
    """Set by the controller: why the last delivery failed, or why the cluster could not be reached."""
    reconciliation_suspended: bool | None = None
    """A Sveltos field; fleetwave does not set it."""
    suspension_reason: str | None = None
    """A Sveltos field; fleetwave does not set it."""
    conditions: list[Condition] | None = None
    """Set by the controller: `Ready`, True once the content is deployed and its health checks pass;
    otherwise its reason says why not (`Failed`, `Unhealthy`, `ClusterUnreachable`,
    `WaitingForPreDeployChecks` or `DryRun`)."""


class ClusterSummary(Resource):
    """Set by the controller: what one profile deployed to one member cluster, and how each part of it
    went. One per profile and cluster, in the cluster's namespace; not written by users."""

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
    """The object's kind: `ClusterSummary`."""
    spec: ClusterSummarySpec
    """Written by the controller: which profile content goes to which member cluster."""
    status: ClusterSummaryStatus | None = None
    """Set by the controller: what was delivered to the cluster, and how it is doing."""
