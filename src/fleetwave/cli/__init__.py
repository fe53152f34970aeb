"""The `fleetwave` command: one typer app with a sub-app per area, each in its own module."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from fleetwave import __version__
from fleetwave.cli import (
    approve,
    controller,
    crds,
    demo,
    errors,
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
from fleetwave.cli.common import Globals, err

app = typer.Typer(
    name="fleetwave",
    help="Progressive, staged rollouts of add-ons and configuration across a fleet of Kubernetes clusters.",
    pretty_exceptions_enable=False,
    epilog=errors.EXIT_CODES,
    context_settings={"help_option_names": ["-h", "--help"]},
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


def _print_version(asked: bool) -> None:
    if asked:
        typer.echo(f"fleetwave {__version__}")
        raise typer.Exit()


@app.callback(invoke_without_command=True)
def connection(
    ctx: typer.Context,
    kubeconfig: Annotated[
        Path | None,
        typer.Option("--kubeconfig", help="Management cluster kubeconfig for every command (as kubectl's)."),
    ] = None,
    context: Annotated[
        str | None, typer.Option("--context", help="The kubeconfig context to use (kubectl's flag).")
    ] = None,
    debug: Annotated[
        bool, typer.Option("--debug", help="Show a Python traceback on failure, for a bug report.")
    ] = False,
    version: Annotated[
        bool,
        typer.Option("--version", callback=_print_version, is_eager=True, help="Print the version and exit."),
    ] = False,
) -> None:
    """Progressive, staged rollouts of add-ons and configuration across a fleet of Kubernetes clusters."""
    Globals.kubeconfig, Globals.context = kubeconfig, context
    if ctx.invoked_subcommand is None:  # bare `fleetwave`: the help, and success (kubectl's habit)
        typer.echo(ctx.get_help())
        raise typer.Exit()


def main() -> None:
    run(sys.argv[1:])


def run(argv: list[str], *, prog_name: str = "fleetwave") -> None:
    """The CLI with every failure outside fleetwave's control told in one line and its exit code
    (`cli.errors`); `--debug` anywhere, or FLEETWAVE_DEBUG=1, lets the traceback through."""
    debug = "--debug" in argv or os.environ.get("FLEETWAVE_DEBUG", "") not in ("", "0")
    args = [a for a in argv if a != "--debug"]
    try:
        app(args=args, prog_name=prog_name)
    except Exception as error:
        explained = None if debug else errors.explain(error)
        if explained is None:
            raise
        err.print(f"[red]error:[/red] {escape(explained.message)}", highlight=False, soft_wrap=True)
        sys.exit(explained.code)
