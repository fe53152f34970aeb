"""`fleetwave demo`: the main job, end to end on the local fleet.

Brings the local fleet up, delivers a sample workload to every member with server-side apply,
shows it becoming Available cluster by cluster, and tears everything down (unless --keep).
"""

from __future__ import annotations

import datetime as dt
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from lightkube import Client, codecs
from lightkube.resources.apps_v1 import Deployment
from rich.console import Console
from rich.live import Live
from rich.table import Table

from fleetwave import kubeclient
from fleetwave.local import binaries, fleet

console = Console()

_NAMESPACE = "fleetwave-demo"


def _workload(cluster: str) -> list[dict[str, Any]]:
    labels = {"app.kubernetes.io/name": "hello", "app.kubernetes.io/managed-by": "fleetwave"}
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": _NAMESPACE}},
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "hello", "namespace": _NAMESPACE, "labels": labels},
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": {"app.kubernetes.io/name": "hello"}},
                "template": {
                    "metadata": {"labels": labels, "annotations": {"fleetwave.io/cluster": cluster}},
                    "spec": {"containers": [{"name": "hello", "image": "registry.invalid/hello:1.0.0"}]},
                },
            },
        },
    ]


def _available(client: Client) -> tuple[int, bool]:
    d = client.get(Deployment, "hello", namespace=_NAMESPACE)
    status = d.status
    ready = (status.availableReplicas or 0) if status else 0
    ok = (
        any(c.type == "Available" and c.status == "True" for c in (status.conditions or []))
        if status
        else False
    )
    return ready, ok and ready == 2


def _table(rows: dict[str, tuple[str, str]]) -> Table:
    table = Table(title=f"Deployment {_NAMESPACE}/hello on every member")
    table.add_column("cluster")
    table.add_column("labels")
    table.add_column("available")
    for name, (labels, state) in rows.items():
        table.add_row(name, labels, state)
    return table


def demo(
    keep: Annotated[bool, typer.Option(help="Leave the fleet running afterwards.")] = False,
    state_dir: Annotated[Path | None, typer.Option(help="Fleet state directory.")] = None,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for the workload.")] = 180.0,
) -> None:
    """Run the demo: local fleet up, a workload to every member, watch it become Available, down."""
    directory = state_dir or fleet.default_state_dir()
    try:
        with console.status("starting the local fleet: 1 management + 3 members (first run builds binaries)"):
            state = fleet.up(directory, members=fleet.default_member_labels(3), now=dt.datetime.now(dt.UTC))
    except (fleet.FleetError, binaries.BinariesError, RuntimeError) as e:
        console.print(f"[red]error:[/red] {e}")
        raise typer.Exit(1) from e
    ok = False
    try:
        ok = _deliver_and_watch(state, timeout)
    finally:
        if keep:
            console.print(f"fleet left running; state in {directory} (stop it with: fleetwave local down)")
        else:
            fleet.down(directory)
            console.print("local fleet stopped")
    if not ok:
        raise typer.Exit(1)


def _deliver_and_watch(state: fleet.FleetState, timeout: float) -> bool:
    clients = {c.name: kubeclient.client(kubeclient.config_from_file(c.kubeconfig)) for c in state.members}
    labels = {c.name: ",".join(f"{k}={v}" for k, v in c.labels.items()) for c in state.members}
    try:
        return _apply_and_watch(clients, labels, timeout)
    finally:
        for client in clients.values():
            client.close()


def _apply_and_watch(clients: dict[str, Client], labels: dict[str, str], timeout: float) -> bool:
    for name, client in clients.items():
        for obj in _workload(name):
            client.apply(codecs.from_dict(obj), force=True)
    deadline = time.monotonic() + timeout
    rows = {name: (labels[name], "0/2") for name in clients}
    with Live(_table(rows), console=console, refresh_per_second=4) as live:
        while True:
            done = 0
            for name, client in clients.items():
                ready, ok = _available(client)
                rows[name] = (labels[name], "[green]2/2 Available[/green]" if ok else f"{ready}/2")
                done += ok
            live.update(_table(rows))
            if done == len(clients):
                console.print("[green]the workload is Available on every member[/green]")
                return True
            if time.monotonic() > deadline:
                console.print(f"[red]the workload did not become Available within {timeout:.0f}s[/red]")
                return False
            time.sleep(0.5)
