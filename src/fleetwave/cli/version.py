"""`fleetwave version [-o json]`: the package, the API versions it serves, the binaries it pins."""

from __future__ import annotations

import platform
from typing import Annotated, Any

import typer

from fleetwave import __version__
from fleetwave.api import families
from fleetwave.cli.common import STRUCTURED, emit
from fleetwave.local import recipe


def report() -> dict[str, Any]:
    """What `version` prints, as data."""
    upstream = sorted(
        {s.api_version for family in families.UPSTREAM for s in family.kinds.values()}
        | {f"{families.FLEET_PLACEMENT.rpartition('/')[0]}/{v}" for v in families.FLEET_PLACEMENT_ALSO}
    )
    return {
        "version": __version__,
        "apis": {
            "native": sorted({s.api_version for s in families.NATIVE.kinds.values()}),
            "upstream": upstream,  # served with `install --upstream-apis` / the chart's upstreamApis
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
