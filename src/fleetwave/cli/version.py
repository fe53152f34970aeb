"""`fleetwave version [-o json]`: the package, the API versions it serves, the binaries it pins."""

from __future__ import annotations

import platform
from typing import Annotated, Any

import typer

from fleetwave import __version__
from fleetwave.api import groups
from fleetwave.cli.output import STRUCTURED, emit
from fleetwave.local import recipe


def report() -> dict[str, Any]:
    """What `version` prints, as data."""
    return {
        "version": __version__,
        "apis": {
            "native": [groups.API_VERSION],
            # served with `install --upstream-apis` / the chart's upstreamApis
            "upstream": groups.upstream_api_versions(),
        },
        "binaries": recipe.pinned(),
        "python": platform.python_version(),
    }


def version(
    output: Annotated[str, typer.Option("--output", "-o", help="text, json or yaml.")] = "text",
) -> None:
    """Print fleetwave's version, the API versions it serves and the binary versions it pins."""
    data = report()
    if output in STRUCTURED:
        emit(data, output)
        return
    if output != "text":
        raise typer.BadParameter(f"unknown output {output!r}: text, json or yaml", param_hint="--output")
    typer.echo(f"fleetwave {data['version']} (Python {data['python']})")
    typer.echo(f"APIs:     {', '.join(data['apis']['native'])}")
    typer.echo(f"upstream: {', '.join(data['apis']['upstream'])} (with --upstream-apis)")
    pins = data["binaries"]
    if pins:
        typer.echo("binaries: " + ", ".join(f"{name} {v}" for name, v in pins.items()))
    else:
        typer.echo("binaries: no build recipe found (set FLEETWAVE_BIN_DIR for `fleetwave local`)")
