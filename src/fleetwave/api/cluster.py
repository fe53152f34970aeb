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
    """Secret holding the cluster's kubeconfig. Namespace defaults to the MemberCluster's; key to the
    Secret's first key (Sveltos behaviour), `kubeconfig` being the conventional one."""

    name: str
    namespace: str | None = None
    key: str | None = None


class Taint(Model):
    key: str
    value: str | None = None
    effect: Literal["NoSchedule"] = "NoSchedule"


class MemberClusterSpec(Model):
    kubeconfig_secret_ref: KubeconfigSecretRef | None = None
    paused: bool = False
    active_window: TimeWindow | None = None
    taints: list[Taint] | None = None
    # Carried verbatim from the upstream kinds so a mapping back is lossless; fleetwave does not act on them.
    identity: FreeForm | None = None
    heartbeat_period_seconds: int | None = Field(None, ge=1, le=600)
    pull_mode: bool | None = None
    workload_identity: FreeForm | None = None
    token_request_renewal_option: FreeForm | None = None
    readiness_checks: list[FreeForm] | None = None
    liveness_checks: list[FreeForm] | None = None
    consecutive_failure_threshold: int | None = Field(None, ge=1)


class MemberClusterStatus(StatusModel):
    ready: bool | None = None
    version: str | None = None
    failure_message: str | None = None
    connection_status: str | None = None
    conditions: list[Condition] | None = None


class MemberCluster(Resource):
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
    status: MemberClusterStatus | None = None
