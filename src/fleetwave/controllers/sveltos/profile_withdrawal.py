"""Deleting a ClusterProfile withdraws its content at the pace it was rolled out: maxUpdate clusters at
a time (issue 15, ADR 0090).

ClusterSummaries are owned by their profile, so without more the garbage collector would delete them
all at once and every member would lose the content in the same instant: the outage a rolling update
exists to avoid, run backwards. A profile therefore carries a finalizer; when it is deleted, at most
maxUpdate of its summaries are being deleted at any time (each summary's own finalizer uninstalls from
its member, ADR 0045), the next ones only once those are gone; then the finalizer goes and the
profile with it. Without maxUpdate (Sveltos: unlimited) every summary goes at once, as before; a
promotion's stage profiles have none (the promotion paces them, and withdraws them last stage
first, ADR 0086). A stage profile is created with the finalizer in its promotion's apply (ADR 0148);
`guard` adds it to every other profile.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from fleetwave.controllers.shared.context import Context, as_dict
from fleetwave.controllers.shared.keys import SummaryKey
from fleetwave.controllers.sveltos.summary_status import PROFILE_LABEL
from fleetwave.core import batching
from fleetwave.core import model as m
from fleetwave.kube import ops
from fleetwave.runtime.controller import Result

FINALIZER = "fleetwave.io/withdraw-in-batches"
KIND = "ClusterProfile"
RECHECK = 2.0  # seconds; summary deletions wake the profile too, this is the safety net


class Withdrawals:
    """The summaries this process asked to delete, per profile being withdrawn (by uid), until its
    cache shows them leaving: a wake-up in between must not start the next batch early. The profile
    controller's own (app builds one per family); in memory only, as a restart reads the summaries'
    deletion timestamps again."""

    def __init__(self) -> None:
        self._asked: dict[str, set[SummaryKey]] = {}

    def in_flight(self, profile_uid: str, cached: Iterable[SummaryKey]) -> frozenset[SummaryKey]:
        """The summaries asked to be deleted that the cache still holds (those gone are forgotten)."""
        asked = self._asked.setdefault(profile_uid, set())
        asked &= set(cached)
        return frozenset(asked)

    def asked(self, profile_uid: str, summaries: Iterable[SummaryKey]) -> None:
        self._asked.setdefault(profile_uid, set()).update(summaries)

    def done(self, profile_uid: str) -> None:
        """The profile's withdrawal is over: nothing about it is kept."""
        self._asked.pop(profile_uid, None)


def next_batch(summaries: Sequence[tuple[str, bool]], max_update: str | int | None) -> list[str]:
    """The summaries to delete now (pure): `summaries` is (name, already being deleted), and at most
    maxUpdate (resolved against all of them) are on their way out at once, in name order."""
    try:
        parsed = m.MaxInFlight.parse(max_update, round_up=True)
    except ValueError:  # admission refuses it; a profile that predates the rule withdraws at once
        parsed = m.MaxInFlight()
    limit = batching.resolve_max_in_flight(parsed, len(summaries))
    leaving = sum(1 for _, deleting in summaries if deleting)
    waiting = sorted(name for name, deleting in summaries if not deleting)
    return waiting[: max(0, limit - leaving)]


async def guard(ctx: Context, withdrawals: Withdrawals, obj: Any) -> Result | None:
    """Keep the finalizer on a live profile; on deletion, withdraw in batches. A Result ends the
    reconcile."""
    raw = as_dict(obj)
    meta = raw.get("metadata") or {}
    finalizers = list(meta.get("finalizers") or [])
    if not meta.get("deletionTimestamp"):
        if FINALIZER not in finalizers:
            if not await _set_finalizers(ctx, meta, [*finalizers, FINALIZER]):
                return Result(requeue=True)
            return Result()  # the edit's own event brings us back with the new resourceVersion
        return None
    if FINALIZER not in finalizers:
        return None
    if await _withdraw_next(ctx, withdrawals, obj, raw):
        return Result(requeue_after=RECHECK)
    if not await _set_finalizers(ctx, meta, [f for f in finalizers if f != FINALIZER]):
        return Result(requeue=True)
    withdrawals.done(str(meta.get("uid")))
    return Result()


async def _withdraw_next(ctx: Context, withdrawals: Withdrawals, obj: Any, raw: Mapping[str, Any]) -> bool:
    """Delete the next batch of summaries; True while any is left."""
    summaries = ctx.cache.labelled("ClusterSummary", PROFILE_LABEL, str(raw["metadata"]["name"]))
    if not summaries:
        return False
    uid = str(raw["metadata"].get("uid"))
    keys = [SummaryKey.of(s) for s in summaries]
    asked = withdrawals.in_flight(uid, keys)
    states = [
        (key.key, bool(s["metadata"].get("deletionTimestamp")) or key in asked)
        for key, s in zip(keys, summaries, strict=True)
    ]
    batch = [SummaryKey.parse(key) for key in next_batch(states, (raw.get("spec") or {}).get("maxUpdate"))]
    withdrawals.asked(uid, batch)
    for key in batch:
        await ops.delete_if_exists(
            ctx.client, ctx.resource("ClusterSummary"), key.name, namespace=key.namespace
        )
    if batch:
        left = len(summaries) - sum(1 for _, deleting in states if deleting)
        await ctx.event(
            obj,
            False,
            "WithdrawingBatch",
            f"withdrawing {len(batch)} of {left} clusters (maxUpdate at a time)",
        )
    return True


async def _set_finalizers(ctx: Context, meta: Mapping[str, Any], finalizers: list[str]) -> bool:
    """Guarded by resourceVersion; False when the profile was edited since it was read (its
    promotion applying the next batch, say): retried on the newer version, without an error in
    the log for an everyday race."""
    body = {"metadata": {"finalizers": finalizers, "resourceVersion": meta.get("resourceVersion")}}
    return await ops.merge_patch_unless_changed(ctx.client, ctx.resource(KIND), str(meta["name"]), body)
