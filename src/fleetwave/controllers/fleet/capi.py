"""Cluster API clusters (cluster.x-k8s.io `Cluster`) as Sveltos reads them (ADR 0109). Pure.

Sveltos takes a Cluster as ready to be configured once its control plane is initialized (libsveltos'
clusterproxy): in v1beta2, the `ControlPlaneInitialized` condition or
`status.initialization.controlPlaneInitialized`; in v1beta1, `status.controlPlaneReady` or the same
condition (in `status.conditions`, or `status.v1beta2.conditions` as CAPI 1.9 and 1.10 write it). Every
one of those is read whatever the version served: a CRD without a conversion webhook serves a stored
object under either version unchanged. A Cluster being deleted (its deletionTimestamp, or phase
`Deleting`) is no longer a member: whatever was delivered to it is withdrawn.

Its kubeconfig is the Secret `<name>-kubeconfig` in its namespace, key `value`, which Cluster API
writes (type `cluster.x-k8s.io/secret`): a credential, never content.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fleetwave.api import groups

API_GROUP, KIND = groups.CAPI_GROUP, groups.CAPI_KIND
# What ClusterRefs and profile statuses call a Cluster API cluster (upstream Sveltos' form).
REF_API_VERSION = f"{API_GROUP}/v1beta1"
KUBECONFIG_SUFFIX = "-kubeconfig"
KUBECONFIG_KEY = "value"
# The type Cluster API gives every Secret it writes for a cluster: kubeconfigs, CA and service
# account keys. None of them is ever content.
SECRET_TYPE = "cluster.x-k8s.io/secret"
CONTROL_PLANE_INITIALIZED = "ControlPlaneInitialized"
_MESSAGE_MAX = 256


@dataclass(frozen=True, slots=True)
class Standing:
    """Whether a Cluster takes deliveries: ready, or why not; `deleting`: it is going away."""

    ready: bool
    deleting: bool = False
    why: str = ""


def kubeconfig_secret(name: str) -> str:
    return f"{name}{KUBECONFIG_SUFFIX}"


def standing(obj: Mapping[str, Any]) -> Standing:
    meta = _mapping(obj.get("metadata"))
    status = _mapping(obj.get("status"))
    phase = str(status.get("phase") or "")
    if meta.get("deletionTimestamp") or phase == "Deleting":
        return Standing(False, deleting=True, why="the Cluster API cluster is being deleted")
    if control_plane_initialized(status):
        return Standing(True)
    return Standing(False, why=_waiting(status, phase))


def control_plane_initialized(status: Mapping[str, Any]) -> bool:
    initialization = _mapping(status.get("initialization"))
    if initialization.get("controlPlaneInitialized") is True or status.get("controlPlaneReady") is True:
        return True
    return _condition(status, CONTROL_PLANE_INITIALIZED).get("status") == "True"


def _condition(status: Mapping[str, Any], kind: str) -> Mapping[str, Any]:
    """The condition `kind` of v1beta2 (`status.conditions`), else of v1beta1's v1beta2 preview."""
    for conditions in (status.get("conditions"), _mapping(status.get("v1beta2")).get("conditions")):
        for condition in conditions if isinstance(conditions, list) else ():
            if isinstance(condition, Mapping) and condition.get("type") == kind:
                return condition
    return {}


def _waiting(status: Mapping[str, Any], phase: str) -> str:
    """Why a Cluster is not ready yet, in Cluster API's words (bounded)."""
    said = _condition(status, CONTROL_PLANE_INITIALIZED).get("message") or status.get("failureMessage")
    text = (
        f"the Cluster API cluster is {phase.lower() or 'provisioning'}: its control plane is not initialized"
    )
    if said:
        text += f" ({str(said)[:_MESSAGE_MAX]})"
    return text


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}
