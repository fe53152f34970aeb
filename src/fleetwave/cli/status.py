"""`fleetwave status [-o table|json|yaml]`: every rollout on one line; `fleetwave status promotion NAME
[--watch] [-o table|json|yaml]`: where a rollout is and what it waits for; `fleetwave status profile
NAME --dry-run-report`: what a profile in DryRun would change on each cluster."""

from __future__ import annotations

import asyncio
import json
import time
from enum import StrEnum
from typing import Annotated, Any

import typer
import yaml
from rich.console import Console
from rich.table import Table

from fleetwave.api.families import Family
from fleetwave.cli.common import (
    KubeconfigOption,
    ListOutput,
    ListOutputOption,
    emit,
    fail,
    fail_api,
    management_client,
    management_config,
)
from fleetwave.kube import client as kubeclient
from fleetwave.kube import kinds, located, ops, sync_ops
from fleetwave.kube.client import Client
from fleetwave.ux import dry_run, live, overview, render
from fleetwave.ux.present import Presenter

console = Console()
app = typer.Typer(help="Show the state of rollouts (no argument: every rollout, one line each).")


_BUSY_RETRIES = 20  # half a second apart


class Output(StrEnum):
    TABLE = "table"
    JSON = "json"
    YAML = "yaml"


def _emit(data: Any, output: Output) -> None:
    if output is Output.JSON:
        typer.echo(json.dumps(data, indent=2, sort_keys=True))
    else:
        typer.echo(yaml.safe_dump(data, sort_keys=True, default_flow_style=False), nl=False)


@app.callback(invoke_without_command=True)
def overview_command(
    ctx: typer.Context,
    output: ListOutputOption = ListOutput.TABLE,
    kubeconfig: KubeconfigOption = None,
) -> None:
    """Every promotion and staged update run: phase, current stage and what it waits for."""
    if ctx.invoked_subcommand is not None:
        return
    with management_client(kubeconfig) as client:
        try:
            promotions = _everywhere(client, "ClusterPromotion")
            runs = _everywhere(client, "ClusterStagedUpdateRun") + _everywhere(client, "StagedUpdateRun")
        except ops.StatusError as e:
            fail_api(e, "cannot list rollouts")
    lines = overview.rows(promotions, runs)
    if output in (ListOutput.JSON, ListOutput.YAML):
        emit({"rollouts": lines}, output.value)
        return
    if output is ListOutput.NAME:
        for row in lines:
            typer.echo(f"{row['kind'].lower()}/{row['name']}")
        return
    if not lines:
        console.print("no rollouts (ClusterPromotions or staged update runs) yet")
        return
    console.print(_overview_table(lines, wide=output is ListOutput.WIDE))


def _overview_table(lines: list[dict[str, Any]], *, wide: bool) -> Table:
    table = Table(box=None, pad_edge=False)
    columns = ["KIND", "NAME", "PHASE", "STAGE", *(["API VERSION"] if wide else []), "WAITING FOR"]
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in lines:
        name = f"{row['namespace']}/{row['name']}" if row["namespace"] else row["name"]
        extra = [row["apiVersion"]] if wide else []
        table.add_row(row["kind"], name, row["phase"], row["stage"], *extra, row["waitingFor"])
    return table


def _everywhere(client: Client, kind: str) -> list[dict[str, Any]]:
    """Every object of `kind` in every family fleetwave serves it in (a group not served holds none)."""
    out: list[dict[str, Any]] = []
    for index, family in enumerate(located.candidates(kind)):
        resource = kinds.family_resource(family, kind)
        everywhere = "*" if kind == "StagedUpdateRun" else None
        try:
            found = sync_ops.list_dicts(client, resource, namespace=everywhere)
        except ops.StatusError as e:  # a bare 404 (no Status body) when the group is not served
            # fleetwave's own group is always installed: not served there means no CRDs, not "none".
            if ops.is_not_found(e) and index > 0:
                continue
            raise
        out.extend({**o, "kind": kind} for o in found)
    return out


