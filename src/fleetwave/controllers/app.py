"""The composition root: informers, controllers and the watches between them.

Every reconcile is keyed by the object it owns; changes to related objects are mapped to those keys
(a summary wakes its profile, a stage profile wakes its promotion, a ConfigMap or Secret wakes the
rollouts that name it, a member wakes every rollout only when what they read of it changed). The
mappers look keys up in indexes kept from informer events (`fanout`), never scan a whole kind.

Health checks run in a pool of sandbox worker processes (ADR 0041) that lives as long as the manager's
`run`: started with it, killed and reaped when it returns (stop, signal, lost lease).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import os
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fleetwave.api import families
from fleetwave.controllers import fanout, kubefleet
from fleetwave.controllers.fleet import membercluster, members
from fleetwave.controllers.fleet.member_watches import MemberWatches
from fleetwave.controllers.fleet.ports import HealthAdapter, HelmAdapter
from fleetwave.controllers.shared.context import Cache, Context, as_dict
from fleetwave.controllers.shared.echoes import Echoes
from fleetwave.controllers.shared.own_writes import OwnWrites
from fleetwave.controllers.shared.wakeups import Wakeups
from fleetwave.controllers.sveltos import content, content_gc, profile, promotion, summary
from fleetwave.controllers.sveltos import rollout_common as common
from fleetwave.controllers.sveltos import summary_status as ss
from fleetwave.controllers.sveltos.profile_withdrawal import Withdrawals
from fleetwave.controllers.sveltos.summary_memory import SummaryMemory
from fleetwave.delivery import sessions
from fleetwave.delivery.gotemplate import Renderer
from fleetwave.delivery.known_versions import KnownVersions
from fleetwave.delivery.kustomize import Kustomizer
from fleetwave.kube import kinds
from fleetwave.kube.client import AsyncClient
from fleetwave.kube.objects import ConfigMap, Secret
from fleetwave.promapi import guards
from fleetwave.runtime import events, logs, notify
from fleetwave.runtime.controller import Controller, besides_status
from fleetwave.runtime.manager import Election, Manager
from fleetwave.runtime.watching import EventType, Informer, object_key
from fleetwave.sandbox.pool import Budget, CheckPool

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Settings:
    namespace: str = "fleetwave-system"
    helm_binary: str = "helm"
    # The content tools (ADR 0089); empty: the one next to helm_binary, else the name on PATH.
    render_binary: str = ""
    kustomize_binary: str = ""
    leader_election: bool = True
    metrics_port: int = 8080
    health_port: int = 8081
    # Where /metrics, /healthz and /readyz listen: loopback out of cluster, every address in a pod.
    bind_address: str = "127.0.0.1"
    identity: str | None = None
    # Reconciles of different keys in flight at once per controller (one key never runs twice at
    # once). They wait on API calls far more than they compute: with 2 workers, 10 rollouts over 100
    # clusters kept every pool busy while the process used 0.6 of a core (ADR 0068).
    summary_workers: int = 16
    rollout_workers: int = 8
    # Promotions get more: at 1,000 clusters a promotion's pass spends ~1 s waiting on API calls, and
    # with fewer workers than promotions running, a gate that opens waits for others' passes first.
    promotion_workers: int = 16
    lease_duration: float = 15.0  # how long a crashed leader blocks its successor
    # Health-check sandbox (ADR 0041): worker processes, and one member's judgement's budget. Four:
    # user code of one owner holds one at a time, so three owners' checks run at once (ADR 0097).
    health_workers: int = 4
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
    # A Secret in `namespace` naming where rollout notifications go (runtime/notify.py); None: nowhere.
    notify_secret: str | None = None
    # Kinds placements may select besides the built-in ones, resolved (`--placement-kind`, ADR 0091).
    placement_kinds: tuple[kinds.KindInfo, ...] = ()
    # Namespaces whose namespaced objects the controller reads (ADR 0074); empty: every namespace.
    # Its own namespace is always one of them (content snapshots, leases).
    watch_namespaces: tuple[str, ...] = ()
    # How old a content snapshot nothing names must be before it is collected (ADR 0084).
    snapshot_grace_seconds: float = content_gc.GRACE_SECONDS
    snapshot_sweep_seconds: float = content_gc.SWEEP_SECONDS  # how often a named one is looked at again
    # Metric sources, webhooks, notifications and chart repositories on loopback (ADR 0096): for
    # the local fleet and tests, whose servers listen on 127.0.0.1; never link-local or metadata.
    allow_loopback_targets: bool = False
    # The only kinds `deploymentType: Local` content may hold ("Kind", "group/Kind", "group/*");
    # empty: any kind the deny-list of controllers/fleet/local_boundary.py lets through.
    local_content_kinds: tuple[str, ...] = ()

    @property
    def watched(self) -> frozenset[str] | None:
        """The namespaces watched, None for all of them."""
        if not self.watch_namespaces:
            return None
        return frozenset({*self.watch_namespaces, self.namespace})


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def build(
    client: AsyncClient,
    settings: Settings,
    *,
    handle_signals: bool = True,
    watch_client: AsyncClient | None = None,
    lease_client: AsyncClient | None = None,
) -> Manager:
    """The manager with every informer and controller. `watch_client`: a client of the same
    credentials for the informers' lists and long-lived watches alone (ADR 0068, addendum bf5b632): in the
    request client's pool, every request walked every watch's connection and probed the idle ones.
    `lease_client`: one for leader election and shard leases alone (their renewals never wait
    behind the controller's requests)."""
    logs.quiet_http_libraries()  # a process running a controller never logs a request's URL or headers
    pool = _check_pool(settings)
    watches = MemberWatches(per_member=settings.member_watches_per_cluster, linger=WATCH_LINGER)
    manager = _manager(client, settings, pool, watches, handle_signals=handle_signals, leases=lease_client)
    manager.watch_client = watcher = watch_client or client
    watched = settings.watched or ()
    shared = {
        "ConfigMap": manager.add_informer(Informer(watcher, ConfigMap, namespaces=watched)),
        "Secret": manager.add_informer(Informer(watcher, Secret, namespaces=watched)),
    }
    recorder = events.EventRecorder(client, "fleetwave")
    manager.recorder = recorder
    notifier = _notifier(settings, shared["Secret"]) if settings.notify_secret else None
    manager.notifier = notifier
    # The members are the same for every family; what their watches saw spares reads of objects
    # with status before an apply.
    known = KnownVersions(watched=watches.latest)
    contexts = [
        _family(
            manager,
            client,
            settings,
            family,
            shared,
            recorder,
            HealthAdapter(pool, watches, manager.metrics.rollouts),
            notifier,
            known,
        )
        for family in (families.NATIVE, *settings.upstream)
    ]
    for ctx in contexts:
        ctx.cache.peers = [c.cache for c in contexts if c is not ctx]
    _collect_snapshots(manager, contexts, shared["ConfigMap"], settings)
    # The KubeFleet kinds are served in one group at a time (ADR 0062): upstream when installed so.
    placements = [c for c in contexts if "ClusterResourcePlacement" in c.family.kinds]
    kubefleet.register(manager, placements[-1])
    return manager


def _check_pool(settings: Settings) -> CheckPool:
    if settings.allow_loopback_targets:
        # Process-wide and through the environment, before a worker starts: the sandbox workers
        # that run metric queries inherit it (ADR 0096).
        guards.allow_loopback_targets()
    budget = Budget(
        workers=settings.health_workers,
        wall_seconds=settings.health_wall_seconds,
        memory_bytes=settings.health_memory_bytes,
    )
    return CheckPool(budget)


def _collect_snapshots(
    manager: Manager, contexts: list[Context], config_maps: Informer, settings: Settings
) -> None:
    """One content-gc controller for every family: snapshots are shared by content hash."""
    collector = content_gc.Collector(
        contexts, settings.snapshot_grace_seconds, settings.snapshot_sweep_seconds
    )
    gc: Controller[str] = manager.add_controller("content-gc", collector.reconcile, keys=collector.names)
    gc.watch(config_maps, collector.names_of)


def _notifier(settings: Settings, secrets: Informer) -> notify.Notifier:
    """Notifications to the sink the Secret names, read from the cache at each send (an edit needs
    no restart); a Secret that is missing or wrong is logged once per version, never its values."""
    key = f"{settings.namespace}/{settings.notify_secret}"
    reported: list[str | None] = ["(not yet)"]  # the Secret version last reported as unusable

    def sink() -> notify.Sink | None:
        secret = secrets.get(key)
        version = None if secret is None else str(secret.metadata.resourceVersion)
        try:
            if secret is None:
                raise notify.SinkError("not found")
            return notify.sink_from_secret(secret.data)
        except notify.SinkError as e:
            if reported[0] != version:
                reported[0] = version
                log.error("notifications: Secret %s cannot be used: %s", key, e)
            return None

    return notify.Notifier(sink, source=f"fleetwave/{settings.namespace}")


_SVELTOS_KINDS = ("ClusterPromotion", "ClusterProfile", "ClusterSummary", "MemberCluster")


def _family(
    manager: Manager,
    client: AsyncClient,
    settings: Settings,
    family: families.Family,
    shared: dict[str, Informer],
    recorder: events.EventRecorder,
    health: HealthAdapter,
    notifier: notify.Notifier | None = None,
    known: KnownVersions | None = None,
) -> Context:
    """Informers and controllers for the Sveltos-style kinds and the members one API family serves:
    each family is its own world (its profiles see its summaries and its clusters), sharing only
    the ConfigMaps and Secrets content and kubeconfigs come from."""
    informers = dict(shared)
    for name in _SVELTOS_KINDS:
        if name in family.kinds:
            resource = _resource(family, name)
            informers[name] = manager.add_informer(
                Informer(manager.watch_client, resource, namespaces=settings.watched or ())
            )
    ctx = Context(
        client=client,
        cache=Cache(informers, family),
        recorder=recorder,
        helm=HelmAdapter(settings.helm_binary),
        renderer=Renderer(_tool(settings.render_binary, "fleetwave-render", settings.helm_binary)),
        kustomizer=Kustomizer(_tool(settings.kustomize_binary, "kustomize", settings.helm_binary)),
        health=health,
        # Not `known or ...`: an empty KnownVersions is falsy, and the families must share one.
        known_versions=known if known is not None else KnownVersions(),
        namespace=settings.namespace,
        clock=_now,
        judge_poll=settings.judge_poll_seconds,
        watched=settings.watched,
        local_content_kinds=frozenset(settings.local_content_kinds) or None,
        notifier=notifier,
        metrics=manager.metrics.rollouts,
        placement_kinds=settings.placement_kinds,
    )
    _add_controllers(manager, ctx, informers, settings)
    return ctx


def _resource(family: families.Family, kind: str) -> Any:
    if family.native:
        return kinds.resource(kind)
    s = family.served(kind)
    return kinds.served_resource(s.api_version, s.kind, s.plural, s.namespaced)


POOL_CLOSE_SECONDS = 15.0
# A member watch whose last judgement passed stays open this long for the next rollout (ADR 0068).
WATCH_LINGER = 120.0


class _SandboxedManager(Manager):
    """The manager, owning the health-check pool: warmed in the background while informers sync (a
    slow start never delays the probes; a check before it is ready starts its own worker), closed
    after the manager's own shutdown has cancelled every controller."""

    def __init__(self, client: AsyncClient, pool: CheckPool, watches: MemberWatches, **kwargs: Any) -> None:
        super().__init__(client, **kwargs)
        self.health_pool = pool
        self.member_watches = watches
        self.recorder: events.EventRecorder | None = None
        self.notifier: notify.Notifier | None = None

    async def run(self) -> None:
        warm = asyncio.create_task(self.health_pool.start(), name="health-check sandbox start")
        warm.add_done_callback(_report_warm_failure)
        try:
            await super().run()
        finally:
            warm.cancel()
            await asyncio.gather(warm, return_exceptions=True)
            if self.recorder is not None:  # what the last reconciles queued (bounded)
                await self.recorder.close(within=5.0)
            if self.notifier is not None:
                await self.notifier.close(within=5.0)
            try:  # bounded, like the pool below: a stream stuck in I/O must not keep us from exiting
                await asyncio.wait_for(self.member_watches.close(), POOL_CLOSE_SECONDS)
            except TimeoutError:
                log.error("member watches: streams not closed within %ss of shutdown", POOL_CLOSE_SECONDS)
            try:
                await asyncio.wait_for(sessions.close_pool(), POOL_CLOSE_SECONDS)
            except TimeoutError:
                log.error("member clients not closed within %ss of shutdown", POOL_CLOSE_SECONDS)
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
    client: AsyncClient,
    settings: Settings,
    pool: CheckPool,
    watches: MemberWatches,
    *,
    handle_signals: bool,
    leases: AsyncClient | None,
) -> _SandboxedManager:
    return _SandboxedManager(
        client,
        pool,
        watches,
        namespace=settings.namespace,
        leader_election=settings.leader_election,
        metrics_port=settings.metrics_port,
        health_port=settings.health_port,
        host=settings.bind_address,
        election=Election(
            identity=settings.identity,
            lease_duration=settings.lease_duration,
            renew_deadline=settings.lease_duration * 2 / 3,
            retry_period=max(settings.lease_duration / 7.5, 0.2),
        ),
        handle_signals=handle_signals,
        shard_count=settings.shards,
        lease_client=leases,
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
            keys=lambda: _all_keys(ctx.cache, "MemberCluster"),
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
        workers=settings.promotion_workers,
        rollout=keys.rollout_of_promotion,
        keys=lambda: keys.all_of("ClusterPromotion"),
    )
    withdrawals, memory = Withdrawals(), _summary_memory(manager)
    profiles: Controller[str] = manager.add_controller(
        name("ClusterProfile"),
        lambda k: profile.reconcile(ctx, withdrawals, k),
        workers=settings.rollout_workers,
        rollout=keys.rollout_of_profile,
        keys=lambda: keys.all_of("ClusterProfile"),
        bulk=True,  # its writes are a summary per cluster; a promotion's decisions go past them
    )
    summaries: Controller[str] = manager.add_controller(
        name("ClusterSummary"),
        lambda k: summary.reconcile(ctx, memory, k),
        workers=settings.summary_workers,
        rollout=keys.rollout_of_summary,
        keys=lambda: keys.all_of("ClusterSummary"),
        bulk=True,
    )
    ctx.queues.add("ClusterPromotion", promotions.enqueue)
    ctx.queues.add("ClusterProfile", profiles.enqueue)
    ctx.queues.add("ClusterSummary", summaries.enqueue)
    wire(keys, informers, promotions, profiles, summaries, _Writes(ctx.statuses.own, ctx.echoes, ctx.wakeups))


