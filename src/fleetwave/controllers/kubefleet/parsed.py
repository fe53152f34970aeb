"""The KubeFleet objects the wing works with, parsed into their pydantic models, and what follows from them.

A library of the wing, not a phase: the run's phases (`run_initialize`, `run_pass` and the passes
after it) and the placement controller all read a (Cluster)StagedUpdateRun, a
(Cluster)ResourcePlacement and a (Cluster)StagedUpdateStrategy through here, typed (`Run`,
`Placement`, `Strategy`), so none of them borrows from another's module. Besides parsing: the
members a placement picks (`fleet_of`) and the engine spec a run makes with its frozen strategy
(`rollout_spec`, `stuck_after`).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from fleetwave import translate
from fleetwave.api import codec
from fleetwave.api.kubefleet import (
    ClusterResourcePlacement,
    ClusterStagedUpdateRun,
    ClusterStagedUpdateStrategy,
    ResourcePlacement,
    StagedUpdateRun,
    StagedUpdateStrategy,
    StagedUpdateStrategySpec,
)
from fleetwave.api.meta import Resource, parse_duration
from fleetwave.api.objects import Obj
from fleetwave.controllers.fleet import members
from fleetwave.controllers.kubefleet import evictions, picking
from fleetwave.controllers.kubefleet import naming as nm
from fleetwave.controllers.shared.context import Context
from fleetwave.core import model as m
from fleetwave.kube import kinds

Run = ClusterStagedUpdateRun | StagedUpdateRun
Placement = ClusterResourcePlacement | ResourcePlacement
Strategy = ClusterStagedUpdateStrategy | StagedUpdateStrategy
STUCK = timedelta(minutes=5)
DEADLINE = timedelta(minutes=30)


def _parse(raw: Obj, kind: str) -> Resource:
    """`raw` (as the cache holds it, in whichever API family) as `kind`; raises codec.ManifestError."""
    return codec.parse_object({**raw, "apiVersion": f"{kinds.GROUP}/{kinds.VERSION}", "kind": kind})


def run(raw: Obj, kind: str) -> Run:
    """A (Cluster)StagedUpdateRun (`kind`: the scope's run kind)."""
    parsed = _parse(raw, kind)
    assert isinstance(parsed, Run), kind
    return parsed


def placement(raw: Obj, kind: str) -> Placement:
    """A (Cluster)ResourcePlacement (`kind`: the scope's placement kind), without its status: its
    readers take the stored status raw, and a placement's status names every cluster it picked (at
    100 clusters, parsing it was a fifth of the placement pass's CPU)."""
    parsed = _parse({k: v for k, v in raw.items() if k != "status"}, kind)
    assert isinstance(parsed, Placement), kind
    return parsed


def strategy(raw: Obj, kind: str) -> Strategy:
    """A (Cluster)StagedUpdateStrategy (`kind`: the scope's strategy kind)."""
    parsed = _parse(raw, kind)
    assert isinstance(parsed, Strategy), kind
    return parsed


def fleet_of(ctx: Context, placement: Placement) -> tuple[m.Fleet, dict[str, str]]:
    """The members the placement picks, and how each is named in status. A ClusterResourcePlacement
    picking with PickAll or PickN leaves out the clusters its executed evictions name (ADR 0107)."""
    every = members.registered(ctx.cache)
    out = _evicted(ctx, placement, [mb.key for mb in every])
    picked = picking.pick(placement.spec.policy, [mb for mb in every if mb.key not in out])
    return members.fleet(picked), picking.namer(every)


def _evicted(ctx: Context, placement: Placement, keys: list[str]) -> frozenset[str]:
    policy = placement.spec.policy
    if not isinstance(placement, ClusterResourcePlacement) or evictions.EVICTION not in ctx.cache.informers:
        return frozenset()
    if policy is not None and policy.placement_type == "PickFixed":
        return frozenset()  # it names its clusters: evictions of it are refused
    by_placement = ctx.cache.memo(
        "executed evictions",
        evictions.EVICTION,
        lambda: evictions.evicted(ctx.cache.list(evictions.EVICTION)),
    )
    return evictions.left_out(by_placement.get(placement.metadata.name, ()), keys)


def strategy_of(run: Run, scope: nm.Scope, spec: StagedUpdateStrategySpec) -> Strategy:
    """A stand-in strategy object around the frozen spec (the live one may be edited or gone)."""
    cls = StagedUpdateStrategy if scope.namespaced else ClusterStagedUpdateStrategy
    meta = {"name": run.spec.staged_rollout_strategy_name, "namespace": run.metadata.namespace}
    return cls.model_validate({"metadata": meta, "spec": spec.model_dump(mode="json", by_alias=True)})


def _duration(run: Run, key: str, default: timedelta) -> timedelta:
    raw = (run.metadata.annotations or {}).get(key)
    try:
        return parse_duration(raw) if raw else default
    except ValueError:
        return default


def stuck_after(run: Run) -> timedelta:
    """How long a cluster may take to become available before the run reports itself stuck."""
    return _duration(run, nm.STUCK_ANNOTATION, STUCK)


def rollout_spec(
    run: Run, scope: nm.Scope, frozen: StagedUpdateStrategySpec, snapshot_hash: str, *, poll: timedelta
) -> m.RolloutSpec:
    """The engine spec of the run with its frozen strategy; raises translate.TranslateError."""
    spec = translate.from_staged_run(run, strategy_of(run, scope, frozen), snapshot_hash=snapshot_hash)
    return replace(
        spec, poll_interval=poll, progress_deadline=_duration(run, nm.DEADLINE_ANNOTATION, DEADLINE)
    )
