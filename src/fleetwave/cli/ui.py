"""`fleetwave ui`: the fleet's rollouts as a live web page, served on loopback with your kubeconfig."""

from __future__ import annotations

import asyncio
from typing import Annotated

import typer
from rich.console import Console

from fleetwave.cli.common import KubeconfigOption, err, fail, management_config
from fleetwave.kube import ops
from fleetwave.kube.client import KubeConfig
from fleetwave.ux import ui_server

console = Console()


def ui(
    kubeconfig: KubeconfigOption = None,
    address: Annotated[
        str, typer.Option("--address", help="Address to listen on. Keep it loopback: the page acts as you.")
    ] = "127.0.0.1",
    port: Annotated[
        int,
        typer.Option(
            "--port", min=0, max=65535, help="Port (0: any free one; the controller's /metrics takes 8080)."
        ),
    ] = 8090,
) -> None:
    """Serve a live web view of every rollout (pipelines, clusters, gates, approvals) on loopback.

    Like `kubectl proxy`, it uses your kubeconfig and credentials: the page can do nothing you could
    not do with `fleetwave approve`, and the API server refuses it what it refuses you."""
    config = management_config(kubeconfig)
    if not ui_server.is_loopback(address):
        err.print(
            f"warning: listening on {address}: anyone who can reach it can approve stages as you",
            highlight=False,
            soft_wrap=True,
        )
    try:
        asyncio.run(_serve(config, address, port))
    except KeyboardInterrupt:
        raise typer.Exit(130) from None
    except ops.HTTPError as e:  # before OSError: some transport errors are both
        fail(f"cannot read rollouts from {ui_server.server_of(config) or 'the management cluster'}: {e}")
    except OSError as e:
        fail(f"cannot listen on {address}:{port}: {e.strerror or e}")


async def _serve(config: KubeConfig, address: str, port: int) -> None:
    running = await ui_server.start(config, address=address, port=port)
    try:
        server = ui_server.server_of(config) or "the management cluster"
        console.print(
            f"fleetwave ui: serving {running.url} (rollouts on {server}; Ctrl-C to stop)", soft_wrap=True
        )
        for problem in running.feed.problems:
            err.print(f"warning: {problem}", highlight=False, soft_wrap=True)
        await asyncio.Event().wait()
    finally:
        await running.stop()