def _summary_memory(manager: Manager) -> SummaryMemory:
    """The summary controller's memory of its deliveries. A shard taken over may have been delivered
    by another replica meanwhile: what this process remembers having pruned no longer says nothing
    was left behind."""
    memory = SummaryMemory()
    if manager.shards is not None:
        manager.shards.on_gain(lambda _shard: memory.forget_prunes())
    return memory


def _labels(obj: Any) -> dict[str, str]:
    return dict(obj.metadata.labels or {})


def _all_keys(cache: Cache, kind: str) -> list[str]:
    return [object_key(o) for o in cache.objects(kind)]


class _Keys:
    """Maps a changed object to the keys of the objects whose reconcile depends on it, through
    indexes (`fanout`) kept by informer handlers: the work an event causes scales with what it
    concerns, not with the size of the fleet (issue 11)."""

    def __init__(self, cache: Cache) -> None:
        self.cache = cache
        self.summaries = fanout.SummaryIndex()
        self.profiles = fanout.ReadIndex(fanout.profile_reads)
        self.promotions = fanout.ReadIndex(fanout.promotion_reads)
        self.members = fanout.MemberChanges(cache.family)

    def all_of(self, kind: str) -> Iterable[str]:
        return _all_keys(self.cache, kind)

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
        """The summary's profile, and the profiles that depend on it (`dependsOn`): a summary turning
        Ready may let them deliver to its cluster."""
        name = _labels(obj).get(ss.PROFILE_LABEL)
        if not name:
            return []
        return [name, *self._dependents().get(name, ())]

    def _dependents(self) -> dict[str, list[str]]:
        def build() -> dict[str, list[str]]:
            out: dict[str, list[str]] = {}
            for dependent in self.cache.list("ClusterProfile"):
                for dependency in (dependent.get("spec") or {}).get("dependsOn") or []:
                    out.setdefault(str(dependency), []).append(str(dependent["metadata"]["name"]))
            return out

        return self.cache.memo("profile-dependents", "ClusterProfile", build)

    def stage_profile_of_summary(self, obj: Any) -> Iterable[str]:
        """The summary's profile when it is a promotion's stage profile."""
        name = _labels(obj).get(ss.PROFILE_LABEL)
        return [name] if name and self._of_promotion(name) else []

    def pacing_profiles_of_summary(self, obj: Any) -> Iterable[str]:
        """`profile_of_summary` but a promotion's stage profile (`stage_profile_of_summary`)."""
        names = list(self.profile_of_summary(obj))
        return names[1:] if names and self._of_promotion(names[0]) else names

    def _of_promotion(self, profile_name: str) -> bool:
        owner = self.cache.obj("ClusterProfile", None, profile_name)
        return owner is not None and bool(self.promotion_of_profile(owner))

    def promotion_of_summary(self, obj: Any) -> Iterable[str]:
        keys: list[str] = []
        for name in self.profile_of_summary(obj):
            owner = self.cache.obj("ClusterProfile", None, name)
            keys += self.promotion_of_profile(owner) if owner is not None else []
        return keys

    def summaries_of_member(self, obj: Any) -> Iterable[str]:
        return self.summaries.of_member(obj.metadata.namespace, obj.metadata.name)

    def summaries_of_content(self, obj: Any) -> Iterable[str]:
        return self.summaries.of_content(obj.metadata.name)

    def summaries_of_member_secret(self, secret: Any) -> Iterable[str]:
        """A kubeconfig Secret concerns the summaries delivering with it: the member its label names,
        and every member whose kubeconfigSecretRef names it (labelled or not)."""
        meta = secret.metadata
        member = (meta.labels or {}).get(members.SECRET_LABEL)
        keys = set(self.summaries.of_member(meta.namespace, member)) if member else set()
        for named in self.members.names(str(meta.namespace), str(meta.name)):
            namespace, _, name = named.partition("/")
            keys.update(self.summaries.of_member(namespace, name))
        return sorted(keys)

    def promotions_of_source(self, kind: str) -> Callable[[Any], Iterable[str]]:
        """The promotions a ConfigMap/Secret event concerns: those whose profileSpec (or
        preHealthCheckDeployment) names it; for a member's kubeconfig, every promotion."""

        def mapper(obj: Any) -> Iterable[str]:
            if kind == "Secret" and self.members.is_kubeconfig(obj):
                # postDelayHealthChecks reach members through it (promotion._verdict); which promotion
                # judges which member lives in its status, unindexed: kubeconfig events are rare.
                return self.all_of("ClusterPromotion")
            meta = obj.metadata
            return sorted(self.promotions.readers(kind, meta.namespace, str(meta.name)))

        return mapper

    def profiles_of_source(self, kind: str) -> Callable[[Any], Iterable[str]]:
        """The profiles a ConfigMap/Secret event concerns: those that name it (a stage profile: the
        snapshot it is pinned to); for a content snapshot also the profiles delivering it, which make
        it again should it go."""

        def mapper(obj: Any) -> Iterable[str]:
            meta = obj.metadata
            name = str(meta.name)
            keys = self.profiles.readers(kind, meta.namespace, name)
            if content.is_snapshot_name(name):
                keys |= self.summaries.profiles_of_content(name)
            return sorted(keys)

        return mapper


