"""`preserveClusterProfilesOnDelete`: a deleted ClusterPromotion leaves its stage ClusterProfiles (and
so what they delivered) in place, as standalone profiles.

Stage profiles are owned by their promotion (a controller reference), so garbage collection would
take them with it. A promotion that asks to preserve them carries a finalizer; when it is deleted,
its stage profiles lose their owner reference first, then the finalizer goes. Pre-verification
profiles are not preserved (they exist only while a stage is checked). Turning the field off
removes the finalizer again. An orphaned profile is no longer a stage profile: it resolves its own
policyRefs from then on (ADR 0035).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fleetwave.controllers.shared.context import Context, as_dict
from fleetwave.kube import ops
from fleetwave.runtime.controller import Result

FINALIZER = "fleetwave.io/preserve-stage-profiles"
KIND = "ClusterPromotion"


Namer = Callable[[str, str], str]  # (promotion, stage) -> stage profile name


async def guard(ctx: Context, obj: Any, stage_profile_name: Namer) -> Result | None:
    """Keep the finalizer in step with the field; on deletion, orphan the stage profiles and let the
    promotion go. A Result ends the reconcile."""
    raw = ctx.family.view(KIND, as_dict(obj))
    meta = raw.get("metadata") or {}
    finalizers = list(meta.get("finalizers") or [])
    preserve = (raw.get("spec") or {}).get("preserveClusterProfilesOnDelete") is True
    if meta.get("deletionTimestamp"):
        if FINALIZER in finalizers:
            await _orphan_stage_profiles(ctx, raw, stage_profile_name)
            await set_finalizers(ctx, meta, [f for f in finalizers if f != FINALIZER])
        return Result()
    if preserve and FINALIZER not in finalizers:
        await set_finalizers(ctx, meta, [*finalizers, FINALIZER])
    elif not preserve and FINALIZER in finalizers:
        await set_finalizers(ctx, meta, [f for f in finalizers if f != FINALIZER])
    return None


async def set_finalizers(ctx: Context, meta: dict[str, Any], finalizers: list[str]) -> None:
    # Guarded by resourceVersion: a concurrent edit makes this fail and the watch brings us back.
    body = {"metadata": {"finalizers": finalizers, "resourceVersion": meta.get("resourceVersion")}}
    await ops.merge_patch(ctx.client, ctx.resource(KIND), str(meta["name"]), body)


async def _orphan_stage_profiles(ctx: Context, raw: dict[str, Any], stage_profile_name: Namer) -> None:
    meta = raw["metadata"]
    stages = [str(s.get("name")) for s in (raw.get("spec") or {}).get("stages") or []]
    names = {stage_profile_name(str(meta["name"]), s) for s in stages}
    for name in sorted(names):
        profile = ctx.cache.get("ClusterProfile", None, name)
        if profile is None:
            continue
        refs = (profile.get("metadata") or {}).get("ownerReferences") or []
        kept = [r for r in refs if r.get("uid") != meta.get("uid")]
        if kept != refs:
            await ops.merge_patch(
                ctx.client, ctx.resource("ClusterProfile"), name, {"metadata": {"ownerReferences": kept}}
            )
