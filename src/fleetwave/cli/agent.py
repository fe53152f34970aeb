"""`fleetwave agent run`: a pull-mode member's agent (ADR 0106).

Runs in the member (its pod's ServiceAccount, or `--kubeconfig`), connects to the hub with the
credential `cluster register --pull` issued (`--hub-kubeconfig`), and delivers what the hub wrote for
this member. The hub credential file is read again when it changes (a mounted Secret updated with a
new token): the agent reconnects without a restart, and the rollouts it serves go on.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from pathlib import Path
from typing import Annotated

import typer

from fleetwave.cli import inputs
from fleetwave.cli.common import fail
from fleetwave.cli.controller import (
    BindAddressOption,
    HealthPortOption,
    HealthWorkersOption,
    IdentityOption,
    LogFormat,
    LogFormatOption,
    LogLevelOption,
    MetricsPortOption,
    configure_logging,
)
from fleetwave.controllers.agent import app as agent_app
from fleetwave.controllers.agent.member import Member, MemberConfigError
from fleetwave.delivery.target import CredentialsRefused
from fleetwave.kube import client as kubeclient
from fleetwave.runtime.manager import LeadershipLost

app = typer.Typer(help="Run fleetwave's agent in a pull-mode member cluster.", no_args_is_help=True)
log = logging.getLogger("fleetwave.agent")

# How often the hub credential file is checked for a new token, and how long the agent waits before
# contending for the member's lease again after losing it (the hub unreachable past its deadline).
CREDENTIAL_CHECK_SECONDS = 5.0
RECONNECT_SECONDS = 5.0
MAX_HUB_KUBECONFIG = 256 * 1024


@app.command("run")
def run(
    cluster: Annotated[str, typer.Option("--cluster", help="The member's name, as the hub registered it.")],
    hub_kubeconfig: Annotated[
        Path, typer.Option("--hub-kubeconfig", help="The hub credential `cluster register --pull` wrote.")
    ],
    cluster_namespace: Annotated[
        str, typer.Option("--cluster-namespace", help="The member's namespace on the hub.")
    ] = "fleetwave-system",
    kubeconfig: Annotated[
        Path | None,
        typer.Option("--kubeconfig", help="The member's kubeconfig (default: the pod's ServiceAccount)."),
    ] = None,
    helm: Annotated[str, typer.Option("--helm", help="Path of the helm binary.")] = "helm",
    allow_kind: Annotated[
        list[str] | None,
        typer.Option(
            "--allow-kind",
            help="Apply only these kinds (Kind or group/Kind; repeat). "
            "Default: any the member's RBAC allows.",
        ),
    ] = None,
    lease_duration: Annotated[
        float,
        typer.Option(
            "--lease-duration",
            min=4.0,
            help="Seconds after the agent's last lease renewal that the hub takes it for gone "
            "(one renewal, a hub write, every quarter of it).",
        ),
    ] = 40.0,
    identity: IdentityOption = None,
    metrics_port: MetricsPortOption = 8080,
    health_port: HealthPortOption = 8081,
    bind_address: BindAddressOption = "127.0.0.1",
    health_workers: HealthWorkersOption = 2,
    log_level: LogLevelOption = "INFO",
    log_format: LogFormatOption = LogFormat.TEXT,
) -> None:
    """Deliver what the hub wrote for this member cluster and report back, until stopped."""
    configure_logging(log_level, log_format)
    _hub_config(hub_kubeconfig)  # refused before anything starts
    settings = agent_app.AgentSettings(
        cluster=f"{cluster_namespace}/{cluster}",
        kubeconfig=kubeconfig,
        helm_binary=helm,
        identity=identity,
        metrics_port=metrics_port,
        health_port=health_port,
        bind_address=bind_address,
        allowed_kinds=frozenset(allow_kind) if allow_kind else None,
        health_workers=health_workers,
        lease_duration=lease_duration,
    )
    try:  # the member reachable as told (its kubeconfig read and accepted) before anything starts
        Member(settings.cluster, kubeconfig).target().config()
    except (MemberConfigError, CredentialsRefused) as e:
        fail(f"{e} (pass --kubeconfig with the member's kubeconfig, inline credentials)", code=2)
    asyncio.run(_serve(hub_kubeconfig, settings))


def _read(path: Path) -> bytes:
    try:
        return inputs.read_bytes(path, "--hub-kubeconfig", limit=MAX_HUB_KUBECONFIG)
    except inputs.InputError as e:
        fail(str(e), code=2)


def _hub_config(path: Path) -> kubeclient.KubeConfig:
    """The hub credential, held to the member-kubeconfig policy: inline token or certificate, https,
    nothing run or read from elsewhere."""
    try:
        return kubeclient.member_config(_read(path))
    except kubeclient.KubeconfigRefused as e:
        fail(f"--hub-kubeconfig {path}: {e}", code=2)


async def _serve(path: Path, settings: agent_app.AgentSettings) -> None:
    """Run the agent on the hub credential as it is now; start again when the file changes or the
    lease was lost (the hub out of reach for longer than the lease), stop on a signal."""
    while True:
        data = _read(path)
        hub = kubeclient.async_client(_hub_config(path), target="management")
        manager = agent_app.build(hub, settings)
        running = asyncio.create_task(manager.run(), name="agent")
        changed = asyncio.create_task(_changed(path, data), name="hub credential")
        try:
            await asyncio.wait({running, changed}, return_when=asyncio.FIRST_COMPLETED)
            rotated = changed.done()
            if rotated:
                log.info("the hub credential changed: reconnecting with it")
                manager.stop()
            lost = await _outcome(running)
        finally:
            changed.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await changed
            await hub.close()
        if not lost and not rotated:
            return  # stopped (a signal)
        await asyncio.sleep(RECONNECT_SECONDS if lost else 0)


async def _outcome(running: asyncio.Task[None]) -> bool:
    """Whether the agent ended by losing the member's lease (then it contends again)."""
    try:
        await running
    except LeadershipLost as e:
        log.warning("%s; the member keeps running what it has; contending again", e)
        return True
    return False


async def _changed(path: Path, data: bytes) -> None:
    """Return once the file's content differs from `data` (a rotated credential)."""
    while True:
        await asyncio.sleep(CREDENTIAL_CHECK_SECONDS)
        try:
            now = await asyncio.to_thread(path.read_bytes)
        except OSError:
            continue  # a Secret volume swaps its files atomically; a moment without one is not a change
        if now != data:
            return
