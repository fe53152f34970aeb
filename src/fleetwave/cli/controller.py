"""`fleetwave controller run`: the controller against a management cluster."""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
from collections.abc import Callable, Coroutine
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

try:
    import uvloop as _uvloop
except ImportError:  # not built for this platform (Windows): --event-loop asyncio
    _uvloop = None  # type: ignore[assignment]

from fleetwave.api import families
from fleetwave.cli.common import (
    Globals,
    KubeconfigOption,
    PlacementKindOption,
    WatchNamespaceOption,
    fail,
    fail_api,
    management_config,
    watch_namespaces,
)
from fleetwave.controllers import app as controllers
from fleetwave.kube import client as kubeclient
from fleetwave.kube import ops
from fleetwave.local import binaries, recipe
from fleetwave.mgmt import install as installing
from fleetwave.mgmt import placement_kinds
from fleetwave.promapi import guards
from fleetwave.runtime import gc_freeze as freezing
from fleetwave.runtime import logs
from fleetwave.runtime.lease_loop import LeaseLoop, run_on
from fleetwave.runtime.manager import LeadershipLost

app = typer.Typer(help="Run the fleetwave controller.", no_args_is_help=True)

HTTP_LIBRARY_LOGGERS = logs.HTTP_LIBRARY_LOGGERS


class EventLoop(StrEnum):
    UVLOOP = "uvloop"
    ASYNCIO = "asyncio"


class LogFormat(StrEnum):
    TEXT = "text"
    JSON = "json"


def configure_logging(level: str, log_format: LogFormat = LogFormat.TEXT) -> None:
    """The controller's logging: `level` for fleetwave, warnings only from the HTTP libraries."""
    logs.configure(level, log_format.value)


def _runner(loop: EventLoop) -> Callable[[Coroutine[Any, Any, None]], None]:
    """How the controller's loop runs. uvloop spends less CPU per request than asyncio's own loop,
    and the controller is CPU-bound while a stage runs (ADR 0093); asyncio stays one flag away."""
    if loop is EventLoop.ASYNCIO:
        return asyncio.run
    if _uvloop is None:
        fail("--event-loop uvloop: uvloop is not installed here; install it or pass --event-loop asyncio")
    return _uvloop.run


def _config(explicit: Path | None) -> kubeclient.KubeConfig:
    """--kubeconfig, else $KUBECONFIG, else the pod's ServiceAccount when running in a cluster, else
    the local fleet or ~/.kube/config."""
    given = explicit or Globals.kubeconfig or os.environ.get("KUBECONFIG")
    if not given and kubeclient.in_cluster():
        return kubeclient.in_cluster_config()
    return management_config(explicit, otherwise="run in a pod")


def _upstream(config: kubeclient.KubeConfig, explicit: bool | None) -> bool:
    """The flag when given; otherwise whether `install --upstream-apis` was run in this cluster (the
    controller must watch the groups that are served: ADR 0062)."""
    if explicit is not None:
        return explicit
    try:
        with kubeclient.client(config) as client:
            return installing.upstream_installed(client)
    except ops.ApiError as e:
        fail_api(e, "cannot tell whether the upstream API groups are installed")


def _placement_kinds(config: Any, given: list[str]) -> tuple[Any, ...]:
    """--placement-kind values resolved through the management cluster's discovery (ADR 0091)."""
    if not given:
        return ()
    try:
        found, missing = placement_kinds.resolve_served(kubeclient.client(config), given)
    except placement_kinds.PlacementKindError as e:
        fail(str(e), code=2)
    for problem in missing:  # a CRD installed later must not make the controller crash-loop
        logging.getLogger("fleetwave").error("%s; placements cannot select it yet", problem)
    return found


def _helm(explicit: str | None) -> str:
    if explicit:
        return explicit
    found = shutil.which("helm")
    if found:
        return found
    pinned = recipe.pinned().get("helm", "v3")
    if not recipe.in_checkout():
        # An installed package never starts a Go build on its own: say what to install.
        fail(
            f"no helm binary on PATH: install helm {pinned} (https://helm.sh/docs/intro/install/) "
            "and put it on PATH, or pass --helm /path/to/helm"
        )
    try:
        return binaries.ensure().path("helm")
    except binaries.BinariesError as e:
        fail(f"no helm binary: pass --helm or put helm {pinned} on PATH ({e})")