@app.command("promotion")
def promotion(
    name: Annotated[str, typer.Argument(help="Name of the ClusterPromotion.")],
    watch: Annotated[
        bool, typer.Option("--watch", "-w", help="Redraw live until the rollout ends (or Ctrl-C).")
    ] = False,
    output: Annotated[Output, typer.Option("--output", "-o", help="table, json or yaml.")] = Output.TABLE,
    kubeconfig: KubeconfigOption = None,
    namespace: Annotated[
        str | None,
        typer.Option(
            "--namespace",
            "-n",
            help="Accepted, as kubectl does: ClusterPromotions are cluster-scoped.",
            hidden=True,
        ),
    ] = None,
) -> None:
    """Stages, clusters (pending/delivering/done/failed), gates with countdowns, approvals, conditions."""
    with management_client(kubeconfig) as client:
        for attempt in range(_BUSY_RETRIES + 1):
            try:
                found = located.locate(client, "ClusterPromotion", name)
                if found is None:
                    fail(f"ClusterPromotion {name} not found")
                family = found.family
                view = live.fetch_view(client, name, family=family)
                break
            except live.PromotionNotFound:
                fail(f"ClusterPromotion {name} not found")
            except ops.ApiError as e:
                # Right after an install the CRDs' storage answers 429 "initializing" for a moment.
                if ops.code_of(e) == ops.TOO_MANY_REQUESTS and attempt < _BUSY_RETRIES:
                    time.sleep(0.5)
                    continue
                fail_api(e, f"cannot read ClusterPromotion {name}")
    if not watch:
        if output is Output.TABLE:
            console.print(render.render(view))
        else:
            _emit(view, output)
        return
    if output is Output.YAML:
        fail("--watch shows a table or a stream of JSON views (-o json); -o yaml is for one view", code=2)
    try:
        asyncio.run(_watch(management_config(kubeconfig), name, family, as_json=output is Output.JSON))
    except KeyboardInterrupt:
        raise typer.Exit(130) from None
    except live.PromotionNotFound as e:
        fail(str(e))


async def _watch(config: kubeclient.KubeConfig, name: str, family: Family, *, as_json: bool) -> None:
    client = kubeclient.async_client(config)
    try:
        with Presenter(console, as_json=as_json) as presenter:
            await live.follow(client, name, presenter.show, family=family)
    finally:
        await client.close()


@app.command("profile")
def profile(
    name: Annotated[str, typer.Argument(help="Name of the ClusterProfile.")],
    dry_run_report: Annotated[
        bool,
        typer.Option(
            "--dry-run-report", help="What the profile (syncMode: DryRun) would change on each cluster."
        ),
    ] = False,
    output: Annotated[Output, typer.Option("--output", "-o", help="table, json or yaml.")] = Output.TABLE,
    kubeconfig: KubeconfigOption = None,
) -> None:
    """A ClusterProfile's DryRun report: per cluster, each object and Helm release it would create,
    update (and where) or delete, from its ClusterReports."""
    if not dry_run_report:
        fail("say what to show: --dry-run-report", code=2)
    with management_client(kubeconfig) as client:
        try:
            found = located.locate(client, "ClusterProfile", name)
            if found is None:
                fail(f"ClusterProfile {name} not found")
            resource = kinds.family_resource(found.family, "ClusterReport")
            labels: dict[str, Any] = {dry_run.PROFILE_LABEL: name}
            reports = [o.to_dict() for o in client.list(resource, namespace="*", labels=labels)]
        except ops.StatusError as e:
            fail_api(e, f"cannot read the ClusterReports of ClusterProfile {name}")
    rows = dry_run.rows(reports)
    if output is not Output.TABLE:
        _emit({"profile": name, "rows": rows}, output)
        return
    if not rows:
        console.print(f"no DryRun report for ClusterProfile {name} (is its syncMode DryRun?)")
        return
    table = Table(box=None, pad_edge=False)
    for column in dry_run.COLUMNS:
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*(row[c] for c in dry_run.COLUMNS))
    console.print(table)