@dataclass(frozen=True, slots=True)
class _Writes:
    own: OwnWrites
    echoes: Echoes
    # What the controllers leave for a profile's next event (Context.wakeups).
    wakeups: Wakeups = field(default_factory=Wakeups)


def wire(
    keys: _Keys,
    informers: Mapping[str, Informer],
    promotions: Controller[str],
    profiles: Controller[str],
    summaries: Controller[str],
    writes: _Writes | None = None,
) -> None:
    """The watches between the kinds; the indexes first, so that a mapper never reads one that has
    not yet taken in the event the mapper is handling. `writes`: this process's writes, whose
    echoes do not wake their writer."""
    writes = writes or _Writes(OwnWrites(), Echoes())
    informers["ClusterSummary"].on_change(keys.summaries.on_change)
    informers["ClusterProfile"].on_change(keys.profiles.on_change)
    informers["ClusterPromotion"].on_change(keys.promotions.on_change)
    _wire_members(informers["MemberCluster"], keys, promotions, profiles)
    _wire_promotions(promotions, informers, keys, writes)
    _wire_profiles(profiles, informers, keys, writes)
    _wire_summaries(summaries, informers, keys, writes)


def _wire_members(
    informer: Informer, keys: _Keys, promotions: Controller[str], profiles: Controller[str]
) -> None:
    """Any rollout may select or deliver to any member, so a member change wakes them all: but only
    a change to what they read of it, not the status the membercluster controller keeps writing."""

    def on_member(event: EventType, obj: Any) -> None:
        if not keys.members.observe(event, obj):
            return
        for key in keys.all_of("ClusterPromotion"):
            promotions.enqueue(key)
        for key in keys.all_of("ClusterProfile"):
            profiles.enqueue(key)

    informer.on_change(on_member)


