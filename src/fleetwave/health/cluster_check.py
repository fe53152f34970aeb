"""Judge one member cluster: readiness of delivered objects, then the user's health checks.

Synchronous on purpose (Lua's getResource reads the cluster from inside the script); the controller
runs it inside a sandbox worker process (`fleetwave.sandbox`), never on its own threads.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from fleetwave.api.sveltos import ValidateHealth
from fleetwave.health import checks, readiness
from fleetwave.health.model import DEFAULT_LIMITS, Limits
from fleetwave.health.reader import KindNotServed, KubeResourceReader
from fleetwave.kube import client as kubeclient

ObjectId = tuple[str, str, str | None, str]


@dataclass(frozen=True, slots=True)
class Verdict:
    ok: bool
    message: str


def judge(
    kubeconfig: bytes,
    user_checks: Sequence[ValidateHealth],
    objects: Sequence[ObjectId],
    *,
    limits: Limits = DEFAULT_LIMITS,
    allow_insecure: bool = False,
) -> Verdict:
    try:
        config = kubeclient.member_config(kubeconfig, allow_insecure=allow_insecure)
    except kubeclient.KubeconfigRefused as e:
        return Verdict(False, str(e))
    with kubeclient.client(config) as client:
        reader = KubeResourceReader(client)
        for api_version, kind, namespace, name in objects:
            ref = f"{kind} {namespace + '/' if namespace else ''}{name}"
            try:
                live = reader.get(api_version, kind, namespace=namespace, name=name)
            except KindNotServed as e:
                return Verdict(False, f"{kind} {name}: {e}")
            if live is None:
                return Verdict(False, f"{ref} not found")
            ok, message = readiness.is_ready(live)
            if not ok:
                return Verdict(False, f"{ref}: {message}")
        for result in checks.evaluate_all(user_checks, reader, limits=limits):
            if not result.ok:
                return Verdict(False, f"health check {result.check or ''} failing: {result.message}")
    names = ", ".join(c.name for c in user_checks)
    return Verdict(True, f"ready; health checks passing: {names}" if names else "ready")
