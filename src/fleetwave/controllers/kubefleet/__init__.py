"""KubeFleet-style placements and staged update runs on the shared engine: informers, controllers, watches.

`register(manager, ctx)` adds everything to a Manager built by `fleetwave.controllers.app`: informers
for the KubeFleet kinds and for every kind a placement may select, a placement controller and a run
controller per scope, the eviction controller (ADR 0107), and the watches that map changes to their
keys.

Its floor: beside controllers.sveltos and independent of it, above gates, fleet and shared
(pyproject's controllers-floor contract).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import Any

from fleetwave.controllers.kubefleet import (
    envelopes,
    eviction,
    evictions,
    executor,
    override_snapshots,
    placement,
    run,
    run_rollback,
    run_writes,
    selection,
)
from fleetwave.controllers.kubefleet import naming as nm
from fleetwave.controllers.kubefleet import overrides as ov
from fleetwave.controllers.shared.context import Context
from fleetwave.kube import kinds, placeable
from fleetwave.runtime.controller import Controller
from fleetwave.runtime.manager import Manager
from fleetwave.runtime.watching import Informer, object_key


def _selectable(info: kinds.KindInfo) -> Any:
    """Core-group kinds through lightkube's typed classes; the others as generic (dict) resources:
    typed models reject watch bookmarks, which carry only metadata, for kinds with required spec
    fields (Deployment.spec.selector, ...)."""
    if info.gvk.group:
        return kinds.resource_class(info)
    return kinds.builtin_resource(info.gvk.api_version, info.gvk.kind)


# The informer's resource of every built-in kind a placement may select, by kind.
SELECTABLE: dict[str, Any] = {info.gvk.kind: _selectable(info) for info in placeable.BUILTIN}


def _informer(manager: Manager, ctx: Context, kind: str, resource: Any) -> Informer:
    """Reuse an informer the composition root already runs (ConfigMap, Secret, MemberCluster)."""
    existing = ctx.cache.informers.get(kind)
    if existing is not None:
        return existing
    informer = manager.add_informer(Informer(manager.watch_client, resource, namespaces=ctx.watched or ()))
    ctx.cache.informers[kind] = informer
    return informer


def register(manager: Manager, ctx: Context) -> None:
    for scope in nm.SCOPES:
        for kind in (scope.placement, scope.snapshot, scope.strategy, scope.run, scope.approval):
            _informer(manager, ctx, kind, ctx.resource(kind))
    for kind, resource in SELECTABLE.items():
        _informer(manager, ctx, kind, resource)
    for kind in envelopes.KINDS:  # ADR 0092
        _informer(manager, ctx, kind, ctx.resource(kind))
    for info in ctx.placement_kinds:  # ADR 0091
        for extra in selection.configured([info]):
            _informer(manager, ctx, extra.key, kinds.resource_class(info))
    _informer(manager, ctx, "MemberCluster", ctx.resource("MemberCluster"))
    for kind, snapshot_kind in ov.SNAPSHOT_KIND.items():
        _informer(manager, ctx, kind, ctx.resource(kind))
        _informer(manager, ctx, snapshot_kind, ctx.resource(snapshot_kind))
    _register_overrides(manager, ctx)
    _register_evictions(manager, ctx)
    memory = _delivery_memory(manager)
    for scope in nm.SCOPES:
        tag = "rp" if scope.namespaced else "crp"
        if not ctx.family.native:
            tag = f"{tag}.{ctx.family.served(scope.placement).group}"
        placements: Controller[str] = manager.add_controller(
            f"{tag}-placement",
            _bind(placement.reconcile, ctx, memory, scope),
            workers=4,
            rollout=functools.partial(_rollout_of_placement, scope),
            keys=functools.partial(_placements, ctx, scope),
        )
        runs: Controller[str] = manager.add_controller(
            f"{tag}-stagedupdaterun",
            _bind(run.reconcile, ctx, memory, scope),
            workers=RUN_WORKERS,
            rollout=functools.partial(_rollout_of_run, ctx, scope),
            keys=functools.partial(_runs, ctx, scope),
        )
        _wire(ctx, scope, placements, runs)
        ctx.queues.add(scope.placement, placements.enqueue)
        ctx.queues.add(scope.run, runs.enqueue)


def _delivery_memory(manager: Manager) -> executor.DeliveryMemory:
    """What the placement and run controllers remember of their applies (`executor.DeliveryMemory`).
    A shard taken over may have been delivered by another replica meanwhile: what this process
    remembers having pruned no longer says nothing was left behind."""
    memory = executor.DeliveryMemory(started=lambda: manager.controllers_started)
    if manager.shards is not None:
        manager.shards.on_gain(lambda _shard: memory.forget_prunes())
    return memory


def _register_overrides(manager: Manager, ctx: Context) -> None:
    """One controller per override kind: it keeps the override's snapshots (override_snapshots)."""
    for kind in ov.SNAPSHOT_KIND:
        _override_controller(manager, ctx, kind)