def _itself(obj: Any) -> list[str]:
    """A rollout's own key on its every change, its own status writes included: what its next pass
    observes depends on the status it just wrote (a stage's post-delay checks fall due)."""
    return [object_key(obj)]


def _summary_itself(controller: Controller[str], writes: _Writes) -> Callable[[Any], list[str]]:
    """A summary's own key on its every change but the echo of its own status write (`Echoes`),
    unless a pass was put off until the cache shows that write (`OwnWrites.caught_up`)."""
    kind = "ClusterSummary"

    def keys(obj: Any) -> list[str]:
        key, version = object_key(obj), obj.metadata.resourceVersion
        if writes.own.caught_up((kind, key), version):
            return [key]
        if writes.echoes.arrived((kind, key), kind, version, lambda: controller.enqueue(key)):
            return []
        return [key]

    return keys


def _unless_echo(
    controller: Controller[str],
    writes: _Writes,
    kind: str,
    writer: str,
    mapper: Callable[[Any], Iterable[str]],
    delay: float = 0.0,
) -> Callable[[Any], Iterable[str]]:
    """`mapper`, but nothing for the echo of a write the `writer` controller made of the object (a
    profile's own summary apply, a promotion's own stage profile apply). `delay`: the watch's."""

    def keys(obj: Any) -> Iterable[str]:
        wanted = list(mapper(obj))

        def wake() -> None:
            for key in wanted:
                controller.enqueue(key, delay)

        key, version = (kind, object_key(obj)), obj.metadata.resourceVersion
        if wanted and writes.echoes.arrived(key, writer, version, wake):
            return []
        return wanted

    return keys


