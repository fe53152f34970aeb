"""`fleetwave status promotion NAME [--watch] [-o json]`: where a rollout is and what it waits for."""

from __future__ import annotations

import asyncio
import json
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from fleetwave.api.families import Family
from fleetwave.cli import located
from fleetwave.cli.common import KubeconfigOption, fail, management_client, resolve_kubeconfig
from fleetwave.kube import client as kubeclient
from fleetwave.kube import ops
from fleetwave.ux import live, render
from fleetwave.ux.present import Presenter

console = Console()
app = typer.Typer(help="Show the state of rollouts.", no_args_is_help=True)


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
) -> None:
    """Stages, clusters (pending/delivering/done/failed), gates with countdowns, approvals, conditions."""
    with management_client(kubeconfig) as client:
        try:
            found = located.locate(client, "ClusterPromotion", name)
            if found is None:
                fail(f"ClusterPromotion {name} not found")
            family = found.family
            view = live.fetch_view(client, name, family=family)
        except live.PromotionNotFound:
            fail(f"ClusterPromotion {name} not found")
        except ops.ApiError as e:
            fail(f"cannot read ClusterPromotion {name}: {ops.message_of(e)}")
    if not watch:
        if output is Output.JSON:
            typer.echo(json.dumps(view, indent=2, sort_keys=True))
        else:
            console.print(render.render(view))
        return
    try:
        asyncio.run(_watch(resolve_kubeconfig(kubeconfig), name, family, as_json=output is Output.JSON))
    except KeyboardInterrupt:
        raise typer.Exit(130) from None
    except live.PromotionNotFound as e:
        fail(str(e))


async def _watch(path: Path, name: str, family: Family, *, as_json: bool) -> None:
    client = kubeclient.async_client(kubeclient.config_from_file(path))
    try:
        with Presenter(console, as_json=as_json) as presenter:
            await live.follow(client, name, presenter.show, family=family)
    finally:
        await client.close()
