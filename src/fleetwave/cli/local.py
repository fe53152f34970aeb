"""`fleetwave local ...`: the local fleet of real kube-apiservers (see fleetwave.local)."""

from __future__ import annotations

import typer

app = typer.Typer(help="Run a local fleet: one management cluster and N member clusters.", no_args_is_help=True)
