"""`fleetwave local ...`: the local fleet of real kube-apiservers (see fleetwave.local.fleet)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from fleetwave.cli.output import ListOutput, ListOutputOption, emit
from fleetwave.kube import client as kubeclient
from fleetwave.kube import ops
from fleetwave.local import agents as local_agents
from fleetwave.local import binaries, fleet
from fleetwave.local import flux as local_flux
from fleetwave.local import prometheus as local_prometheus
from fleetwave.mgmt import install as installing
from fleetwave.mgmt import pull_registration

app = typer.Typer(
    help="Run a local fleet: one management cluster and N member clusters.", no_args_is_help=True
)
console = Console(stderr=True)

StateDir = Annotated[
    Path | None,
    typer.Option(
        "--state-dir",
        help="Fleet state directory (default $FLEETWAVE_STATE_DIR or ~/.local/state/fleetwave/fleet).",
    ),
]


PullMembers = Annotated[
    int,
    typer.Option(
        "--pull-members",
        min=0,
        help="How many members (the last ones) join in pull mode: fleetwave is installed in the "
        "management cluster, these members are registered there with --pull (the hub keeps no "
        "kubeconfig of them) and each gets a `fleetwave agent` beside it. `down` stops the agents "
        "with the fleet. Default: none (no member is registered).",
    ),
]
WithFlux = Annotated[
    bool,
    typer.Option(
        "--with-flux",
        help="Also run Flux's source-controller on the management cluster and a Git server on "
        "loopback holding an example repository (read by the GitRepository flux-system/example), "
        "for content from Git. `down` stops them with the fleet.",
    ),
]


def parse_labels(specs: list[str], count: int) -> dict[str, dict[str, str]]:
    """Default labels, overridden per member by `NAME:k=v,k=v` specs."""
    members = fleet.default_member_labels(count)
    for spec in specs:
        name, sep, pairs = spec.partition(":")
        if not sep or name not in members:
            raise typer.BadParameter(
                f"{spec!r}: expected MEMBER:key=value[,key=value] with MEMBER one of {', '.join(members)}",
                param_hint="--labels",
            )
        labels: dict[str, str] = {}
        for pair in filter(None, pairs.split(",")):
            key, eq, value = pair.partition("=")
            if not eq or not key:
                raise typer.BadParameter(f"{pair!r} in {spec!r} is not key=value", param_hint="--labels")
            labels[key.strip()] = value.strip()
        members[name] = labels
    return members


def _state_dir(state_dir: Path | None) -> Path:
    return state_dir or fleet.default_state_dir()


@app.command()
def up(
    members: Annotated[
        int, typer.Option("--members", "-m", min=1, max=200, help="Number of member clusters.")
    ] = 3,
    full_members: Annotated[
        int | None,
        typer.Option(
            "--full-members",
            min=0,
            help="How many members run workload controllers (KCM, scheduler, kwok); the rest are "
            "API servers alone (about a quarter of the memory). Default: all.",
        ),
    ] = None,
    labels: Annotated[
        list[str] | None,
        typer.Option(
            "--labels", "-l", help="Labels of one member, e.g. member-1:env=dev,region=eu (repeatable)."
        ),
    ] = None,
    with_prometheus: Annotated[
        bool,
        typer.Option(
            "--with-prometheus",
            help="Also run Prometheus (scraping every member's API server) and a Pushgateway, for "
            "metric health checks. `down` stops them with the fleet.",
        ),
    ] = False,
    with_flux: WithFlux = False,
    pull_members: PullMembers = 0,
    state_dir: StateDir = None,
) -> None:
    """Start (or recover) the management cluster and N member clusters."""
    spec = parse_labels(labels or [], members)
    if pull_members > members:
        raise typer.BadParameter(f"{pull_members} of {members} members", param_hint="--pull-members")
    directory = _state_dir(state_dir)
    try:
        with console.status(f"starting 1 management + {members} member clusters (first run builds binaries)"):
            state = fleet.up(
                directory,
                members=spec,
                now=dt.datetime.now(dt.UTC),
                full_members=full_members,
                pull_members=pull_members,
            )
        state = _join_pull_members(state)
        state = _attach_services(state, prometheus=with_prometheus, flux=with_flux)
    except (fleet.FleetError, binaries.BinariesError, RuntimeError) as e:
        console.print(f"[red]error:[/red] {e}")
        raise typer.Exit(1) from e
    _print_status(state)
    console.print(f"management kubeconfig: {state.cluster(fleet.MANAGEMENT).kubeconfig}")
    if with_flux:
        _print_flux_hint(state)


def _join_pull_members(state: fleet.FleetState) -> fleet.FleetState:
    """Install fleetwave in the management cluster, register each pull member whose agent is not
    running (in pull mode: no kubeconfig Secret) and start its agent; return once each agent holds
    its lease on the hub, so that the fleet `up` reports is one that delivers."""
    waiting = local_agents.pending(state)
    if not waiting:
        return state
    config = kubeclient.config_from_file(state.cluster(fleet.MANAGEMENT).kubeconfig)
    server, ca = kubeclient.server_and_ca(config)
    namespace = installing.NAMESPACE
    try:
        with (
            console.status(f"installing fleetwave, starting {len(waiting)} agent(s)"),
            kubeclient.client(config) as client,
        ):
            installing.install(client)
            for member in waiting:
                made = pull_registration.register_pull(
                    client,
                    name=member.name,
                    namespace=namespace,
                    labels=member.labels,
                    hub_server=server,
                    hub_ca=ca,
                )
                state = local_agents.start(
                    state, member, hub_kubeconfig=made.hub_kubeconfig, cluster_namespace=namespace
                )
            for member in waiting:
                local_agents.wait_holding(state, member, cluster_namespace=namespace)
    except (ops.StatusError, pull_registration.PullRegistrationError, installing.ForeignCRD, OSError) as e:
        raise fleet.FleetError(f"joining the pull members failed: {e}") from e
    return state


def _attach_services(state: fleet.FleetState, *, prometheus: bool, flux: bool) -> fleet.FleetState:
    if prometheus:
        with console.status("starting Prometheus and the Pushgateway"):
            state, _ = local_prometheus.attach(state)
    if flux:
        with console.status("starting source-controller and the Git server (first run builds them)"):
            state, _ = local_flux.attach(state)
    return state


def _print_flux_hint(state: fleet.FleetState) -> None:
    found = local_flux.attached(state)
    if found is None:
        return
    name, namespace = local_flux.EXAMPLE, local_flux.FLUX_NAMESPACE
    # Unwrapped: the commands must stay copyable in a narrow terminal.
    console.print(
        f"try it: git clone {found.repo_url(name)} && cd {name}, edit manifests/configmap.yaml, "
        "git commit -am change && git push",
        soft_wrap=True,
    )
    console.print(
        f"source-controller fetches it within {local_flux.EXAMPLE_INTERVAL}: "
        f"kubectl get gitrepository -n {namespace} {name}",
        soft_wrap=True,
    )


@app.command()
def down(state_dir: StateDir = None) -> None:
    """Stop every process of the local fleet and remove its state."""
    directory = _state_dir(state_dir)
    if fleet.load(directory) is None and not directory.exists():
        console.print("no local fleet is running")
        return
    killed = fleet.down(directory)
    suffix = f" ({', '.join(killed)} needed SIGKILL)" if killed else ""
    console.print(f"local fleet stopped{suffix}")


@app.command()
def status(state_dir: StateDir = None, output: ListOutputOption = ListOutput.TABLE) -> None:
    """Show each cluster's health."""
    state = fleet.load(_state_dir(state_dir))
    if state is None:
        console.print("no local fleet is running (start one with: fleetwave local up)")
        raise typer.Exit(1)
    if output in (ListOutput.TABLE, ListOutput.WIDE):
        healthy = _print_status(state)
    else:
        rows = _status_rows(state)
        if output == ListOutput.NAME:
            typer.echo("\n".join(f"cluster/{row['cluster']}" for row in rows))
        else:
            emit(rows, output)
        healthy = all(row["ready"] for row in rows)
    if not healthy:
        raise typer.Exit(1)


