"""`fleetwave crds`: print or write the CustomResourceDefinitions generated from fleetwave.api models."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def crds(
    out: Annotated[
        Path | None,
        typer.Option(
            "--out", help="Write one <plural>.<group>.yaml per CRD into DIR instead of stdout.", metavar="DIR"
        ),
    ] = None,
) -> None:
    """Print the fleetwave CRDs generated from the API types."""
    from fleetwave.api.crds import render_files  # noqa: PLC0415 - keep CLI start-up light

    files = render_files()
    if out is None:
        typer.echo("---\n".join(files.values()), nl=False)
        return
    out.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (out / name).write_text(text, encoding="utf-8")
    typer.echo(f"wrote {len(files)} CRDs to {out}", err=True)
