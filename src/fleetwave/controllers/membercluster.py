"""MemberCluster reconcile: keep each member's readiness and Kubernetes version in its status.

The engine treats a not-ready member as one it must not start delivering to, so readiness has to
follow reality: a probe (`/readyz`, `/version`) on every change and every PROBE_INTERVAL seconds.
"""

from __future__ import annotations

import asyncio

from fleetwave.controllers import members
from fleetwave.controllers.context import Context, as_dict
from fleetwave.kube import kinds
from fleetwave.kube.status import StatusWrite, write_status
from fleetwave.mgmt import registration
from fleetwave.runtime.controller import Result

PROBE_INTERVAL = 30.0


async def reconcile(ctx: Context, key: str) -> Result:
    namespace, _, name = key.partition("/")
    obj = ctx.cache.obj("MemberCluster", namespace, name)
    if obj is None:
        return Result()
    member = members.from_object(as_dict(obj))
    secret = ctx.cache.get("Secret", member.secret[0], member.secret[1])
    raw = None if secret is None else members.kubeconfig_from_secret(secret, member.secret[2])
    if raw is None:
        result = registration.Probe(
            False, None, f"kubeconfig Secret {member.secret[0]}/{member.secret[1]} is missing"
        )
    else:
        result = await asyncio.to_thread(registration.probe, raw)
    previous = as_dict(obj).get("status") or {}
    status = {
        **previous,
        "ready": result.ready,
        "connectionStatus": "Healthy" if result.ready else "Down",
        "failureMessage": None if result.ready else result.message,
        "version": result.version or previous.get("version"),
    }
    written = await write_status(ctx.client, kinds.resource("MemberCluster"), obj, status)
    if written is StatusWrite.CONFLICT:
        return Result(requeue=True)
    if written is StatusWrite.WRITTEN and bool(previous.get("ready")) != result.ready:
        await ctx.event(obj, not result.ready, "Ready" if result.ready else "NotReady", result.message)
    return Result(requeue_after=PROBE_INTERVAL)
