"""The `fleetwave` command: one typer app with a sub-app per area, each in its own module."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from fleetwave import __version__
from fleetwave.cli.exit_codes import EXIT_CODES
from fleetwave.cli.lazy import Entry, group
from fleetwave.cli.session import Globals

_CLI = "fleetwave.cli"
# The commands in the order `--help` lists them, each with its one-line help (equal to the command's
# own: a unit test checks). Their modules are imported only when the command runs (cli.lazy).
COMMANDS = (
    Entry("crds", f"{_CLI}.crds:crds", "Print the fleetwave CRDs generated from the API types."),
    Entry(
        "demo",
        f"{_CLI}.demo:demo",
        "Run the demo: a ClusterPromotion carries a Helm chart through dev, staging and production.",
    ),
    Entry("plan", f"{_CLI}.plan:plan", "Print when each stage, batch and gate of a rollout would happen."),
    Entry(
        "ui",
        f"{_CLI}.ui:ui",
        "Serve a live web view of every rollout (pipelines, clusters, gates, approvals) on loopback.",
    ),
    Entry(
        "install",
        f"{_CLI}.manage:install",
        "Install fleetwave's CRDs and least-privilege RBAC into the management cluster.",
    ),
    Entry(
        "apply",
        f"{_CLI}.manage:apply",
        "Apply manifests; Sveltos and KubeFleet apiVersions are mapped to fleetwave's own.",
    ),
    Entry(
        "version",
        f"{_CLI}.version:version",
        "Print fleetwave's version, the API versions it serves and the binary versions it pins.",
    ),
    Entry("local", f"{_CLI}.local:app", "Run a local fleet: one management cluster and N member clusters."),
    Entry("cluster", f"{_CLI}.manage:cluster_app", "Register, list and unregister member clusters."),
    Entry("controller", f"{_CLI}.controller:app", "Run the fleetwave controller."),
    Entry("agent", f"{_CLI}.agent:app", "Run fleetwave's agent in a pull-mode member cluster."),
    Entry(
        "status",
        f"{_CLI}.status:app",
        "Show the state of rollouts (no argument: every rollout, one line each).",
    ),
    Entry("approve", f"{_CLI}.approve:app", "Approve stages that wait for a manual approval."),
    Entry(
        "pause",
        f"{_CLI}.pausing:pause_app",
        "Pause a rollout: what is in flight finishes, nothing new starts.",
    ),
    Entry("resume", f"{_CLI}.pausing:resume_app", "Resume a paused rollout from where it stopped."),
    Entry(
        "rollback",
        f"{_CLI}.rolling_back:rollback_app",
        "Roll a rollout back to the revision that last succeeded (or a chosen one).",
    ),
    Entry("abort", f"{_CLI}.rolling_back:abort_app", "Stop a rollout and roll back what it changed."),
    Entry(
        "history",
        f"{_CLI}.history:app",
        "Past revisions of a rollout: outcome, approvals, failures, rollbacks.",
    ),
)

app = typer.Typer(
    name="fleetwave",
    cls=group(COMMANDS),
    help="Progressive, staged rollouts of add-ons and configuration across a fleet of Kubernetes clusters.",
    pretty_exceptions_enable=False,
    # Plain help, as kubectl prints it: rich's panels cost ~0.15 s of start-up (bench_cli_start.py).
    rich_markup_mode=None,
    epilog=EXIT_CODES,
    context_settings={"help_option_names": ["-h", "--help"]},
)


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
        if debug:
            raise
        from rich.markup import escape  # noqa: PLC0415 - failures only: start-up stays light

        from fleetwave.cli import errors  # noqa: PLC0415
        from fleetwave.cli.common import err  # noqa: PLC0415

        explained = errors.explain(error)
        if explained is None:
            raise
        err.print(f"[red]error:[/red] {escape(explained.message)}", highlight=False, soft_wrap=True)
        sys.exit(explained.code)
