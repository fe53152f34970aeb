"""How listing commands print: kubectl's `-o` values and the structured forms (json, yaml).

Kept free of heavy imports: `fleetwave version` and the help of every command import it."""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Annotated, Any

import typer

STRUCTURED = ("json", "yaml")


class ListOutput(StrEnum):
    """kubectl's `-o` for a listing: a table, a wider one, `kind/name` lines, or the data."""

    TABLE = "table"
    WIDE = "wide"
    NAME = "name"
    JSON = "json"
    YAML = "yaml"


ListOutputOption = Annotated[
    ListOutput, typer.Option("--output", "-o", help="table, wide, name, json or yaml.")
]


def emit(data: Any, output: str) -> None:
    """`-o json` or `-o yaml`: the same data, keys sorted."""
    if output == "json":
        typer.echo(json.dumps(data, indent=2, sort_keys=True))
        return
    import yaml  # noqa: PLC0415 - only the yaml form pays for it

    typer.echo(yaml.safe_dump(data, sort_keys=True, default_flow_style=False), nl=False)