# The options of `controller run`, one alias each (typer takes the flag's name from the parameter).
NamespaceOption = Annotated[str, typer.Option(help="The controller's own namespace.")]
HelmOption = Annotated[str | None, typer.Option(help="Path of the helm binary.")]
LeaderElectOption = Annotated[bool, typer.Option(help="Take a Lease before acting.")]
MetricsPortOption = Annotated[int, typer.Option(help="Port of /metrics.")]
HealthPortOption = Annotated[int, typer.Option(help="Port of /healthz and /readyz.")]
BindAddressOption = Annotated[
    str, typer.Option(help="Address /metrics, /healthz and /readyz listen on (0.0.0.0 in a pod).")
]
IdentityOption = Annotated[
    str | None,
    typer.Option(envvar="FLEETWAVE_IDENTITY", help="Leader-election identity (default: host and pid)."),
]
LeaseDurationOption = Annotated[float, typer.Option(help="Seconds a crashed leader blocks a successor.")]
LogLevelOption = Annotated[str, typer.Option(help="DEBUG, INFO, WARNING.")]
LogFormatOption = Annotated[
    LogFormat, typer.Option(help="text, or json: one JSON object a line (time, level, logger, message).")
]
EventLoopOption = Annotated[
    EventLoop, typer.Option(help="uvloop: less CPU per request (ADR 0093); asyncio: the standard one.")
]
HealthWorkersOption = Annotated[
    int, typer.Option(min=2, help="Worker processes Lua/CEL health checks run in (killed on overrun).")
]
HealthWallSecondsOption = Annotated[
    float, typer.Option(min=1.0, help="Wall-time budget of one cluster's health checks.")
]
HealthMemoryMibOption = Annotated[
    int, typer.Option(min=256, help="Address-space limit of a health-check worker (MiB).")
]
MemberWatchesOption = Annotated[
    int,
    typer.Option(
        min=0, help="Watches per member cluster that wake health checks waiting on it (0: poll only)."
    ),
]
JudgePollSecondsOption = Annotated[
    float, typer.Option(min=0.5, help="Seconds between re-checks of health no watch woke.")
]
ShardsOption = Annotated[
    int,
    typer.Option(
        min=1,
        max=256,
        help="Leases the rollouts are split over between replicas (ADR 0067); every replica must "
        "run with the same count. 1: one leader does everything.",
    ),
]
UpstreamApisOption = Annotated[
    bool | None,
    typer.Option(
        "--upstream-apis/--no-upstream-apis",
        help="Reconcile objects of the Sveltos and KubeFleet API groups too. Default: whatever "
        "`fleetwave install` set up in this cluster.",
    ),
]
NotifySecretOption = Annotated[
    str | None,
    typer.Option(
        help="Secret in the controller's namespace naming where rollout notifications go: keys url, "
        "format (json, slack or cloudevents) and headers (a YAML map).",
    ),
]
AllowLoopbackTargetsOption = Annotated[
    bool,
    typer.Option(
        envvar=guards.ALLOW_LOOPBACK_ENV,
        help="Let metric sources, webhooks, notifications and Helm chart repositories be on "
        "loopback (127.0.0.0/8, ::1): for a local fleet whose servers listen there. Link-local, "
        "cloud-metadata and unspecified addresses stay refused (ADR 0096).",
    ),
]
LocalContentKindOption = Annotated[
    list[str] | None,
    typer.Option(
        help="A kind `deploymentType: Local` content may hold, as Kind (core group), group/Kind "
        "or group/*; repeat it. Unset: any kind except what the controller runs on (its "
        "namespace, Leases, Events, RBAC, admission, its own API), which is refused always.",
    ),
]
FluxSourcesOption = Annotated[
    bool,
    typer.Option(
        "--flux-sources",
        help="Read Flux's GitRepository, OCIRepository and Bucket as content sources (policyRefs and "
        "kustomizationRefs of those kinds). Needs Flux's source-controller and its CRDs installed.",
    ),
]
GcFreezeOption = Annotated[
    bool,
    typer.Option(
        "--gc-freeze/--no-gc-freeze",
        help="Keep long-lived objects out of Python's garbage collector, with a full sweep every "
        "30 min (less often while sweeps find nothing): short collection pauses on a large fleet "
        "(ADR 0095, 0142).",
    ),
]


