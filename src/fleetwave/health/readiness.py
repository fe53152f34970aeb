"""Default readiness: is one applied object available, without any user-written check?

Judged from status the way `kubectl rollout status` and Helm's `--wait` do: a workload is ready once
the controller has seen the current generation and every replica is updated and available. Any other
object is judged by its conditions when it has them (custom resources, ADR 0091): a `Ready`
condition, else an `Available` one, must be True (and, when the condition says which generation it
observed, of the current generation); an object without either is ready once it exists.
Pure: takes the object as a dict.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fleetwave.api import conditions
from fleetwave.api.objects import ObjDict


def is_ready(obj: ObjDict) -> tuple[bool, str]:
    """(ready, reason) for one object; the reason says what is missing when not ready."""
    group = str(obj.get("apiVersion") or "").rpartition("/")[0]
    judge = _JUDGES.get((group, str(obj.get("kind") or "")))
    return judge(obj) if judge else _by_conditions(obj)


# Built-in groups whose objects have no conditions to wait for: no member watch for them.
_NO_CONDITIONS = frozenset({"", "rbac.authorization.k8s.io", "scheduling.k8s.io", "node.k8s.io"})


def judged(api_version: str, kind: str) -> bool:
    """Whether objects of this kind can exist and not be ready (others are ready once they exist)."""
    group = api_version.rpartition("/")[0]
    return (group, kind) in _JUDGES or group not in _NO_CONDITIONS


def _by_conditions(obj: ObjDict) -> tuple[bool, str]:
    for kind in ("Ready", "Available"):
        c = conditions.find(_status(obj), kind)
        if c is None:
            continue
        generation = (obj.get("metadata") or {}).get("generation")
        observed = c.get("observedGeneration")
        if isinstance(generation, int) and isinstance(observed, int) and observed < generation:
            return False, f"{kind} condition is of generation {observed}, not yet {generation}"
        if c.get("status") == "True":
            return True, kind.lower()
        why = str(c.get("message") or c.get("reason") or "").strip()[:200]
        return False, f"{kind} is {c.get('status')}" + (f": {why}" if why else "")
    return True, "exists"


def _status(obj: ObjDict) -> dict[str, Any]:
    status = obj.get("status")
    return status if isinstance(status, dict) else {}


def _spec(obj: ObjDict) -> dict[str, Any]:
    spec = obj.get("spec")
    return spec if isinstance(spec, dict) else {}


def _generation_seen(obj: ObjDict) -> str:
    """Empty when the controller has observed the object's current generation."""
    generation = (obj.get("metadata") or {}).get("generation")
    observed = _status(obj).get("observedGeneration")
    if generation is not None and (observed is None or observed < generation):
        return f"generation {generation} not yet observed (observed {observed})"
    return ""


def _deployment(obj: ObjDict) -> tuple[bool, str]:
    if reason := _generation_seen(obj):
        return False, reason
    progressing = conditions.find(_status(obj), "Progressing")
    if progressing and progressing.get("reason") == "ProgressDeadlineExceeded":
        return False, f"progress deadline exceeded: {progressing.get('message', '')}".rstrip(": ")
    st, want = _status(obj), _spec(obj).get("replicas", 1)
    updated, total, available = (st.get(k, 0) for k in ("updatedReplicas", "replicas", "availableReplicas"))
    if updated < want:
        return False, f"{updated} of {want} replicas updated"
    if total > updated:
        return False, f"{total - updated} old replicas pending termination"
    if available < updated:
        return False, f"{available} of {updated} updated replicas available"
    if not conditions.is_true(_status(obj), "Available"):
        return False, "condition Available is not True"
    return True, f"{available} of {want} replicas available"


def _statefulset(obj: ObjDict) -> tuple[bool, str]:
    if reason := _generation_seen(obj):
        return False, reason
    st, spec = _status(obj), _spec(obj)
    want = spec.get("replicas", 1)
    ready = st.get("readyReplicas", 0)
    if ready < want:
        return False, f"{ready} of {want} replicas ready"
    strategy = spec.get("updateStrategy") or {}
    if strategy.get("type", "RollingUpdate") == "RollingUpdate":
        partition = (strategy.get("rollingUpdate") or {}).get("partition", 0)
        updated = st.get("updatedReplicas", 0)
        if updated < want - partition:
            return False, f"{updated} of {want - partition} replicas updated"
        if partition == 0 and st.get("updateRevision") != st.get("currentRevision"):
            return False, f"revision {st.get('updateRevision')} not yet current"
    return True, f"{ready} of {want} replicas ready"


def _daemonset(obj: ObjDict) -> tuple[bool, str]:
    if reason := _generation_seen(obj):
        return False, reason
    st = _status(obj)
    want = st.get("desiredNumberScheduled", 0)
    strategy = (_spec(obj).get("updateStrategy") or {}).get("type", "RollingUpdate")
    updated = st.get("updatedNumberScheduled", 0)
    if strategy == "RollingUpdate" and updated < want:
        return False, f"{updated} of {want} pods updated"
    available = st.get("numberAvailable", 0)
    if available < want:
        return False, f"{available} of {want} pods available"
    return True, f"{available} of {want} pods available"


def _job(obj: ObjDict) -> tuple[bool, str]:
    failed = conditions.find(_status(obj), "Failed")
    if failed and failed.get("status") == "True":
        return False, f"failed: {failed.get('reason', '')} {failed.get('message', '')}".strip()
    if conditions.is_true(_status(obj), "Complete"):
        return True, "complete"
    return False, f"running ({_status(obj).get('succeeded', 0)} succeeded)"


def _pod(obj: ObjDict) -> tuple[bool, str]:
    phase = _status(obj).get("phase", "Pending")
    if phase == "Succeeded":
        return True, "succeeded"
    if phase == "Failed":
        return False, f"failed: {_status(obj).get('reason', '')} {_status(obj).get('message', '')}".strip()
    if conditions.is_true(_status(obj), "Ready"):
        return True, "ready"
    return False, f"phase {phase}, not ready"


def _crd(obj: ObjDict) -> tuple[bool, str]:
    if conditions.is_true(_status(obj), "Established"):
        return True, "established"
    names = conditions.find(_status(obj), "NamesAccepted")
    if names and names.get("status") == "False":
        return False, f"names not accepted: {names.get('message', '')}".rstrip(": ")
    return False, "not yet established"


def _namespace(obj: ObjDict) -> tuple[bool, str]:
    phase = _status(obj).get("phase", "Active")
    return (phase == "Active"), f"phase {phase}"


_JUDGES: dict[tuple[str, str], Callable[[ObjDict], tuple[bool, str]]] = {
    ("apps", "Deployment"): _deployment,
    ("apps", "StatefulSet"): _statefulset,
    ("apps", "DaemonSet"): _daemonset,
    ("batch", "Job"): _job,
    ("", "Pod"): _pod,
    ("apiextensions.k8s.io", "CustomResourceDefinition"): _crd,
    ("", "Namespace"): _namespace,
}
