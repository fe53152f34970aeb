"""Follow one ClusterPromotion live: watches on it and its ClusterSummaries drive redraws.

Every watch event marks the view dirty; a 1 s tick redraws countdowns in between. `follow` returns
the last view once `stop(view)` holds (by default: the rollout of the latest spec finished).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
from collections.abc import AsyncIterable, Callable
from dataclasses import dataclass, field
from typing import Any

from fleetwave.api import families
from fleetwave.api.families import Family
from fleetwave.kube import kinds, ops, selectors, sync_ops
from fleetwave.kube.client import AsyncClient, Client
from fleetwave.ux import view as v

View = dict[str, Any]


class PromotionNotFound(LookupError):
    pass


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _dict(obj: Any) -> dict[str, Any]:
    result: dict[str, Any] = obj.to_dict() if hasattr(obj, "to_dict") else dict(obj)
    return result


def fetch_view(
    client: Client, name: str, now: dt.datetime | None = None, family: Family = families.NATIVE
) -> View:
    """One-shot: get the promotion and list the summaries of its stage profiles (in `family`'s groups)."""
    found = sync_ops.get(client, kinds.family_resource(family, "ClusterPromotion"), name)
    if found is None:
        raise PromotionNotFound(name)
    promotion = family.view("ClusterPromotion", _dict(found))
    summaries = client.list(
        kinds.family_resource(family, "ClusterSummary"),
        namespace=ops.ALL_NAMESPACES,
        labels=selectors.exists(v.PROFILE_LABEL),
    )
    views = [family.view("ClusterSummary", _dict(s)) for s in summaries]
    return v.promotion_view(promotion, views, now or _now())


@dataclass
class _Seen:
    promotion: dict[str, Any] | None = None
    deleted: bool = False
    summaries: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    dirty: asyncio.Event = field(default_factory=asyncio.Event)

    def on_promotion(self, kind: str, obj: dict[str, Any]) -> None:
        self.deleted = kind == "DELETED"
        self.promotion = None if self.deleted else obj

    def on_summary(self, kind: str, obj: dict[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        key = (str(meta.get("namespace")), str(meta.get("name")))
        if kind == "DELETED":
            self.summaries.pop(key, None)
        else:
            self.summaries[key] = obj


async def _pump(
    open_stream: Callable[[], AsyncIterable[tuple[str, Any]]],
    apply: Callable[[str, dict[str, Any]], None],
    dirty: asyncio.Event,
) -> None:
    """Feed one watch into `apply`; a broken connection is re-opened (the watch replays the state)."""
    while True:
        try:
            async for kind, obj in open_stream():
                apply(kind, _dict(obj))
                dirty.set()
        except ops.HTTPError:  # ApiError included
            await asyncio.sleep(1.0)


async def follow(
    client: AsyncClient,
    name: str,
    on_view: Callable[[View], None],
    *,
    stop: Callable[[View], bool] = v.is_finished,
    tick: float = 1.0,
    clock: Callable[[], dt.datetime] = _now,
    family: Family = families.NATIVE,
) -> View:
    """Call `on_view` on every change (and every `tick` s) until `stop(view)`; returns that view."""
    seen = _Seen()
    promotions = kinds.family_resource(family, "ClusterPromotion")
    summaries = kinds.family_resource(family, "ClusterSummary")

    def on_promotion(kind: str, obj: dict[str, Any]) -> None:
        seen.on_promotion(kind, family.view("ClusterPromotion", obj))

    def on_summary(kind: str, obj: dict[str, Any]) -> None:
        seen.on_summary(kind, family.view("ClusterSummary", obj))

    streams = [
        _pump(
            lambda: ops.watch(client, promotions, fields={"metadata.name": name}),
            on_promotion,
            seen.dirty,
        ),
        _pump(
            lambda: ops.watch(
                client,
                summaries,
                namespace=ops.ALL_NAMESPACES,
                labels=selectors.exists(v.PROFILE_LABEL),
            ),
            on_summary,
            seen.dirty,
        ),
    ]
    tasks = [asyncio.create_task(s) for s in streams]
    try:
        return await _redraw(seen, name, on_view, stop, tick, clock)
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task


async def _redraw(
    seen: _Seen,
    name: str,
    on_view: Callable[[View], None],
    stop: Callable[[View], bool],
    tick: float,
    clock: Callable[[], dt.datetime],
) -> View:
    while True:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(seen.dirty.wait(), timeout=tick)
        seen.dirty.clear()
        if seen.deleted:
            raise PromotionNotFound(f"ClusterPromotion {name} was deleted")
        if seen.promotion is None:
            continue  # the watch has not delivered it yet
        view = v.promotion_view(seen.promotion, seen.summaries.values(), clock())
        on_view(view)
        if stop(view):
            return view
