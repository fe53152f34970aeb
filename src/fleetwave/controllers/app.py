"""The composition root: informers, controllers and the watches between them.

Every reconcile is keyed by the object it owns; changes to related objects are mapped to those keys
(a summary wakes its profile, a stage profile wakes its promotion, a member or a referenced
ConfigMap wakes everything that may select or use it).

Health checks run in a pool of sandbox worker processes (ADR 0041) that lives as long as the manager's
`run`: started with it, killed and reaped when it returns (stop, signal, lost lease).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from fleetwave.api import families
from fleetwave.controllers import kubefleet, membercluster, members, profile, promotion, summary
from fleetwave.controllers import summary_status as ss
from fleetwave.controllers.context import Cache, Context
from fleetwave.controllers.member_watches import MemberWatches
from fleetwave.controllers.ports import HealthAdapter, HelmAdapter
from fleetwave.kube import kinds
from fleetwave.kube.client import AsyncClient
from fleetwave.kube.objects import ConfigMap, Secret
from fleetwave.runtime import events
from fleetwave.runtime.controller import Controller
from fleetwave.runtime.manager import Election, Manager
from fleetwave.runtime.watching import Informer, object_key
from fleetwave.sandbox.pool import Budget, CheckPool

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Settings:
    namespace: str = "fleetwave-system"
    helm_binary: str = "helm"
    leader_election: bool = True
    metrics_port: int = 8080
    health_port: int = 8081
    identity: str | None = None
    summary_workers: int = 4
    lease_duration: float = 15.0  # how long a crashed leader blocks its successor
    # Health-check sandbox (ADR 0041): worker processes, and one member's judgement's budget.
    health_workers: int = 2
    health_wall_seconds: float = 20.0
    health_memory_bytes: int = 1024 * 1024 * 1024
    # Upstream API families reconciled besides the native one (ADR 0062): `--upstream-apis`.
    upstream: tuple[families.Family, ...] = ()
    # Watches per member cluster that wake judgements waiting on it (ADR 0065); 0 turns them off.
    member_watches_per_cluster: int = 16
    # How often a judgement waiting on a member is re-run when no watch wakes it.
    judge_poll_seconds: float = 2.0
    # Leases the rollouts are split over between replicas (ADR 0067); 1: one leader does everything.
    shards: int = 1


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def build(client: AsyncClient, settings: Settings, *, handle_signals: bool = True) -> Manager:
    pool = CheckPool(
        Budget(
            workers=settings.health_workers,
            wall_seconds=settings.health_wall_seconds,
            memory_bytes=settings.health_memory_bytes,
        )
    )
    watches = MemberWatches(per_member=settings.member_watches_per_cluster)
    manager = _manager(client, settings, pool, watches, handle_signals=handle_signals)
    shared = {
        "ConfigMap": manager.add_informer(Informer(client, ConfigMap)),
        "Secret": manager.add_informer(Informer(client, Secret)),
    }
    recorder = events.EventRecorder(client, "fleetwave")
    contexts = [
        _family(manager, client, settings, family, shared, recorder, HealthAdapter(pool, watches))
        for family in (families.NATIVE, *settings.upstream)
    ]
    for ctx in contexts:
        ctx.cache.peers = [c.cache for c in contexts if c is not ctx]
    # The KubeFleet kinds are served in one group at a time (ADR 0062): upstream when installed so.
    placements = [c for c in contexts if "ClusterResourcePlacement" in c.family.kinds]
    kubefleet.register(manager, placements[-1])
    return manager


_SVELTOS_KINDS = ("ClusterPromotion", "ClusterProfile", "ClusterSummary", "MemberCluster")


def _family(
    manager: Manager,
    client: AsyncClient,
    settings: Settings,
    family: families.Family,
    shared: dict[str, Informer],
    recorder: events.EventRecorder,
    health: HealthAdapter,
) -> Context:
    """Informers and controllers for the Sveltos-style kinds and the members one API family serves:
    each family is its own world (its profiles see its summaries and its clusters), sharing only
    the ConfigMaps and Secrets content and kubeconfigs come from."""
    informers = dict(shared)
    for name in _SVELTOS_KINDS:
        if name in family.kinds:
            informers[name] = manager.add_informer(Informer(client, _resource(family, name)))
    ctx = Context(
        client=client,
        cache=Cache(informers, family),
        recorder=recorder,
        helm=HelmAdapter(settings.helm_binary),
        health=health,
        namespace=settings.namespace,
        clock=_now,
        judge_poll=settings.judge_poll_seconds,
    )
    _add_controllers(manager, ctx, informers, settings)
    return ctx


def _resource(family: families.Family, kind: str) -> Any:
    if family.native:
        return kinds.resource(kind)
    s = family.served(kind)
    return kinds.served_resource(s.api_version, s.kind, s.plural, s.namespaced)


POOL_CLOSE_SECONDS = 15.0


class _SandboxedManager(Manager):
    """The manager, owning the health-check pool: warmed in the background while informers sync (a
    slow start never delays the probes; a check before it is ready starts its own worker), closed
    after the manager's own shutdown has cancelled every controller."""

    def __init__(self, client: AsyncClient, pool: CheckPool, watches: MemberWatches, **kwargs: Any) -> None:
        super().__init__(client, **kwargs)
        self.health_pool = pool
        self.member_watches = watches

    async def run(self) -> None:
        warm = asyncio.create_task(self.health_pool.start(), name="health-check sandbox start")
        warm.add_done_callback(_report_warm_failure)
        try:
            await super().run()
        finally:
            warm.cancel()
            await asyncio.gather(warm, return_exceptions=True)
            try:  # bounded, like the pool below: a stream stuck in I/O must not keep us from exiting
                await asyncio.wait_for(self.member_watches.close(), POOL_CLOSE_SECONDS)
            except TimeoutError:
                log.error("member watches: streams not closed within %ss of shutdown", POOL_CLOSE_SECONDS)
            try:  # bounded: a worker that cannot be reaped must not keep the process from exiting
                await asyncio.wait_for(self.health_pool.close(), POOL_CLOSE_SECONDS)
            except TimeoutError:
                log.error(
                    "health-check sandbox: workers not reaped within %ss of shutdown", POOL_CLOSE_SECONDS
                )


