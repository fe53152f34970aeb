"""Built-in readiness of delivered objects, judged on the controller's event loop (ADR 0068).

No user script runs here, only `health.readiness` over the objects as the member returns them, so
the sandbox (ADR 0041) buys nothing but a process hop and a second client: the objects are read
together through the member's pooled client, as a delivery reads them. Verdicts and messages are
those of the sandbox worker's judgement without user checks (`health.cluster_check`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from fleetwave.delivery.target import MemberTarget, MemberUnreachable
from fleetwave.health import readiness
from fleetwave.kube import kinds, ops

ObjectId = tuple[str, str, str | None, str]  # apiVersion, kind, namespace, name


class _NotServed:
    def __init__(self, message: str) -> None:
        self.message = message


async def judge(
    target: MemberTarget,
    objects: Sequence[ObjectId],
    *,
    wall_seconds: float,
    seen: Mapping[ObjectId, Mapping[str, Any]] | None = None,
    read: dict[ObjectId, Any] | None = None,
) -> tuple[bool, str]:
    """(ready, message): every object exists and is ready, or the first one (in the order given)
    that is not; a member that does not answer within `wall_seconds` is not ready. `seen`: objects
    as the member returned them a moment ago (the delivery's own applies), not read again. `read`:
    filled with what was read (a mapping; None when absent; anything else when not served), for the
    caller to judge on next time (`Sightings`)."""
    seen = seen or {}
    unread = [o for o in objects if o not in seen]
    if read is None:
        read = {}
    try:
        async with asyncio.timeout(wall_seconds):
            if unread:
                read.update(zip(unread, await _read_all(target, unread), strict=True))
            found = [seen[o] if o in seen else read[o] for o in objects]
    except TimeoutError:
        return False, f"health checks exceeded the wall-time limit of {wall_seconds:g}s; stopped"
    except MemberUnreachable as e:
        return False, f"cluster {target.name} unreachable: {e.detail}"
    except (ops.StatusError, ValueError) as e:
        return False, f"health check could not run: {type(e).__name__}: {e}"
    for (_, kind, namespace, name), live in zip(objects, found, strict=True):
        ref = f"{kind} {namespace + '/' if namespace else ''}{name}"
        if isinstance(live, _NotServed):
            return False, f"{kind} {name}: {live.message}"
        if live is None:
            return False, f"{ref} not found"
        ok, message = readiness.is_ready(dict(live))
        if not ok:
            return False, f"{ref}: {message}"
    return True, "ready"


async def _read_all(target: MemberTarget, objects: Sequence[ObjectId]) -> list[Any]:
    async with target.session() as client:
        resolver = kinds.AsyncKinds(client)
        return list(await asyncio.gather(*(_read(client, resolver, o) for o in objects)))


async def _read(client: Any, resolver: kinds.AsyncKinds, obj: ObjectId) -> dict[str, Any] | _NotServed | None:
    api_version, kind, namespace, name = obj
    info = await resolver.find(kinds.GVK(api_version, kind))
    if info is None:  # worded as the worker's resolver words it
        return _NotServed(f"kind {kind} is not served under {api_version} by this cluster")
    if info.namespaced and not namespace:
        raise ValueError(f"{kind} is namespaced: a namespace is needed to get {name!r}")
    found = await ops.get(
        client, kinds.resource_class(info), name, namespace=namespace if info.namespaced else None
    )
    if found is None:
        return None
    live = dict(found)
    live.setdefault("apiVersion", api_version)
    live.setdefault("kind", kind)
    return live