def _register_evictions(manager: Manager, ctx: Context) -> None:
    """The eviction controller (ADR 0107): one worker, each eviction on its placement's shard."""
    _informer(manager, ctx, evictions.EVICTION, ctx.resource(evictions.EVICTION))
    tag = "crpe" if ctx.family.native else f"crpe.{ctx.family.served(evictions.EVICTION).group}"

    def keys() -> list[str]:
        return [o["metadata"]["name"] for o in ctx.cache.list(evictions.EVICTION)]

    controller: Controller[str] = manager.add_controller(
        f"{tag}-eviction",
        functools.partial(eviction.reconcile, ctx),
        workers=1,
        rollout=functools.partial(_rollout_of_eviction, ctx),
        keys=keys,
    )
    _on_spec_change(ctx.cache.informers[evictions.EVICTION], controller)


def _rollout_of_eviction(ctx: Context, key: str) -> str:
    """An eviction goes to its placement's shard: the placement and its evictions in one process."""
    obj = ctx.cache.get(evictions.EVICTION, None, key)
    placement_name = ((obj or {}).get("spec") or {}).get("placementName")
    if not placement_name:
        return f"{evictions.EVICTION}/{key}"
    return _rollout_of_placement(nm.CLUSTER, str(placement_name))


def _override_controller(manager: Manager, ctx: Context, kind: str) -> None:
    inf = ctx.cache.informers
    namespaced = kind == ov.RESOURCE_KIND
    tag = kind.lower() if ctx.family.native else f"{kind.lower()}.{ctx.family.served(kind).group}"

    def key(namespace: str | None, name: str) -> str:
        return f"{namespace}/{name}" if namespaced else name

    def keys() -> list[str]:
        return [key(o["metadata"].get("namespace"), o["metadata"]["name"]) for o in ctx.cache.list(kind)]

    def own(obj: Any) -> list[str]:
        return [key(obj.metadata.namespace, obj.metadata.name)]

    def parent(obj: Any) -> list[str]:
        name = (obj.metadata.labels or {}).get(ov.PARENT_LABEL)
        return [key(obj.metadata.namespace, name)] if name else []

    controller: Controller[str] = manager.add_controller(
        f"{tag}-snapshots", functools.partial(override_snapshots.reconcile, ctx, kind), workers=2, keys=keys
    )
    _watch(inf[kind], controller, own)
    _watch(inf[ov.SNAPSHOT_KIND[kind]], controller, parent)


def _rollout_of_placement(scope: nm.Scope, key: str) -> str:
    return f"{scope.placement}/{key}"


def _rollout_of_run(ctx: Context, scope: nm.Scope, key: str) -> str:
    """A run goes to its placement's shard (ADR 0067): one process drives both."""
    namespace, name = nm.split_key(key)
    obj = ctx.cache.get(scope.run, namespace, name)
    placement_name = ((obj or {}).get("spec") or {}).get("placementName")
    if not placement_name:
        return f"{scope.run}/{key}"
    return f"{scope.placement}/{scope.key(namespace, str(placement_name))}"


