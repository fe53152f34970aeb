"""The composition root: informers, controllers and the watches between them (`watches`).

Health checks run in a pool of sandbox worker processes (ADR 0041) that lives as long as the manager's
`run`: started with it, killed and reaped when it returns (stop, signal, lost lease).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fleetwave.api import families, pullmode
from fleetwave.controllers import kubefleet, watches
from fleetwave.controllers.fleet import membercluster, members, role_requests
from fleetwave.controllers.fleet.drift_watches import DriftWatches
from fleetwave.controllers.fleet.member_watches import MemberWatches
from fleetwave.controllers.fleet.ports import HealthAdapter, HelmAdapter
from fleetwave.controllers.shared.context import Cache, Context, as_dict
from fleetwave.controllers.sveltos import (
    cluster_sets,
    content_gc,
    namespaced_profile,
    profile,
    promotion,
    summary,
)
from fleetwave.controllers.sveltos.profile_withdrawal import Withdrawals
from fleetwave.controllers.sveltos.summary_memory import SummaryMemory
from fleetwave.delivery import sessions
from fleetwave.delivery.artifact_store import ArtifactStore
from fleetwave.delivery.gotemplate import Renderer
from fleetwave.delivery.known_versions import KnownVersions
from fleetwave.delivery.kustomize import Kustomizer
from fleetwave.kube import kinds
from fleetwave.kube.client import AsyncClient
from fleetwave.kube.objects import ConfigMap, Lease, Secret
from fleetwave.promapi import guards
from fleetwave.runtime import events, logs, notify
from fleetwave.runtime.controller import Controller, Result, besides_status
from fleetwave.runtime.lease_loop import LeaseLoop
from fleetwave.runtime.manager import Election, Manager
from fleetwave.runtime.watching import Informer, object_key
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
    # Promotions get more: when many delay gates fall due together, each pass that opens one holds
    # its worker ~1 s (the next stage's profile and summaries, then the status), and a gate waits
    # for a free worker. Sized from measurement at 100 rollouts over 100 clusters (ADR 0123): with 16
    # that wait's p99 was 1.4 s, with 24 0.3 s; 32 shortened it no further.
    promotion_workers: int = 24
    # Promotion workers that only take a promotion whose own timer fell due (a gate): ADR 0129.
    promotion_deadline_workers: int = 4
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
    # Read Flux's GitRepository, OCIRepository and Bucket as content sources (ADR 0103): their
    # informers need source-controller's CRDs installed, so it is the operator's choice.
    flux_sources: bool = False

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
    lease_loop: LeaseLoop | None = None,
) -> Manager:
    """The manager with every informer and controller. `watch_client`: a client of the same
    credentials for the informers' lists and long-lived watches alone (ADR 0068, addendum bf5b632): in the
    request client's pool, every request walked every watch's connection and probed the idle ones.
    `lease_client`: one for leader election and shard leases alone (their renewals never wait
    behind the controller's requests); built on `lease_loop`, if given, where the leader Lease is
    then renewed (ADR 0140)."""
    logs.quiet_http_libraries()  # a process running a controller never logs a request's URL or headers
    manager = _manager(client, settings, lease_client, lease_loop, handle_signals=handle_signals)
    pool, watches = manager.health_pool, manager.member_watches
    manager.watch_client = watcher = watch_client or client
    watched = settings.watched or ()
    shared = {
        "ConfigMap": manager.add_informer(Informer(watcher, ConfigMap, namespaces=watched)),
        "Secret": manager.add_informer(Informer(watcher, Secret, namespaces=watched)),
    }
    _chosen_informers(manager, shared, settings)
    _pull_informers(manager, shared, watched)
    recorder = events.EventRecorder(client, "fleetwave")
    manager.recorder = recorder
    notifier = _notifier(settings, shared["Secret"]) if settings.notify_secret else None
    manager.notifier = notifier
    health = HealthAdapter(pool, watches, manager.metrics.rollouts)
    known = KnownVersions(watched=watches.latest)
    contexts = _families(manager, client, settings, shared, (recorder, health, notifier), known)
    _collect_snapshots(manager, contexts, shared["ConfigMap"], settings)
    # The KubeFleet kinds are served in one group at a time (ADR 0062): upstream when installed so.
    placements = [c for c in contexts if "ClusterResourcePlacement" in c.family.kinds]
    kubefleet.register(manager, placements[-1])
    return manager


def _chosen_informers(manager: Manager, shared: dict[str, Informer], settings: Settings) -> None:
    """Flux's sources (`--flux-sources`), and Cluster API clusters where a family served has them."""
    watcher, watched = manager.watch_client, settings.watched or ()
    if settings.flux_sources:
        for kind, resource in kinds.flux_source_resources().items():
            shared[kind] = manager.add_informer(Informer(watcher, resource, namespaces=watched))
    if any(family.capi for family in settings.upstream):
        shared[members.CAPI_CACHE_KIND] = manager.add_informer(_capi_informer(watcher, watched))


def _pull_informers(manager: Manager, shared: dict[str, Informer], watched: Iterable[str]) -> None:
    """Pull members' work and their agents' leases (ADR 0106), in every namespace (a member's hub
    namespace is its own, `fleet-member-<name>`), unless the controller watches named ones."""
    watcher = manager.watch_client
    shared["MemberWork"] = manager.add_informer(
        Informer(watcher, kinds.resource("MemberWork"), namespaces=watched)
    )
    shared["Lease"] = manager.add_informer(
        Informer(watcher, Lease, namespaces=watched, labels={pullmode.LEASE_LABEL: "true"})
    )


# How often the controller looks again for Cluster API's Cluster kind while it is not served.
CAPI_POLL_SECONDS = 60.0


def _capi_informer(watcher: AsyncClient, watched: Iterable[str]) -> Informer:
    """Cluster API clusters, members of the Sveltos family (ADR 0109): v1beta2, else v1beta1, in
    whichever of the two Cluster API serves; where it is not installed the informer is empty and
    synced, and looks again every CAPI_POLL_SECONDS."""
    first, *others = kinds.capi_cluster_resources()
    return Informer(watcher, first, namespaces=watched, unserved_poll=CAPI_POLL_SECONDS, fallbacks=others)


def _families(
    manager: Manager,
    client: AsyncClient,
    settings: Settings,
    shared: dict[str, Informer],
    ports: tuple[events.EventRecorder, HealthAdapter, notify.Notifier | None],
    known: KnownVersions,
) -> list[Context]:
    """One context, with its informers and controllers, per API family served; each family's cache
    knows the others' (a kubeconfig any family's member names is a credential to all). The members
    are the same for every family: what their watches saw (`known`) spares reads before an apply."""
    recorder, health, notifier = ports
    artifacts = ArtifactStore() if settings.flux_sources else None  # one for every family: by digest
    contexts = [
        _family(manager, client, settings, family, shared, recorder, health, notifier, known, artifacts)
        for family in (families.NATIVE, *settings.upstream)
    ]
    for ctx in contexts:
        ctx.cache.peers = [c.cache for c in contexts if c is not ctx]
    return contexts


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


_SVELTOS_KINDS = (
    "ClusterPromotion",
    "ClusterProfile",
    "ClusterSummary",
    "MemberCluster",
    "Profile",
    "RoleRequest",
    *cluster_sets.KINDS,
)


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
    artifacts: ArtifactStore | None = None,
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
    kustomize = tool(settings.kustomize_binary, "kustomize", settings.helm_binary)
    ctx = Context(
        client=client,
        cache=Cache(informers, family),
        recorder=recorder,
        helm=HelmAdapter(settings.helm_binary, kustomize),
        renderer=Renderer(tool(settings.render_binary, "fleetwave-render", settings.helm_binary)),
        kustomizer=Kustomizer(kustomize),
        health=health,
        drift_watches=DriftWatches(health.watches) if health.watches is not None else None,
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
        artifacts=artifacts,
    )
    informers["MemberWork"].on_change(ctx.reports.on_change)
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


class SandboxedManager(Manager):
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
    leases: AsyncClient | None,
    lease_loop: LeaseLoop | None,
    *,
    handle_signals: bool,
) -> SandboxedManager:
    """The manager with its health-check pool and member watches, not yet anything to run."""
    return SandboxedManager(
        client,
        _check_pool(settings),
        MemberWatches(per_member=settings.member_watches_per_cluster, linger=WATCH_LINGER),
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
        lease_loop=lease_loop,
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
            keys=lambda: watches.all_keys(ctx.cache, "MemberCluster"),
        )
        clusters.watch(informers["MemberCluster"], lambda o: [object_key(o)])
        scoped = ctx.family.served("MemberCluster").namespaced
        clusters.watch(informers["Secret"], lambda s: watches.member_of_secret(s, namespaced=scoped))
        clusters.watch(informers["Lease"], lambda lease: watches.member_of_lease(lease, namespaced=scoped))
    if "RoleRequest" in ctx.family.kinds:
        _add_role_requests(manager, ctx, informers)
    if "ClusterProfile" not in ctx.family.kinds:
        return
    keys = watches.Keys(ctx.cache)
    promotions: Controller[str] = manager.add_controller(
        name("ClusterPromotion"),
        lambda k: promotion.reconcile(ctx, k),
        workers=settings.promotion_workers,
        deadlines_first=True,  # a gate falling due goes before summaries' news (ADR 0117)
        deadline_workers=settings.promotion_deadline_workers,
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
    if "Profile" in ctx.family.kinds:
        _add_namespaced_profiles(manager, ctx, informers, settings)
    ctx.queues.add("ClusterPromotion", promotions.enqueue)
    ctx.queues.add("ClusterProfile", profiles.enqueue)
    ctx.queues.add("ClusterSummary", summaries.enqueue)
    watches.wire(
        keys,
        informers,
        promotions,
        profiles,
        summaries,
        watches.Writes(ctx.statuses.own, ctx.echoes, ctx.wakeups),
        sets=_set_controllers(manager, ctx, keys),
    )


def _set_controllers(manager: Manager, ctx: Context, keys: watches.Keys) -> dict[str, Controller[str]]:
    """One controller per cluster-set kind the family serves (ADR 0108): a set's pass is one read of
    the fleet and at most one status write, so two workers keep up with many sets."""
    return {k: _set_controller(manager, ctx, keys, k) for k in cluster_sets.KINDS if k in ctx.family.kinds}


def _set_controller(manager: Manager, ctx: Context, keys: watches.Keys, kind: str) -> Controller[str]:
    async def reconcile(key: str) -> Result:
        return await cluster_sets.reconcile(ctx, kind, key)

    return manager.add_controller(
        ctx.family.controller_name(kind), reconcile, workers=2, keys=lambda: keys.all_of(kind)
    )


def _profiles_in(ctx: Context, namespace: Any) -> list[str]:
    return [k for k in watches.all_keys(ctx.cache, "Profile") if k.partition("/")[0] == namespace]


def _add_role_requests(manager: Manager, ctx: Context, informers: dict[str, Informer]) -> None:
    """RoleRequests (ADR 0111): re-granted when a member changes (it may start or stop matching) or a
    ConfigMap or Secret one of them reads changes."""
    requests: Controller[str] = manager.add_controller(
        ctx.family.controller_name("RoleRequest"),
        lambda k: role_requests.reconcile(ctx, k),
        workers=2,
        keys=lambda: watches.all_keys(ctx.cache, "RoleRequest"),
    )
    requests.watch(informers["RoleRequest"], lambda o: [object_key(o)])
    # A request picks members by labels (and skips pull members, a spec field): their probes'
    # status writes change neither, and would otherwise re-grant every request in every member.
    requests.watch(
        informers["MemberCluster"],
        lambda _o: watches.all_keys(ctx.cache, "RoleRequest"),
        signature=besides_status,
    )
    requests.watch(informers["ConfigMap"], lambda o: watches.role_requests_reading(ctx.cache, "ConfigMap", o))
    requests.watch(informers["Secret"], lambda o: watches.role_requests_reading(ctx.cache, "Secret", o))


def _add_namespaced_profiles(
    manager: Manager, ctx: Context, informers: dict[str, Informer], settings: Settings
) -> None:
    """Profiles (ADR 0110): each compiled into a generated ClusterProfile, whose changes wake it; it
    goes to the shard of that profile."""
    profiles: Controller[str] = manager.add_controller(
        ctx.family.controller_name("Profile"),
        lambda k: namespaced_profile.reconcile(ctx, k),
        workers=settings.rollout_workers,
        rollout=lambda k: f"ClusterProfile/{namespaced_profile.generated_of(k)}",
        keys=lambda: watches.all_keys(ctx.cache, "Profile"),
    )
    profiles.watch(informers["Profile"], lambda o: [object_key(o)])
    profiles.watch(informers["ClusterProfile"], namespaced_profile.profile_of)
    if "Set" in informers:  # what a named Set has chosen becomes the Profile's clusterRefs
        profiles.watch(informers["Set"], lambda o: namespaced_profile.profiles_naming_set(ctx, o))
    if "RoleRequest" in informers:  # a namespace's tenant admins decide who its Profiles act as
        profiles.watch(
            informers["RoleRequest"],
            lambda o: _profiles_in(ctx, (as_dict(o).get("spec") or {}).get("serviceAccountNamespace")),
        )
    ctx.queues.add("Profile", profiles.enqueue)


def _summary_memory(manager: Manager) -> SummaryMemory:
    """The summary controller's memory of its deliveries. A shard taken over may have been delivered
    by another replica meanwhile: what this process remembers having pruned no longer says nothing
    was left behind."""
    memory = SummaryMemory(started=lambda: manager.controllers_started)
    if manager.shards is not None:
        manager.shards.on_gain(lambda _shard: memory.forget_prunes())
    return memory


def tool(explicit: str, name: str, helm_binary: str) -> str:
    """A content tool: as configured, else beside helm (the pinned set is built together), else PATH."""
    if explicit:
        return explicit
    beside = Path(helm_binary).parent / name
    return str(beside) if os.sep in helm_binary and beside.is_file() else name
