"""Judge one member cluster: readiness of delivered objects, then the user's health checks.

Synchronous on purpose (Lua's getResource reads the cluster from inside the script); the controller
runs it inside a sandbox worker process (`fleetwave.sandbox`), never on its own threads.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
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


class Clients:
    """Sync clients kept between judgements in one worker process (connections reused; a handshake
    per judgement was most of its time), keyed by a hash of the kubeconfig, least recently used
    closed first. Not thread-safe: a sandbox worker runs one job at a time."""

    def __init__(self, size: int = 32) -> None:
        self.size = size
        self._clients: OrderedDict[tuple[str, bool], kubeclient.Client] = OrderedDict()

    def get(self, kubeconfig: bytes, allow_insecure: bool) -> kubeclient.Client:
        key = hashlib.sha256(kubeconfig).hexdigest(), allow_insecure
        found = self._clients.get(key)
        if found is None:
            found = kubeclient.client(kubeclient.member_config(kubeconfig, allow_insecure=allow_insecure))
            self._clients[key] = found
            while len(self._clients) > self.size:
                self._clients.popitem(last=False)[1].close()
        self._clients.move_to_end(key)
        return found

    def drop(self, kubeconfig: bytes, allow_insecure: bool) -> None:
        """Forget a client whose judgement failed (its connections may be the reason)."""
        found = self._clients.pop((hashlib.sha256(kubeconfig).hexdigest(), allow_insecure), None)
        if found is not None:
            found.close()


def judge(
    kubeconfig: bytes,
    user_checks: Sequence[ValidateHealth],
    objects: Sequence[ObjectId],
    *,
    limits: Limits = DEFAULT_LIMITS,
    allow_insecure: bool = False,
    clients: Clients | None = None,
) -> Verdict:
    """`clients`: where to keep the member's client for the next judgement (default: a fresh client,
    closed afterwards)."""
    try:
        if clients is not None:
            return _judge(clients.get(kubeconfig, allow_insecure), user_checks, objects, limits)
        config = kubeclient.member_config(kubeconfig, allow_insecure=allow_insecure)
    except kubeclient.KubeconfigRefused as e:
        return Verdict(False, str(e))
    with kubeclient.client(config) as client:
        return _judge(client, user_checks, objects, limits)


def _judge(
    client: kubeclient.Client,
    user_checks: Sequence[ValidateHealth],
    objects: Sequence[ObjectId],
    limits: Limits,
) -> Verdict:
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
