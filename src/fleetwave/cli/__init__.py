"""The `fleetwave` command: one typer app with a sub-app per area, each in its own module."""

from __future__ import annotations

import typer

from fleetwave import __version__
from fleetwave.cli import approve, controller, crds, demo, local, manage, plan
from fleetwave.cli import status as status_cli

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
app.command(name="install")(manage.install)
app.command(name="apply")(manage.apply)
app.add_typer(manage.cluster_app, name="cluster")
app.add_typer(controller.app, name="controller")
app.add_typer(status_cli.app, name="status")
app.add_typer(approve.app, name="approve")


@app.command()
def version() -> None:
    """Print fleetwave's version."""
    typer.echo(__version__)


def main() -> None:
    app()