def _status_rows(state: fleet.FleetState) -> list[dict[str, Any]]:
    """`-o json|yaml`: each cluster as data (kubeconfig paths, never tokens)."""
    return [
        {
            "cluster": h.name,
            "role": c.role,
            "profile": c.profile,
            "pull": c.pull,
            "server": c.server,
            "labels": dict(h.labels),
            "processes": {"alive": h.processes_alive, "total": h.processes_total},
            "ready": h.ready and h.processes_alive == h.processes_total,
            "kubeconfig": c.kubeconfig,
        }
        for h, c in zip(fleet.health(state), state.clusters, strict=True)
    ]


@app.command()
def kubeconfig(
    cluster: Annotated[
        str | None, typer.Argument(help="A member's name; the management cluster if omitted.")
    ] = None,
    state_dir: StateDir = None,
) -> None:
    """Print the path of a cluster's kubeconfig."""
    state = fleet.load(_state_dir(state_dir))
    if state is None:
        console.print("no local fleet is running (start one with: fleetwave local up)")
        raise typer.Exit(1)
    try:
        typer.echo(state.cluster(cluster or fleet.MANAGEMENT).kubeconfig)
    except fleet.FleetError as e:
        console.print(f"[red]error:[/red] {e}")
        raise typer.Exit(1) from e


def _print_status(state: fleet.FleetState) -> bool:
    table = Table(title="local fleet")
    for column in ("cluster", "role", "server", "labels", "processes", "ready"):
        table.add_column(column)
    healthy = True
    for h, c in zip(fleet.health(state), state.clusters, strict=True):
        ok = h.ready and h.processes_alive == h.processes_total
        healthy &= ok
        table.add_row(
            h.name,
            _role(c),
            c.server,
            ",".join(f"{k}={v}" for k, v in h.labels.items()) or "-",
            f"{h.processes_alive}/{h.processes_total}",
            "[green]yes[/green]" if ok else "[red]no[/red]",
        )
    Console().print(table)
    found = local_prometheus.attached(state)
    if found is not None:
        running = local_prometheus.is_running(found)
        healthy &= running
        where = "" if running else " [red](not running)[/red]"
        console.print(f"prometheus: {found.url}  pushgateway: {found.pushgateway_url}{where}")
    return _print_flux(state) and healthy


def _role(c: fleet.ClusterInfo) -> str:
    """The role, and for a member what sets it apart from the default: "member (light, pull)"."""
    notes = [n for n, shown in ((c.profile, c.profile != fleet.FULL), ("pull", c.pull)) if shown]
    return f"{c.role} ({', '.join(notes)})" if notes else c.role


def _print_flux(state: fleet.FleetState) -> bool:
    """The Flux line of `status`: where the Git server and source-controller's artifacts are."""
    found = local_flux.attached(state)
    if found is None:
        return True
    running = local_flux.is_running(found)
    where = "" if running else " [red](not running)[/red]"
    console.print(
        f"flux: git {found.repo_url(local_flux.EXAMPLE)}  "
        f"source-controller artifacts {found.storage_url}{where}",
        soft_wrap=True,
    )
    return running