@app.command("run")
def run(
    kubeconfig: KubeconfigOption = None,
    namespace: NamespaceOption = "fleetwave-system",
    helm: HelmOption = None,
    leader_elect: LeaderElectOption = True,
    metrics_port: MetricsPortOption = 8080,
    health_port: HealthPortOption = 8081,
    bind_address: BindAddressOption = "127.0.0.1",
    identity: IdentityOption = None,
    lease_duration: LeaseDurationOption = 15.0,
    log_level: LogLevelOption = "INFO",
    log_format: LogFormatOption = LogFormat.TEXT,
    event_loop: EventLoopOption = EventLoop.UVLOOP,
    health_workers: HealthWorkersOption = 4,
    health_wall_seconds: HealthWallSecondsOption = 20.0,
    health_memory_mib: HealthMemoryMibOption = 1024,
    member_watches: MemberWatchesOption = 16,
    judge_poll_seconds: JudgePollSecondsOption = 2.0,
    shards: ShardsOption = 1,
    upstream_apis: UpstreamApisOption = None,
    watch_namespace: WatchNamespaceOption = None,
    placement_kind: PlacementKindOption = None,
    notify_secret: NotifySecretOption = None,
    allow_loopback_targets: AllowLoopbackTargetsOption = False,
    local_content_kind: LocalContentKindOption = None,
    flux_sources: FluxSourcesOption = False,
    gc_freeze: GcFreezeOption = True,
) -> None:
    """Reconcile ClusterPromotions, ClusterProfiles and ClusterSummaries until stopped."""
    configure_logging(log_level, log_format)
    watch = watch_namespaces(watch_namespace)  # refused before anything connects
    config = _config(kubeconfig)
    settings = controllers.Settings(
        namespace=namespace,
        helm_binary=_helm(helm),
        leader_election=leader_elect,
        metrics_port=metrics_port,
        health_port=health_port,
        bind_address=bind_address,
        identity=identity,
        lease_duration=lease_duration,
        health_workers=health_workers,
        health_wall_seconds=health_wall_seconds,
        health_memory_bytes=health_memory_mib * 1024 * 1024,
        member_watches_per_cluster=member_watches,
        judge_poll_seconds=judge_poll_seconds,
        shards=shards,
        watch_namespaces=watch,
        notify_secret=notify_secret,
        allow_loopback_targets=allow_loopback_targets,
        local_content_kinds=tuple(local_content_kind or ()),
        flux_sources=flux_sources,
        upstream=families.upstream_families(namespace) if _upstream(config, upstream_apis) else (),
        placement_kinds=_placement_kinds(config, placement_kind or []),
    )
    try:
        _runner(event_loop)(_serve(config, settings, gc_freeze=gc_freeze))
    except LeadershipLost as e:
        fail(f"leadership lost: {e}; exiting so that a fresh process re-contends")


async def _serve(config: kubeclient.KubeConfig, settings: controllers.Settings, *, gc_freeze: bool) -> None:
    """The controller until it stops, and its clients closed after."""
    # The informers' long-lived watches and the lease renewals each on a client of their own; the
    # leader Lease's on a thread of its own too, where no long turn of this loop delays a renewal.
    client = kubeclient.async_client(config, target="management")
    watcher = kubeclient.async_client(config, target="management")
    lease_loop = _lease_loop(settings)
    leases = await run_on(lease_loop, _management_client(config))
    frozen: asyncio.Task[None] | None = None
    try:
        manager = controllers.build(
            client, settings, watch_client=watcher, lease_client=leases, lease_loop=lease_loop
        )
        if gc_freeze:  # process-wide, so here and not in the manager (tests run managers in-process)
            # A GC sweep is taken when the manager's lease leaves room for its pause (ADR 0139).
            sweeping = freezing.keep_long_lived_frozen(time_left=manager.fence.time_left)
            frozen = asyncio.create_task(sweeping)
        await manager.run()
    finally:
        if frozen is not None:
            frozen.cancel()
            await asyncio.gather(frozen, return_exceptions=True)
        for each in (client, watcher):
            await each.close()
        await _close_leases(leases, lease_loop)


def _lease_loop(settings: controllers.Settings) -> LeaseLoop | None:
    """A started thread for the single leader Lease (ADR 0140); None without election or with
    shards, whose Leases stay on the controller's loop."""
    if not settings.leader_election or settings.shards > 1:
        return None
    started = LeaseLoop()
    started.start()
    return started


async def _management_client(config: kubeclient.KubeConfig) -> kubeclient.AsyncClient:
    return kubeclient.async_client(config, target="management")


async def _close_leases(leases: kubeclient.AsyncClient, lease_loop: LeaseLoop | None) -> None:
    try:
        await run_on(lease_loop, leases.close())
    finally:
        if lease_loop is not None:
            await lease_loop.stop()