STAGE_PROFILE_FOLLOWS = 0.5


def _wire_promotions(
    promotions: Controller[str], informers: Mapping[str, Informer], keys: _Keys, writes: _Writes
) -> None:
    promotions.watch(informers["ClusterPromotion"], _itself)
    # A promotion reads its stage profiles' spec and metadata, and its facts from their summaries:
    # a profile's status writes (it sums the same summaries up) would wake it for nothing, unless
    # the profile turns invalid or valid again (a pinned content snapshot gone makes it invalid:
    # the promotion cuts the snapshot again).
    promotions.watch(
        informers["ClusterProfile"],
        _unless_echo(promotions, writes, "ClusterProfile", "ClusterPromotion", keys.promotion_of_profile),
        signature=_profile_reads,
    )
    promotions.watch(informers["ClusterSummary"], keys.promotion_of_summary)
    # A content snapshot is nobody's source: it wakes no promotion (a Secret one used to wake all),
    # only the stage profiles pinned to it, whose invalid status wakes the promotion should it go.
    promotions.watch(informers["ConfigMap"], keys.promotions_of_source("ConfigMap"))
    promotions.watch(informers["Secret"], keys.promotions_of_source("Secret"))


def _profile_reads(obj: Any) -> Hashable:
    """What a promotion follows of a stage profile: all but its status, and whether it is invalid."""
    conditions = (as_dict(obj).get("status") or {}).get("conditions") or []
    invalid = any(c.get("reason") == common.INVALID_REASON for c in conditions)
    return besides_status(obj), invalid