def _runs(ctx: Context, scope: nm.Scope) -> list[str]:
    return [
        scope.key(o["metadata"].get("namespace"), o["metadata"]["name"]) for o in ctx.cache.list(scope.run)
    ]


def _bind(fn: Any, ctx: Context, memory: executor.DeliveryMemory, scope: nm.Scope) -> Callable[[str], Any]:
    return lambda key: fn(ctx, memory, scope, key)


PLACEMENT_FOLLOWS_RUNS = 0.5
# Staged runs reconciled at once. With 4, at 10 runs over 20 members an approved run's key waited
# seconds for a worker. 16 showed the next stage Started 2.4x sooner there, its content no sooner,
# and at 100 rollouts over 100 clusters the promotions' gates slower (p50 560 against 300 ms): the
# runs' passes take the loop from the promotions' (ADR 0116, addendum). Kept at 4; an approval
# goes first in the queue instead (`_wire_runs`, the second addendum).
RUN_WORKERS = 4


def _on_spec_change(
    informer: Informer, controller: Controller[str], mapper: Callable[[Any], Iterable[str]] | None = None
) -> None:
    """Events of creation, spec changes (generation), a rollback request (annotations), deletion
    (its timestamp) and removal only; status writes are not. Each wakes the object's own key, or
    `mapper(obj)`."""
    seen: dict[str, tuple[int | None, str, str]] = {}

    def handler(event: str, obj: Any) -> None:
        key = object_key(obj)
        meta = obj.metadata
        asked = run_rollback.request_of({"annotations": meta.annotations or {}})
        generation = meta.generation, f"{asked.reason}/{asked.to_index}", str(meta.deletionTimestamp)
        if event == "DELETED":
            seen.pop(key, None)
        elif key in seen and seen[key] == generation:
            return
        else:
            seen[key] = generation
        for wanted in mapper(obj) if mapper is not None else [key]:
            controller.enqueue(wanted)

    informer.on_change(handler)


def _watch(informer: Informer, controller: Controller[str], mapper: Callable[[Any], Iterable[str]]) -> None:
    controller.watch(informer, mapper)


def _open_runs(ctx: Context, scope: nm.Scope, placement: Any = None) -> list[str]:
    """Keys of the runs not finished yet (of one placement, when given)."""
    out = []
    for obj in ctx.cache.list(scope.run):
        meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
        if placement is not None and (
            spec.get("placementName") != placement.metadata.name
            or meta.get("namespace") != placement.metadata.namespace
        ):
            continue
        if not run.terminal(obj.get("status") or {}, meta):
            out.append(scope.key(meta.get("namespace"), meta["name"]))
    return out


def _placements(ctx: Context, scope: nm.Scope, namespace: str | None = None) -> list[str]:
    return [
        scope.key(o["metadata"].get("namespace"), o["metadata"]["name"])
        for o in ctx.cache.list(scope.placement)
        if namespace is None or o["metadata"].get("namespace") == namespace
    ]


def _selecting(ctx: Context, scope: nm.Scope, kind: str) -> Callable[[Any], list[str]]:
    """The cluster-scoped placements a change to an object of `kind` may matter to
    (`selection.may_select`), not every placement: with 100 of them, each ConfigMap written anywhere
    cost 100 placement passes (ADR 0127)."""

    def mapper(obj: Any) -> list[str]:
        namespace = obj.metadata.namespace
        labels = _namespace_labels(ctx, namespace) if namespace else None
        return [
            scope.key(o["metadata"].get("namespace"), o["metadata"]["name"])
            for o in ctx.cache.list(scope.placement)
            if selection.may_select((o.get("spec") or {}).get("resourceSelectors"), kind, namespace, labels)
        ]

    return mapper


