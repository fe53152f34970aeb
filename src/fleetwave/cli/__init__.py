"""The `fleetwave` command: one typer app with a sub-app per area, each in its own module."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from fleetwave.cli import (
    approve,
    controller,
    crds,
    demo,
    history,
    local,
    manage,
    pausing,
    plan,
    rolling_back,
    ui,
)
from fleetwave.cli import status as status_cli
from fleetwave.cli import version as version_cli
from fleetwave.cli.common import Globals

app = typer.Typer(
    name="fleetwave",
    help="Progressive, staged rollouts of add-ons and configuration across a fleet of Kubernetes clusters.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
app.add_typer(local.app, name="local")
app.command(name="crds")(crds.crds)
app.command(name="demo")(demo.demo)
app.command(name="plan")(plan.plan)
app.command(name="ui")(ui.ui)
app.command(name="install")(manage.install)
app.command(name="apply")(manage.apply)
app.add_typer(manage.cluster_app, name="cluster")
app.add_typer(controller.app, name="controller")
app.add_typer(status_cli.app, name="status")
app.add_typer(approve.app, name="approve")
app.add_typer(pausing.pause_app, name="pause")
app.add_typer(pausing.resume_app, name="resume")
app.add_typer(rolling_back.rollback_app, name="rollback")
app.add_typer(rolling_back.abort_app, name="abort")
app.add_typer(history.app, name="history")
app.command(name="version")(version_cli.version)


@app.callback()
def connection(
    kubeconfig: Annotated[
        Path | None,
        typer.Option("--kubeconfig", help="Management cluster kubeconfig for every command (as kubectl's)."),
    ] = None,
    context: Annotated[
        str | None, typer.Option("--context", help="The kubeconfig context to use (kubectl's flag).")
    ] = None,
) -> None:
    """Progressive, staged rollouts of add-ons and configuration across a fleet of Kubernetes clusters."""
    Globals.kubeconfig, Globals.context = kubeconfig, context


def main() -> None:
    app()