STAGE_PROFILE_AHEAD = 0.2


def _wire_profiles(
    profiles: Controller[str], informers: Mapping[str, Informer], keys: _Keys, writes: _Writes
) -> None:
    # A promotion writes the summaries of the stage profile it has just changed itself
    # (`summary_writes.write_ahead`): the profile's own pass, which finds them written, follows
    # STAGE_PROFILE_AHEAD seconds later instead of taking the loop from the stage's first deliveries.
    # When the promotion did not write them, the event of its write wakes the pass at once.
    def on_profile(event: EventType, obj: Any) -> None:
        key = object_key(obj)
        if not list(keys.promotion_of_profile(obj)):
            profiles.enqueue(key)
            return
        if writes.wakeups.arrived(key, obj.metadata.resourceVersion):
            profiles.enqueue(key)
        else:
            profiles.enqueue(key, STAGE_PROFILE_AHEAD)

    informers["ClusterProfile"].on_change(on_profile)
    profiles.watch(
        informers["ClusterSummary"],
        _unless_echo(profiles, writes, "ClusterSummary", "ClusterProfile", keys.pacing_profiles_of_summary),
    )
    # A promotion's stage profile only sums its summaries up (the promotion reads them itself and
    # paces the stage): it follows their changes at most every STAGE_PROFILE_FOLLOWS seconds, off
    # the stage's critical path.
    stage = keys.stage_profile_of_summary
    profiles.watch(
        informers["ClusterSummary"],
        _unless_echo(profiles, writes, "ClusterSummary", "ClusterProfile", stage, STAGE_PROFILE_FOLLOWS),
        delay=STAGE_PROFILE_FOLLOWS,
    )
    profiles.watch(informers["ConfigMap"], keys.profiles_of_source("ConfigMap"))
    profiles.watch(informers["Secret"], keys.profiles_of_source("Secret"))