def _namespace_labels(ctx: Context, namespace: str) -> dict[str, str] | None:
    """The labels of `namespace` as the cache holds it; None while it does not."""
    obj = ctx.cache.get("Namespace", None, namespace)
    return None if obj is None else dict((obj.get("metadata") or {}).get("labels") or {})


def _wire(ctx: Context, scope: nm.Scope, placements: Controller[str], runs: Controller[str]) -> None:
    _wire_runs(ctx, scope, runs)
    _wire_placements(ctx, scope, placements)


def _wire_runs(ctx: Context, scope: nm.Scope, runs: Controller[str]) -> None:
    inf = ctx.cache.informers
    _on_spec_change(inf[scope.run], runs)

    def caught_up(obj: Any) -> list[str]:
        meta = obj.metadata
        if run_writes.caught_up(ctx, scope, meta.namespace, meta.name, meta.resourceVersion):
            return [scope.key(meta.namespace, meta.name)]
        return []

    _watch(inf[scope.run], runs, caught_up)
    # An approval goes before the other runs' news: with 10 runs in progress over 20 members an
    # approved run's key waited ~1.3 s for one of the RUN_WORKERS behind them (ADR 0116, second
    # addendum: approval -> content p50 1.45-1.66 s without this lane, 0.82-0.83 s with it).
    runs.watch(
        inf[scope.approval],
        lambda o: [scope.key(o.metadata.namespace, str((o.spec or {}).get("parentStageRollout")))],
        urgent=True,
    )
    for kind in ("MemberCluster", scope.snapshot, scope.strategy):
        _watch(inf[kind], runs, lambda _o: _open_runs(ctx, scope))
    # What a run reads of its placement is its spec (and whether it exists), never its status,
    # which follows the runs: a placement's status write waking its runs would wake it again.
    _on_spec_change(inf[scope.placement], runs, lambda o: _open_runs(ctx, scope, o))


def _wire_placements(ctx: Context, scope: nm.Scope, placements: Controller[str]) -> None:
    inf = ctx.cache.informers

    def parent(obj: Any) -> list[str]:
        name = (obj.metadata.labels or {}).get(nm.PARENT_LABEL)
        return [scope.key(obj.metadata.namespace, name)] if name else []

    def same_namespace(obj: Any) -> list[str]:
        namespace = obj.metadata.namespace
        return _placements(ctx, scope, namespace) if namespace else []

    _on_spec_change(inf[scope.placement], placements)
    _watch(inf["MemberCluster"], placements, lambda _o: _placements(ctx, scope))
    if not scope.namespaced:  # an eviction executed, or deleted, changes what its placement picks
        _watch(inf[evictions.EVICTION], placements, lambda o: [str((o.spec or {}).get("placementName"))])
    _watch(inf[scope.snapshot], placements, parent)
    # A placement's status sums its runs up: the many status writes of a run in progress are
    # followed once every PLACEMENT_FOLLOWS_RUNS seconds, off the run's own critical path.
    placements.watch(
        inf[scope.run],
        lambda o: [scope.key(o.metadata.namespace, str((o.spec or {}).get("placementName")))],
        delay=PLACEMENT_FOLLOWS_RUNS,
    )
    configured = [k.key for k in selection.configured(ctx.placement_kinds)]
    for kind in [*SELECTABLE, *envelopes.KINDS, *configured]:
        mapper = same_namespace if scope.namespaced else _selecting(ctx, scope, kind.partition(".")[0])
        _watch(inf[kind], placements, mapper)
    # A new override snapshot, or an override gone (its snapshots then no longer count), may change
    # what any placement's clusters get: each placement works out whether it does.
    for kind, snapshot_kind in ov.SNAPSHOT_KIND.items():
        for watched in (kind, snapshot_kind):
            _watch(inf[watched], placements, lambda _o: _placements(ctx, scope))


__all__ = ["register"]