def _report_warm_failure(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.warning("health-check sandbox did not start ahead of need: %s", task.exception())


def _manager(
    client: AsyncClient, settings: Settings, pool: CheckPool, watches: MemberWatches, *, handle_signals: bool
) -> Manager:
    return _SandboxedManager(
        client,
        pool,
        watches,
        namespace=settings.namespace,
        leader_election=settings.leader_election,
        metrics_port=settings.metrics_port,
        health_port=settings.health_port,
        election=Election(
            identity=settings.identity,
            lease_duration=settings.lease_duration,
            renew_deadline=settings.lease_duration * 2 / 3,
            retry_period=max(settings.lease_duration / 7.5, 0.2),
        ),
        handle_signals=handle_signals,
        shard_count=settings.shards,
    )


def _add_controllers(
    manager: Manager, ctx: Context, informers: dict[str, Informer], settings: Settings
) -> None:
    name = ctx.family.controller_name
    if "MemberCluster" in ctx.family.kinds:
        clusters: Controller[str] = manager.add_controller(
            name("MemberCluster"),
            lambda k: membercluster.reconcile(ctx, k),
            workers=2,
            keys=lambda: _Keys(ctx.cache).all_of("MemberCluster"),
        )
        clusters.watch(informers["MemberCluster"], lambda o: [object_key(o)])
        scoped = ctx.family.served("MemberCluster").namespaced
        clusters.watch(informers["Secret"], lambda s: _member_of_secret(s, namespaced=scoped))
    if "ClusterProfile" not in ctx.family.kinds:
        return
    keys = _Keys(ctx.cache)
    promotions: Controller[str] = manager.add_controller(
        name("ClusterPromotion"),
        lambda k: promotion.reconcile(ctx, k),
        workers=2,
        rollout=keys.rollout_of_promotion,
        keys=lambda: keys.all_of("ClusterPromotion"),
    )
    profiles: Controller[str] = manager.add_controller(
        name("ClusterProfile"),
        lambda k: profile.reconcile(ctx, k),
        workers=2,
        rollout=keys.rollout_of_profile,
        keys=lambda: keys.all_of("ClusterProfile"),
    )
    summaries: Controller[str] = manager.add_controller(
        name("ClusterSummary"),
        lambda k: summary.reconcile(ctx, k),
        workers=settings.summary_workers,
        rollout=keys.rollout_of_summary,
        keys=lambda: keys.all_of("ClusterSummary"),
    )
    ctx.wakers.update(
        {
            "ClusterPromotion": promotions.enqueue,
            "ClusterProfile": profiles.enqueue,
            "ClusterSummary": summaries.enqueue,
        }
    )
    _wire_promotions(promotions, informers, keys)
    _wire_profiles(profiles, informers, keys)
    _wire_summaries(summaries, informers, keys)


def _labels(obj: Any) -> dict[str, str]:
    return dict(obj.metadata.labels or {})


class _Keys:
    """Maps a changed object to the keys of the objects whose reconcile depends on it."""

    def __init__(self, cache: Cache) -> None:
        self.cache = cache

    def all_of(self, kind: str) -> Iterable[str]:
        return [object_key(o) for o in self.cache.objects(kind)]

    # The rollout a key is part of decides its shard (ADR 0067): a promotion's stage profiles and
    # their summaries go where the promotion goes, a profile's summaries where the profile goes.
    def rollout_of_promotion(self, key: str) -> str:
        return f"ClusterPromotion/{key}"

    def rollout_of_profile(self, key: str) -> str:
        obj = self.cache.obj("ClusterProfile", None, key)
        owner = _labels(obj).get(promotion.PROMOTION_LABEL) if obj is not None else None
        return self.rollout_of_promotion(owner) if owner else f"ClusterProfile/{key}"

    def rollout_of_summary(self, key: str) -> str:
        namespace, _, name = key.partition("/")
        obj = self.cache.obj("ClusterSummary", namespace, name)
        profile_name = _labels(obj).get(ss.PROFILE_LABEL) if obj is not None else None
        return self.rollout_of_profile(profile_name) if profile_name else f"ClusterSummary/{key}"

    def promotion_of_profile(self, obj: Any) -> Iterable[str]:
        owner = _labels(obj).get(promotion.PROMOTION_LABEL)
        return [owner] if owner else []

    def profile_of_summary(self, obj: Any) -> Iterable[str]:
        name = _labels(obj).get(ss.PROFILE_LABEL)
        return [name] if name else []

    def promotion_of_summary(self, obj: Any) -> Iterable[str]:
        keys: list[str] = []
        for name in self.profile_of_summary(obj):
            owner = self.cache.obj("ClusterProfile", None, name)
            keys += self.promotion_of_profile(owner) if owner is not None else []
        return keys

    def summaries_of_member(self, obj: Any) -> Iterable[str]:
        return [
            object_key(s)
            for s in self.cache.objects("ClusterSummary")
            if (s.spec or {}).get("clusterName") == obj.metadata.name
            and (s.spec or {}).get("clusterNamespace") == obj.metadata.namespace
        ]

    def summaries_of_content(self, obj: Any) -> Iterable[str]:
        name = obj.metadata.name
        return [
            object_key(s)
            for s in self.cache.objects("ClusterSummary")
            if (s.metadata.annotations or {}).get(ss.CONTENT_ANNOTATION) == name
        ]


def _unless_snapshot(mapper: Any) -> Any:
    # Content snapshots are written by us and immutable: they only concern the summaries using them.
    return lambda obj: [] if (obj.metadata.name or "").startswith("fw-content-") else mapper(obj)


def _wire_promotions(promotions: Controller[str], informers: dict[str, Informer], keys: _Keys) -> None:
    promotions.watch(informers["ClusterPromotion"], lambda o: [object_key(o)])
    promotions.watch(informers["ClusterProfile"], keys.promotion_of_profile)
    promotions.watch(informers["ClusterSummary"], keys.promotion_of_summary)
    promotions.watch(informers["MemberCluster"], lambda _o: keys.all_of("ClusterPromotion"))
    promotions.watch(informers["ConfigMap"], _unless_snapshot(lambda _o: keys.all_of("ClusterPromotion")))
    promotions.watch(informers["Secret"], lambda _o: keys.all_of("ClusterPromotion"))


def _wire_profiles(profiles: Controller[str], informers: dict[str, Informer], keys: _Keys) -> None:
    profiles.watch(informers["ClusterProfile"], lambda o: [object_key(o)])
    profiles.watch(informers["ClusterSummary"], keys.profile_of_summary)
    profiles.watch(informers["MemberCluster"], lambda _o: keys.all_of("ClusterProfile"))
    profiles.watch(informers["ConfigMap"], lambda _o: keys.all_of("ClusterProfile"))
    profiles.watch(informers["Secret"], lambda _o: keys.all_of("ClusterProfile"))


def _wire_summaries(summaries: Controller[str], informers: dict[str, Informer], keys: _Keys) -> None:
    summaries.watch(informers["ClusterSummary"], lambda o: [object_key(o)])
    summaries.watch(informers["MemberCluster"], keys.summaries_of_member)
    summaries.watch(informers["Secret"], lambda o: summaries_of_member_secret(keys.cache, o))
    summaries.watch(informers["ConfigMap"], keys.summaries_of_content)


def summaries_of_member_secret(cache: Cache, secret: Any) -> Iterable[str]:
    member = (secret.metadata.labels or {}).get(members.SECRET_LABEL)
    if not member:
        return []
    return [
        object_key(s)
        for s in cache.objects("ClusterSummary")
        if (s.spec or {}).get("clusterName") == member
        and (s.spec or {}).get("clusterNamespace") == secret.metadata.namespace
    ]


def _member_of_secret(secret: Any, *, namespaced: bool = True) -> Iterable[str]:
    member = (secret.metadata.labels or {}).get(members.SECRET_LABEL)
    if not member:
        return []
    return [f"{secret.metadata.namespace}/{member}" if namespaced else member]
