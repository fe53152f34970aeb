"""MemberCluster: the native cluster-registration kind.

Sveltos SveltosCluster and KubeFleet MemberCluster map to it.

Selection labels live in metadata.labels; spec says how to reach the cluster.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from fleetwave.api.meta import AGE, Condition, FreeForm, Model, Resource, StatusModel, column
from fleetwave.api.sveltos import TimeWindow


class KubeconfigSecretRef(Model):
    """The Secret holding the kubeconfig fleetwave uses to reach a member cluster."""

    name: str
    """Name of the Secret."""
    namespace: str | None = None
    """Namespace of the Secret: it must be the MemberCluster's own, a Secret of another namespace is
    refused. Defaults to the MemberCluster's namespace."""
    key: str | None = None
    """Key of the kubeconfig in the Secret. Omitted: `kubeconfig` when the Secret has that key,
    otherwise its first key in alphabetical order."""


class Taint(Model):
    """A taint that keeps placements off the cluster unless they tolerate it."""

    key: str
    """Key of the taint."""
    value: str | None = None
    """Value of the taint."""
    effect: Literal["NoSchedule"] = "NoSchedule"
    """Effect of the taint: `NoSchedule`, the only one and the default. A PickAll or PickN
    placement without a matching toleration does not pick the cluster."""


class MemberClusterSpec(Model):
    """How fleetwave reaches a member cluster, and whether the cluster takes deliveries."""

    kubeconfig_secret_ref: KubeconfigSecretRef | None = None
    """The Secret holding the kubeconfig fleetwave uses to reach the cluster. Omitted: the Secret
    `<name>-kubeconfig` in the MemberCluster's namespace."""
    paused: bool = False
    """Whether deliveries to the cluster are paused: a paused cluster keeps its place in rollouts,
    but nothing new is delivered to it until it is unpaused. Defaults to false."""
    active_window: TimeWindow | None = None
    """When the cluster takes deliveries: it opens at each `from` cron time and closes at the next
    `to`. Outside it the cluster is treated as paused and reports Ready=False (reason
    OutsideActiveWindow). Omitted: always."""
    taints: list[Taint] | None = None
    """Taints that keep PickAll and PickN placements without a matching toleration off the cluster."""
    # Carried verbatim from the upstream kinds so a mapping back is lossless. fleetwave does not act on
    # identity and heartbeatPeriodSeconds; a member setting any of the others is not used
    # (controllers.members.unhonoured).
    identity: FreeForm | None = None
    """KubeFleet's member agent identity. Accepted for compatibility with KubeFleet; fleetwave does
    not act on it."""
    heartbeat_period_seconds: int | None = Field(None, ge=1, le=600)
    """KubeFleet's member agent heartbeat period, 1 to 600 seconds. Accepted for compatibility with
    KubeFleet; fleetwave does not act on it (it checks each cluster every 30 seconds)."""
    pull_mode: bool | None = None
    """Sveltos' pull mode: true when the cluster is joined by `fleetwave agent` running in it. The
    management cluster then holds no kubeconfig of it and never connects to it: what the cluster
    must run is written as MemberWork into its namespace on the management cluster
    (`fleet-member-<name>`), and its agent applies it and reports back. `fleetwave cluster register
    --pull` sets it."""
    workload_identity: FreeForm | None = None
    """Sveltos' cloud workload identity, used instead of a kubeconfig. Not supported yet: a cluster
    that sets it reports Ready=False (reason UnsupportedField) and gets no deliveries."""
    token_request_renewal_option: FreeForm | None = None
    """Sveltos' renewal of the kubeconfig's token. Not supported yet: a cluster that sets it reports
    Ready=False (reason UnsupportedField) and gets no deliveries."""
    readiness_checks: list[FreeForm] | None = None
    """Sveltos' extra checks before a cluster counts as ready. Not supported yet: a cluster that
    lists any reports Ready=False (reason UnsupportedField) and gets no deliveries."""
    liveness_checks: list[FreeForm] | None = None
    """Sveltos' checks of a ready cluster's health. Not supported yet: a cluster that lists any
    reports Ready=False (reason UnsupportedField) and gets no deliveries."""
    consecutive_failure_threshold: int | None = Field(None, ge=1)
    """Sveltos' number of failed liveness checks before a cluster counts as down. Not supported
    yet: a cluster that sets it reports Ready=False (reason UnsupportedField) and gets no deliveries."""


class MemberClusterStatus(StatusModel):
    """Observed state of a member cluster, written by the controller."""

    ready: bool | None = None
    """Set by the controller: whether fleetwave can use the cluster, that is its kubeconfig is
    accepted and its API server answered the last check (made every 30 seconds). A cluster that is
    not ready gets no new deliveries."""
    version: str | None = None
    """Set by the controller: the cluster's Kubernetes version as its API server reports it, such as
    `v1.30.2`."""
    failure_message: str | None = None
    """Set by the controller: why the cluster is not ready; empty when it is."""
    connection_status: str | None = None
    """Set by the controller: `Healthy` when the cluster is ready, `Down` otherwise."""
    conditions: list[Condition] | None = None
    """Set by the controller: `Ready`, whose reason says why, such as APIServerReady,
    APIServerUnreachable, KubeconfigMissing, KubeconfigRefused or OutsideActiveWindow."""


class MemberCluster(Resource):
    """A cluster of the fleet: where its kubeconfig is, and labels that profiles, promotions and
    placements select it by. `fleetwave cluster register` writes one, with its kubeconfig Secret."""

    kind_name: ClassVar[str] = "MemberCluster"
    plural: ClassVar[str] = "memberclusters"
    namespaced: ClassVar[bool] = True
    short_names: ClassVar[tuple[str, ...]] = ("mc",)
    printer_columns: ClassVar[tuple[dict[str, object], ...]] = (
        column("Ready", ".status.ready", "boolean"),
        column("Version", ".status.version"),
        column("Paused", ".spec.paused", "boolean", priority=1),
        AGE,
    )

    kind: Literal["MemberCluster"] = "MemberCluster"
    spec: MemberClusterSpec = Field(default_factory=MemberClusterSpec)
    """How fleetwave reaches the cluster and whether it takes deliveries. Rollouts and placements
    select clusters by the MemberCluster's labels."""
    status: MemberClusterStatus | None = None
    """Set by the controller: whether the cluster can be used, and its Kubernetes version."""
