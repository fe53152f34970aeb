"""Pick the rollout out of a set of manifests and translate it, with what `plan` needs beside the spec.

A file holds one ClusterPromotion, or one ClusterProfile, or one (Cluster)StagedUpdateRun with its
strategy (and optionally its resource snapshot).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from fleetwave.api.codec import Resource
from fleetwave.api.models import (
    ClusterProfile,
    ClusterPromotion,
    ClusterResourceSnapshot,
    ClusterStagedUpdateRun,
    ClusterStagedUpdateStrategy,
    ResourceSnapshot,
    StagedUpdateRun,
    StagedUpdateStrategy,
)
from fleetwave.core import model as m
from fleetwave.translate import kubefleet, sveltos
from fleetwave.translate.errors import fail

_ROLLOUTS = (ClusterPromotion, ClusterProfile, ClusterStagedUpdateRun, StagedUpdateRun)
_COMPANIONS = (ClusterStagedUpdateStrategy, StagedUpdateStrategy, ClusterResourceSnapshot, ResourceSnapshot)


@dataclass(frozen=True, slots=True)
class Rollout:
    kind: str
    name: str
    spec: m.RolloutSpec
    selector_paths: tuple[str, ...]  # field path of each stage's selector, for error messages
    approved: tuple[str, ...] = ()  # approval ids already granted in the manifest


def _one(objs: Sequence[Resource], kinds: tuple[type[Resource], ...], what: str) -> Resource | None:
    found = [o for o in objs if isinstance(o, kinds)]
    if len(found) > 1:
        names = ", ".join(f"{o.kind_name}/{o.metadata.name}" for o in found)
        raise fail("", f"expected one {what}, found {len(found)}: {names}")
    return found[0] if found else None


def _staged(run: kubefleet.Run, objs: Sequence[Resource]) -> Rollout:
    strategy = _one(objs, (ClusterStagedUpdateStrategy, StagedUpdateStrategy), "staged update strategy")
    if not isinstance(strategy, ClusterStagedUpdateStrategy | StagedUpdateStrategy):
        raise fail(
            "spec.stagedRolloutStrategyName",
            f"strategy {run.spec.staged_rollout_strategy_name!r} is not in the file; add it",
        )
    snap = _one(objs, (ClusterResourceSnapshot, ResourceSnapshot), "resource snapshot")
    snapshot = snap if isinstance(snap, ClusterResourceSnapshot | ResourceSnapshot) else None
    spec = kubefleet.from_staged_run(run, strategy, snapshot_hash=kubefleet.snapshot_hash(run, snapshot))
    paths = kubefleet.strategy_selector_paths(run, strategy)
    return Rollout(run.kind_name, run.metadata.name, spec, paths)


def from_manifests(objs: Sequence[Resource]) -> Rollout:
    for o in objs:
        if not isinstance(o, _ROLLOUTS + _COMPANIONS):
            raise fail(
                "kind",
                f"{o.kind_name}/{o.metadata.name} cannot be planned (expected "
                "ClusterPromotion, ClusterProfile or a StagedUpdateRun with its strategy)",
            )
    rollout = _one(objs, _ROLLOUTS, "ClusterPromotion, ClusterProfile or staged update run")
    if isinstance(rollout, ClusterPromotion):
        return Rollout(
            rollout.kind_name,
            rollout.metadata.name,
            sveltos.from_promotion(rollout),
            sveltos.promotion_selector_paths(rollout),
            sveltos.pre_approved(rollout),
        )
    if isinstance(rollout, ClusterProfile):
        if rollout.spec.set_refs:
            # What a set chooses depends on readiness and on what it chose before: the management
            # cluster knows, a file does not. Planning without them would plan for other clusters.
            raise fail(
                "spec.setRefs",
                "cluster sets choose their clusters in the management cluster; plan cannot tell which "
                "(plan the profile with clusterSelector or clusterRefs instead)",
            )
        spec = sveltos.from_profile(rollout)
        return Rollout(
            rollout.kind_name, rollout.metadata.name, spec, sveltos.profile_selector_paths(rollout)
        )
    if isinstance(rollout, ClusterStagedUpdateRun | StagedUpdateRun):
        return _staged(rollout, objs)
    raise fail("kind", "nothing to plan: expected a ClusterPromotion, ClusterProfile or staged update run")
