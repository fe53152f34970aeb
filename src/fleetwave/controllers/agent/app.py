"""The agent's composition (ADR 0106): a manager on the hub, holding the member's lease, one informer
on the member's work, one controller that delivers it, and the member-side ports (helm, the health
sandbox, member watches) exactly as the controller builds them for push members."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path

from fleetwave.api import pullmode
from fleetwave.controllers import app
from fleetwave.controllers.agent import facts, work
from fleetwave.controllers.agent.lease import DURATION, RENEW_DEADLINE, RETRY, AgentLease
from fleetwave.controllers.agent.member import Member
from fleetwave.controllers.fleet.member_watches import MemberWatches
from fleetwave.controllers.fleet.ports import HealthAdapter, HelmAdapter
from fleetwave.controllers.shared.context import Cache, Context
from fleetwave.delivery.gotemplate import Renderer
from fleetwave.delivery.known_versions import KnownVersions
from fleetwave.delivery.kustomize import Kustomizer
from fleetwave.kube import fence, kinds
from fleetwave.kube.client import AsyncClient
from fleetwave.runtime import events, leader, logs
from fleetwave.runtime.controller import Controller, besides_status
from fleetwave.runtime.watching import Informer, object_key
from fleetwave.sandbox.pool import Budget, CheckPool


@dataclass(frozen=True, slots=True)
class AgentSettings:
    cluster: str  # namespace/name, as the hub registered the member
    kubeconfig: Path | None = None  # the member's; None: the pod's ServiceAccount
    helm_binary: str = "helm"
    identity: str | None = None
    metrics_port: int = 8080
    health_port: int = 8081
    bind_address: str = "127.0.0.1"
    allowed_kinds: frozenset[str] | None = None
    health_workers: int = 2
    health_wall_seconds: float = 20.0
    health_memory_bytes: int = 512 * 1024 * 1024
    judge_poll_seconds: float = 2.0
    workers: int = 4
    # The member's lease on the hub: how long after its last renewal the agent counts as gone
    # (renewed every quarter of it, given up after three quarters without a renewal).
    lease_duration: float = DURATION


def build(
    hub: AsyncClient,
    settings: AgentSettings,
    *,
    handle_signals: bool = True,
    pool: CheckPool | None = None,
) -> app.SandboxedManager:
    """The agent's manager: run it until it stops (a lost lease raises `LeadershipLost`).

    `pool`: a health-check sandbox shared with other agents of the same process (the pull-mode
    benchmark runs many agents per process, each with its own identity and state); the caller starts
    it, and the first of those managers to stop closes it. None: a pool of the agent's own, sized by
    `settings` (what `fleetwave agent run` does)."""
    logs.quiet_http_libraries()  # never a request's URL or headers in the agent's log either
    namespace = pullmode.hub_namespace(settings.cluster)
    pool = pool or _own_pool(settings)
    watches = MemberWatches(per_member=16, linger=app.WATCH_LINGER)
    manager = app.SandboxedManager(
        hub,
        pool,
        watches,
        namespace=namespace,
        leader_election=False,
        metrics_port=settings.metrics_port,
        health_port=settings.health_port,
        host=settings.bind_address,
        handle_signals=handle_signals,
    )
    identity = settings.identity or leader.default_identity()
    manager.elector = lease = _lease(hub, namespace, identity, settings, manager.fence)
    informer = manager.add_informer(Informer(hub, kinds.resource("MemberWork"), namespace=namespace))
    ctx = _context(hub, settings, namespace, (pool, watches), informer)
    member = Member(settings.cluster, settings.kubeconfig)
    agent = work.Agent(ctx, member, namespace, identity, settings.allowed_kinds)
    _controllers(manager, agent, informer, lease, settings)
    return manager


def _own_pool(settings: AgentSettings) -> CheckPool:
    budget = Budget(
        workers=settings.health_workers,
        wall_seconds=settings.health_wall_seconds,
        memory_bytes=settings.health_memory_bytes,
    )
    return CheckPool(budget)


def _lease(
    hub: AsyncClient, namespace: str, identity: str, settings: AgentSettings, write_fence: fence.Fence
) -> AgentLease:
    """The member's lease, its renewal and deadline in the same proportions at any duration. It
    renews the manager's write fence: an agent paused past its lease writes nothing (ADR 0115)."""
    return AgentLease(
        hub,
        namespace,
        pullmode.LEASE_NAME,
        identity,
        lease_duration=settings.lease_duration,
        renew_deadline=settings.lease_duration * RENEW_DEADLINE / DURATION,
        retry_period=settings.lease_duration * RETRY / DURATION,
        cluster=settings.cluster,
        write_fence=write_fence,
    )


def _context(
    hub: AsyncClient,
    settings: AgentSettings,
    namespace: str,
    ports: tuple[CheckPool, MemberWatches],
    informer: Informer,
) -> Context:
    pool, watches = ports
    kustomize = app.tool("", "kustomize", settings.helm_binary)
    return Context(
        client=hub,
        cache=Cache({"MemberWork": informer}),
        recorder=events.EventRecorder(hub, "fleetwave-agent"),
        helm=HelmAdapter(settings.helm_binary, kustomize),
        health=HealthAdapter(pool, watches),
        renderer=Renderer(app.tool("", "fleetwave-render", settings.helm_binary)),
        kustomizer=Kustomizer(kustomize),
        known_versions=KnownVersions(watched=watches.latest),
        namespace=namespace,
        clock=lambda: dt.datetime.now(dt.UTC),
        judge_poll=settings.judge_poll_seconds,
    )


def _controllers(
    manager: app.SandboxedManager,
    agent: work.Agent,
    informer: Informer,
    lease: AgentLease,
    settings: AgentSettings,
) -> None:
    works: Controller[str] = manager.add_controller(
        "memberwork", lambda k: work.reconcile(agent, k), workers=settings.workers
    )
    # The work's status is the agent's own report: only the hub's changes (its spec, its deletion)
    # wake the agent. A report's own event would otherwise redeliver at once, past the backoff a
    # failed delivery is retried with.
    works.watch(informer, lambda o: [object_key(o)], signature=besides_status)
    agent.enqueue = works.enqueue
    agent.ctx.queues.add("ClusterSummary", lambda k: works.enqueue(agent.work_key_of_summary(k)))
    member_facts: Controller[str] = manager.add_controller(
        "member-facts", lambda _k: facts.refresh(agent.member, lease)
    )
    member_facts.enqueue(facts.KEY)
