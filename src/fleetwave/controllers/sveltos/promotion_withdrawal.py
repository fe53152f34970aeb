"""Deleting a ClusterPromotion withdraws its content stage by stage, the last stage first (issue 15).

Stage profiles are owned by their promotion, so without more the garbage collector would delete them
all at once and every member would lose the content together, production with dev. A promotion
therefore carries a finalizer; when it is deleted, the stage profile of the last stage that still
has one (or still has ClusterSummaries withdrawing) is deleted, and the previous stage waits until
that stage's summaries are gone (their own finalizers uninstall from the members, ADR 0045), and so
on back to the first stage; then the finalizer goes and the promotion with it.

A promotion that preserves its stage profiles on delete (`preserveClusterProfilesOnDelete`) leaves
them in place instead (`promotion_preserve`): it never carries this finalizer.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from fleetwave.controllers.shared.context import Context, as_dict
from fleetwave.controllers.sveltos import promotion_preserve as preserve
from fleetwave.controllers.sveltos.summary_status import PROFILE_LABEL
from fleetwave.kube import ops
from fleetwave.runtime.controller import Result

FINALIZER = "fleetwave.io/withdraw-stages-in-reverse"
KIND = "ClusterPromotion"
RECHECK = 2.0  # seconds; summary deletions wake the promotion too, this is the safety net

Namer = Callable[[str, str], str]  # (promotion, stage) -> stage profile name


def next_stage(stages: Sequence[str], remaining: Mapping[str, bool]) -> str | None:
    """The stage to withdraw now: the last one that still has something on members (pure)."""
    return next((s for s in reversed(stages) if remaining.get(s)), None)


async def guard(ctx: Context, obj: Any, stage_profile_name: Namer) -> Result | None:
    """Keep the finalizer on a live promotion (unless it preserves its profiles); on deletion,
    withdraw stage by stage, last first. A Result ends the reconcile."""
    raw = ctx.family.view(KIND, as_dict(obj))
    meta = raw.get("metadata") or {}
    finalizers = list(meta.get("finalizers") or [])
    keeps_profiles = (raw.get("spec") or {}).get("preserveClusterProfilesOnDelete") is True
    if not meta.get("deletionTimestamp"):
        wanted = not keeps_profiles
        if wanted != (FINALIZER in finalizers):
            kept = [f for f in finalizers if f != FINALIZER] + ([FINALIZER] if wanted else [])
            await preserve.set_finalizers(ctx, meta, kept)
            return Result()  # the edit's own event brings us back with the new resourceVersion
        return None
    if FINALIZER not in finalizers:
        return None
    if not keeps_profiles:
        pending = await _withdraw_next(ctx, obj, raw, stage_profile_name)
        if pending:
            return Result(requeue_after=RECHECK, poll=True)
    await preserve.set_finalizers(ctx, meta, [f for f in finalizers if f != FINALIZER])
    return Result()


async def _withdraw_next(ctx: Context, obj: Any, raw: Mapping[str, Any], stage_profile_name: Namer) -> bool:
    """Delete the profile of the last stage still delivering; True while anything is left."""
    name = str(raw["metadata"]["name"])
    stages = [str(s.get("name")) for s in (raw.get("spec") or {}).get("stages") or []]
    profiles = {s: stage_profile_name(name, s) for s in stages}
    remaining = {
        s: ctx.cache.get("ClusterProfile", None, p) is not None
        or bool(ctx.cache.labelled("ClusterSummary", PROFILE_LABEL, p))
        for s, p in profiles.items()
    }
    stage = next_stage(stages, remaining)
    if stage is None:
        return False
    profile = ctx.cache.get("ClusterProfile", None, profiles[stage])
    if profile is not None and not (profile.get("metadata") or {}).get("deletionTimestamp"):
        await ops.delete_if_exists(ctx.client, ctx.resource("ClusterProfile"), profiles[stage])
        await ctx.event(
            obj, False, "WithdrawingStage", f"deleted: withdrawing stage {stage} (stages go last first)"
        )
    return True