def _wire_summaries(
    summaries: Controller[str], informers: Mapping[str, Informer], keys: _Keys, writes: _Writes
) -> None:
    summaries.watch(informers["ClusterSummary"], _summary_itself(summaries, writes))
    summaries.watch(
        informers["ClusterProfile"], lambda p: [s.key for s in writes.wakeups.take_waiting(object_key(p))]
    )
    summaries.watch(informers["MemberCluster"], keys.summaries_of_member)
    summaries.watch(informers["Secret"], keys.summaries_of_member_secret)
    # A summary reads its snapshot, kept as a Secret when any content came from one.
    summaries.watch(informers["ConfigMap"], keys.summaries_of_content)
    summaries.watch(informers["Secret"], keys.summaries_of_content)


def _member_of_secret(secret: Any, *, namespaced: bool = True) -> Iterable[str]:
    member = (secret.metadata.labels or {}).get(members.SECRET_LABEL)
    if not member:
        return []
    return [f"{secret.metadata.namespace}/{member}" if namespaced else member]


def _tool(explicit: str, name: str, helm_binary: str) -> str:
    """A content tool: as configured, else beside helm (the pinned set is built together), else PATH."""
    if explicit:
        return explicit
    beside = Path(helm_binary).parent / name
    return str(beside) if os.sep in helm_binary and beside.is_file() else name
