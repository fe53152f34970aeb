"""`fleetwave status promotion NAME [--watch] [-o json]`: where a rollout is and what it waits for."""

from __future__ import annotations

import asyncio
import json
import time
from enum import StrEnum
from typing import Annotated

import typer
from rich.console import Console

from fleetwave.api.families import Family
from fleetwave.cli import located
from fleetwave.cli.common import KubeconfigOption, fail, management_client, management_config
from fleetwave.kube import client as kubeclient
from fleetwave.kube import ops
from fleetwave.ux import live, render
from fleetwave.ux.present import Presenter

console = Console()
app = typer.Typer(help="Show the state of rollouts.", no_args_is_help=True)


_BUSY_RETRIES = 20  # half a second apart


class Output(StrEnum):
    TABLE = "table"
    JSON = "json"


@app.command("promotion")
def promotion(
    name: Annotated[str, typer.Argument(help="Name of the ClusterPromotion.")],
    watch: Annotated[
        bool, typer.Option("--watch", "-w", help="Redraw live until the rollout ends (or Ctrl-C).")
    ] = False,
    output: Annotated[Output, typer.Option("--output", "-o", help="table or json.")] = Output.TABLE,
    kubeconfig: KubeconfigOption = None,
    namespace: Annotated[
        str | None,
        typer.Option(
            "--namespace",
            "-n",
            help="Accepted, as kubectl does: ClusterPromotions are cluster-scoped.",
            hidden=True,
        ),
    ] = None,
) -> None:
    """Stages, clusters (pending/delivering/done/failed), gates with countdowns, approvals, conditions."""
    with management_client(kubeconfig) as client:
        for attempt in range(_BUSY_RETRIES + 1):
            try:
                found = located.locate(client, "ClusterPromotion", name)
                if found is None:
                    fail(f"ClusterPromotion {name} not found")
                family = found.family
                view = live.fetch_view(client, name, family=family)
                break
            except live.PromotionNotFound:
                fail(f"ClusterPromotion {name} not found")
            except ops.ApiError as e:
                # Right after an install the CRDs' storage answers 429 "initializing" for a moment.
                if ops.code_of(e) == ops.TOO_MANY_REQUESTS and attempt < _BUSY_RETRIES:
                    time.sleep(0.5)
                    continue
                fail(f"cannot read ClusterPromotion {name}: {ops.message_of(e)}")
    if not watch:
        if output is Output.JSON:
            typer.echo(json.dumps(view, indent=2, sort_keys=True))
        else:
            console.print(render.render(view))
        return
    try:
        asyncio.run(_watch(management_config(kubeconfig), name, family, as_json=output is Output.JSON))
    except KeyboardInterrupt:
        raise typer.Exit(130) from None
    except live.PromotionNotFound as e:
        fail(str(e))


async def _watch(config: kubeclient.KubeConfig, name: str, family: Family, *, as_json: bool) -> None:
    client = kubeclient.async_client(config)
    try:
        with Presenter(console, as_json=as_json) as presenter:
            await live.follow(client, name, presenter.show, family=family)
    finally:
        await client.close()
