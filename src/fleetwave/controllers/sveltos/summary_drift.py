"""`syncMode: ContinuousWithDriftDetection` for a ClusterSummary (ADR 0114): its helm releases'
objects restored from their deployed revision, and the member watches that notice drift.

A summary that detects drift is delivered again whenever one of the objects it deployed changes on
its member — its resources (re-applied by the delivery, as always) and the objects of its helm
releases (restored here, without helm: no new revision). The member watch wakes it; where the
member is not watched (past the watches' bounds, a pull member's agent, no watches at all) it is
delivered again every DRIFT_POLL seconds instead. A watched summary is still delivered again every
DRIFT_RESYNC seconds: the safety net under a watch that is down, and the renewal of its
subscription before the member watches forget an idle one.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from typing import Any

from fleetwave.api.sveltos import ClusterProfileSpec
from fleetwave.controllers.shared.context import Context
from fleetwave.controllers.sveltos import drift_exclusions
from fleetwave.controllers.sveltos import summary_status as ss
from fleetwave.delivery import helm_drift
from fleetwave.delivery.target import MemberTarget

DRIFT_POLL = 30.0
DRIFT_RESYNC = 240.0  # below the member watches' idle expiry (300 s): the subscription is renewed
MODE = "ContinuousWithDriftDetection"
ObjectId = tuple[str, str, str | None, str]


def detects(profile: ClusterProfileSpec) -> bool:
    return profile.sync_mode == MODE


def began(ctx: Context) -> float | None:
    """When a delivery starts reading the member (a change after it wakes the summary again)."""
    return ctx.drift_watches.now() if ctx.drift_watches is not None else None


async def settle(
    ctx: Context,
    key: str,
    target: MemberTarget,
    profile: ClusterProfileSpec,
    delivered: tuple[Sequence[ObjectId], Sequence[ss.HelmRelease]],
    since: float | None,
) -> tuple[str, ...]:
    """After a delivery to the summary `key` ("namespace/name"): its releases' drift restored (what
    drifted, or could not be restored), and the kinds of everything it `delivered` (its resources'
    objects, its releases) watched — when its profile detects drift; else it is not watched."""
    objects, found = delivered
    helm, released = await releases(target, profile, found)
    follow(ctx, key, target, profile, [*objects, *released], since)
    return helm


async def releases(
    target: MemberTarget, profile: ClusterProfileSpec, found: Sequence[ss.HelmRelease]
) -> tuple[tuple[str, ...], tuple[ObjectId, ...]]:
    """(what drifted and was restored, or could not be; the objects of the releases) for the releases
    this delivery manages, when the profile detects drift (never a dry run). driftExclusions are
    left as they are."""
    if not detects(profile):
        return (), ()
    excluded = list(profile.drift_exclusions or [])

    def trim(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return drift_exclusions.apply(objects, excluded)

    drift: list[str] = []
    ids: list[ObjectId] = []
    for release in found:
        if release.status != "Managing":  # failed, uninstalled, or another profile's
            continue
        report = await helm_drift.restore(target, release.release_name, release.release_namespace, trim)
        drift += [*report.restored, *report.errors]
        ids += report.objects
    return tuple(drift), tuple(ids)


def _key(ctx: Context, key: str) -> tuple[Hashable, Any] | None:
    wake = ctx.wake("ClusterSummary", key)
    return None if wake is None or ctx.drift_watches is None else (wake.key, wake.call)


def follow(
    ctx: Context,
    key: str,
    target: MemberTarget,
    profile: ClusterProfileSpec,
    objects: Iterable[ObjectId],
    since: float | None,
) -> None:
    """Watch the kinds of the summary's deployed objects when it detects drift (forget them else)."""
    found, port = _key(ctx, key), ctx.drift_watches
    if found is None or port is None:
        return
    subscriber, call = found
    if detects(profile):
        port.follow(target, subscriber, objects, call, since=since)
    else:
        port.forget(subscriber)


def forget(ctx: Context, key: str) -> None:
    found = _key(ctx, key)
    if found is not None and ctx.drift_watches is not None:
        ctx.drift_watches.forget(found[0])


def poll_after(ctx: Context, key: str) -> float:
    """When the summary `key`, which detects drift, is delivered again without a member event."""
    found = _key(ctx, key)
    watched = found is not None and ctx.drift_watches is not None and ctx.drift_watches.watched(found[0])
    return DRIFT_RESYNC if watched else DRIFT_POLL
