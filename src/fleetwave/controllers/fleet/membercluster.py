"""MemberCluster reconcile: keep each member's readiness and Kubernetes version in its status.

The engine treats a not-ready member as one it must not start delivering to, so readiness has to
follow reality: a probe (`/readyz`, `/version`) on every change and every PROBE_INTERVAL seconds,
each member at its own moment of the interval (`next_probe_in`).

Before any probe the member's credentials are checked, without running or reading anything they
name: a kubeconfig Secret in another namespace is never read (`KubeconfigSecretRefused`), and a
kubeconfig the policy refuses (`exec`, `auth-provider`, `tokenFile`, file paths, `http://` or
skip-TLS-verify without the opt-in annotation) is reported as `KubeconfigRefused` and never probed.
The `Ready` condition's reason says which; messages name fields, never values.

Outside its `spec.activeWindow` a member is not ready (reason `OutsideActiveWindow`) and is not probed.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from fleetwave.api import conditions, pullmode
from fleetwave.api.objects import Obj
from fleetwave.controllers.fleet import member_labels, members, pull
from fleetwave.controllers.shared.context import Context, as_dict
from fleetwave.core import model as m
from fleetwave.core import timestamps, windows
from fleetwave.delivery.target import MemberTarget
from fleetwave.kube import ops
from fleetwave.kube.status import StatusWrite, Versioned
from fleetwave.mgmt import registration
from fleetwave.runtime.controller import Result

PROBE_INTERVAL = 30.0
DETAILS_EVERY = 5  # probes per reading of version and node count (`details_due`)
# A reconcile this close to the member's moment in the cycle (after a change woke it) skips to the
# next one rather than probing twice in a row.
_TOO_SOON = 1.0

REACHABLE = "APIServerReady"
UNREACHABLE = "APIServerUnreachable"
UNSUPPORTED = "UnsupportedField"
OUTSIDE_WINDOW = "OutsideActiveWindow"


@dataclass(frozen=True, slots=True)
class Verdict:
    ready: bool
    reason: str
    message: str
    version: str | None = None
    nodes: int | None = None


async def reconcile(ctx: Context, key: str) -> Result:
    namespace, _, name = key.rpartition("/")
    obj = ctx.cache.obj("MemberCluster", namespace or None, name)
    if obj is None:
        return Result()
    raw_obj = ctx.family.view("MemberCluster", as_dict(obj))
    member = members.from_object(raw_obj)
    window = active_window(raw_obj, ctx.clock())
    verdict = await _verdict(ctx, raw_obj, member, window)
    previous = raw_obj.get("status") or {}
    old = conditions.get(previous, "Ready")
    status = {
        **previous,
        "ready": verdict.ready,
        "connectionStatus": "Healthy" if verdict.ready else "Down",
        "failureMessage": None if verdict.ready else verdict.message,
        "version": verdict.version or previous.get("version"),
        "properties": _properties(previous.get("properties"), verdict, ctx.clock()),
        "conditions": [_condition(ctx, verdict, previous, raw_obj)],
    }
    written, _ = await ctx.write_status("MemberCluster", Versioned.of(obj), status)
    if written is StatusWrite.CONFLICT:
        return Result(requeue=True)
    changed = bool(previous.get("ready")) != verdict.ready or old.get("reason") != verdict.reason
    if written is StatusWrite.WRITTEN and changed:
        await ctx.event(obj, not verdict.ready, verdict.reason, verdict.message)
    await _keep_labels(ctx, raw_obj, verdict.version or previous.get("version"), member)
    # Refusals are re-checked too (cheap, nothing is run): a Secret without fleetwave's label is not
    # watched for this member, so fixing it would otherwise go unnoticed. A window that opens or
    # closes sooner than the next probe wakes us then.
    after = next_probe_in(key, ctx.clock())
    if member.pull:  # its lease's events wake it; a lease that stops being renewed does not
        left = pull.seconds_left(pull.lease_of(ctx, member.key), ctx.clock())
        after = min(after, left) if left is not None and left > 0 else after
    return Result(requeue_after=min(after, window.seconds_left) if window else after)


def labels_kept(ctx: Context) -> bool:
    """Whether this family's members carry Sveltos' registration labels: SveltosClusters and the
    native MemberClusters (KubeFleet's members carry their facts as `status.properties` instead)."""
    return ctx.family.native or ctx.family.served("MemberCluster").kind == "SveltosCluster"


async def _keep_labels(ctx: Context, raw_obj: dict[str, Any], version: Any, member: members.Member) -> None:
    if not labels_kept(ctx):
        return
    labels = (raw_obj.get("metadata") or {}).get("labels") or {}
    patch = member_labels.labels_patch(labels, version if isinstance(version, str) else None, member.pull)
    if patch:
        body = {"metadata": {"labels": patch}}
        await ops.merge_patch(
            ctx.client, ctx.resource("MemberCluster"), member.name, body, namespace=member.namespace
        )


def next_probe_in(key: str, now: datetime) -> float:
    """Seconds to the member's own moment of the PROBE_INTERVAL cycle, a stable hash of its key: a
    fleet registered at once is probed spread over the interval, not all in the same second (100
    members made a burst of 300 requests every 30 s). At most PROBE_INTERVAL + _TOO_SOON (pure)."""
    phase = _phase(key) / 2**64 * PROBE_INTERVAL
    left = (phase - now.timestamp()) % PROBE_INTERVAL
    return left + PROBE_INTERVAL if left < _TOO_SOON else left


def details_due(key: str, previous: dict[str, Any], now: datetime) -> bool:
    """Whether this probe also reads the member's version and node count: at the controller's first
    probe of it (no Ready condition yet: registration writes `ready` and `version`, not the node
    count, and a later write of that alone woke every placement and the member's summaries), when
    its status lacks a version or it was not ready, else at one probe in DETAILS_EVERY (its own, by
    the same hash as its moment in the cycle). Readiness is asked at every probe; what seldom
    changes is not, at three requests per member every PROBE_INTERVAL (pure)."""
    if not previous.get("ready") or not previous.get("version") or not previous.get("conditions"):
        return True
    cycle = int(now.timestamp() // PROBE_INTERVAL)
    return cycle % DETAILS_EVERY == _phase(key) % DETAILS_EVERY


def _phase(key: str) -> int:
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big")


def _properties(previous: Any, verdict: Verdict, now: datetime) -> dict[str, Any] | None:
    """KubeFleet's `status.properties` (ADR 0085): the node count the probe saw, in upstream's shape.
    The observation time moves only when the value does, so a steady member writes no new status."""
    kept = dict(previous) if isinstance(previous, dict) else {}
    if verdict.nodes is None:
        return kept or None
    value = str(verdict.nodes)
    seen = kept.get(members.NODE_COUNT)
    if not (isinstance(seen, dict) and seen.get("value") == value):
        kept[members.NODE_COUNT] = {"value": value, "observationTime": timestamps.fmt(now)}
    return kept


async def _verdict(
    ctx: Context, raw_obj: dict[str, Any], member: members.Member, window: Window | None
) -> Verdict:
    refused = members.unhonoured(raw_obj)
    if refused:
        return Verdict(False, UNSUPPORTED, refused)
    if window is not None and not window.open:
        return Verdict(False, OUTSIDE_WINDOW, window.message)
    if member.pull:
        return _agent_verdict(ctx, member)
    found = members.credentials(ctx.cache, member)
    if found.kubeconfig is None:
        return Verdict(False, found.reason, found.message)
    target = MemberTarget(name=member.key, kubeconfig=found.kubeconfig, allow_insecure=member.allow_insecure)
    details = details_due(member.key, raw_obj.get("status") or {}, ctx.clock())
    probe = await registration.probe_pooled(target, details=details)
    reason = REACHABLE if probe.ready else UNREACHABLE
    return Verdict(probe.ready, reason, probe.message, probe.version, probe.nodes)


AGENT_CONNECTED = "AgentConnected"
AGENT_DISCONNECTED = "AgentDisconnected"


def _agent_verdict(ctx: Context, member: members.Member) -> Verdict:
    """A pull member is never contacted: it is ready while its agent keeps its lease on the hub, and
    its version and node count are what the agent wrote on that lease."""
    lease = pull.lease_of(ctx, member.key)
    now = ctx.clock()
    annotations = ((lease or {}).get("metadata") or {}).get("annotations") or {}
    version = annotations.get(pullmode.VERSION_ANNOTATION) or None
    nodes = annotations.get(pullmode.NODES_ANNOTATION)
    count = int(nodes) if isinstance(nodes, str) and nodes.isdigit() else None
    if pull.alive(lease, now):
        holder = ((lease or {}).get("spec") or {}).get("holderIdentity")
        return Verdict(True, AGENT_CONNECTED, f"agent {holder} connected", version, count)
    renewed = ((lease or {}).get("spec") or {}).get("renewTime")
    seen = f"last seen at {timestamps.fmt(renewed) if isinstance(renewed, datetime) else renewed}"
    message = f"agent not connected ({seen if renewed else 'never connected'}); the cluster runs what it has"
    return Verdict(False, AGENT_DISCONNECTED, message, version, count)


@dataclass(frozen=True, slots=True)
class Window:
    open: bool
    message: str
    seconds_left: float  # until it opens or closes (a minimum of one second)


def active_window(raw_obj: dict[str, Any], now: datetime) -> Window | None:
    """`spec.activeWindow` (Sveltos: the member is unpaused at each `from` fire and paused at the next
    `to` fire): outside it the member is not delivered to, as if paused (pure)."""
    raw = (raw_obj.get("spec") or {}).get("activeWindow")
    if not isinstance(raw, dict):
        return None
    state = windows.window_state(m.Window(str(raw.get("from", "")), str(raw.get("to", ""))), now)
    if state.error:
        return Window(False, f"spec.activeWindow: {state.error}", PROBE_INTERVAL)
    left = max((state.changes_at - now).total_seconds(), 1.0) if state.changes_at else PROBE_INTERVAL
    when = timestamps.fmt(state.changes_at) if state.changes_at else "unknown"
    return Window(state.open, f"outside spec.activeWindow until {when}", left)


def _condition(ctx: Context, verdict: Verdict, previous: Obj, raw_obj: dict[str, Any]) -> dict[str, Any]:
    return conditions.cond(
        previous,
        "Ready",
        "True" if verdict.ready else "False",
        verdict.reason,
        verdict.message[:32768],
        (raw_obj.get("metadata") or {}).get("generation"),
        timestamps.fmt(ctx.clock()),
    )
