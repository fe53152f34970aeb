"""`fleetwave demo`: the main job, end to end on the local fleet.

Local fleet up -> install -> register 3 members (dev/staging/prod) -> a chart from a loopback repo
rolled out by a ClusterPromotion through dev (auto, delay), staging (approved) and production,
live -> the upgrade walks the stages again -> what each member runs -> fleet down (unless --keep).
"""

from __future__ import annotations

import asyncio
import datetime as dt
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from fleetwave.local import binaries, fleet
from fleetwave.ux import demo_flow
from fleetwave.ux.demo_setup import DemoConfig

console = Console()


def demo(
    keep: Annotated[bool, typer.Option(help="Leave the fleet running afterwards.")] = False,
    state_dir: Annotated[Path | None, typer.Option(help="Fleet state directory.")] = None,
    upgrade: Annotated[bool, typer.Option(help="Also upgrade the chart and roll that out.")] = True,
    timeout: Annotated[float, typer.Option(help="Seconds each rollout may take.")] = 240.0,
) -> None:
    """Run the demo: a ClusterPromotion carries a Helm chart through dev, staging and production."""
    directory = state_dir or fleet.default_state_dir()
    try:
        bins = binaries.ensure()
        demo_flow.chart_dir()
        with console.status("starting the local fleet: 1 management + 3 members (first run builds binaries)"):
            state = fleet.up(directory, members=fleet.default_member_labels(3), now=dt.datetime.now(dt.UTC))
    except (fleet.FleetError, binaries.BinariesError, RuntimeError, FileNotFoundError) as e:
        console.print(f"[red]error:[/red] {e}")
        raise typer.Exit(1) from e
    config = DemoConfig(upgrade_to="1.1.0" if upgrade else None, timeout=timeout)
    result = demo_flow.DemoResult(ok=False, reason="interrupted")
    try:
        result = asyncio.run(demo_flow.run(state, bins.path("helm"), console, config))
    finally:
        if keep:
            console.print(f"fleet left running; state in {directory} (stop it with: fleetwave local down)")
        else:
            fleet.down(directory)
            console.print("local fleet stopped")
    _summary(result)
    if not result.ok:
        raise typer.Exit(1)


def _summary(result: demo_flow.DemoResult) -> None:
    if result.versions:
        table = Table("member", "chart version running", title="what the members run")
        for member, version in sorted(result.versions.items()):
            table.add_row(member, version)
        console.print(table)
    if result.ok:
        console.print("[green]the rollout went through every stage[/green]")
    else:
        console.print(f"[red]the demo failed:[/red] {result.reason}")
