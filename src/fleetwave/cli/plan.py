"""`fleetwave plan`: print the predicted timeline of a promotion, profile rollout or staged update run.

Reads the manifests and the fleet (a fleet file, or MemberClusters on a management cluster), runs the
engine's own simulator and prints stages -> batches -> gates with earliest times (`-o json`: same data,
schema in docs/plan.md).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml
from rich.console import Console
from rich.table import Table

from fleetwave.api.codec import ManifestError, load_manifests
from fleetwave.api.meta import parse_duration
from fleetwave.cli import inputs
from fleetwave.cli.inputs import InputError
from fleetwave.core import batching, timeline, timestamps
from fleetwave.core import model as m
from fleetwave.translate import (
    Rollout,
    TranslateError,
    fleet_from_docs,
    fleet_from_yaml,
    from_manifests,
    plan_report,
    seed_approval_names,
    selector_problems,
    stage_membership,
)


def _read(path: Path, what: str) -> str:
    return inputs.read_text(path, what)


def _instant(text: str, option: str) -> datetime:
    try:
        return timestamps.parse(text)
    except ValueError:
        raise InputError(f"{option}: {text!r} is not an ISO-8601 time (e.g. 2026-11-22T10:00:00Z)") from None


def _duration(text: str, option: str) -> timedelta:
    try:
        return parse_duration(text)
    except ValueError:
        raise InputError(f"{option}: {text!r} is not a duration (e.g. 30s, 2m, 1h30m)") from None


def _approval_ids(spec: m.RolloutSpec) -> dict[str, tuple[str, ...]]:
    """Stage name -> ids of its approval gates (before and after)."""
    return {
        s.name: tuple(g.id for g in (*s.before, *s.after) if isinstance(g, m.Approval)) for s in spec.stages
    }


def _approvals(rollout: Rollout, raw: list[str], start: datetime) -> dict[str, datetime]:
    """`STAGE=TIME` or `APPROVAL-ID=TIME` (a staged run's: either name, ADR 0112); TIME is ISO-8601
    or `+DURATION` after --start."""
    by_stage = _approval_ids(rollout.spec)
    known = {i for ids in by_stage.values() for i in ids}
    seed_names = seed_approval_names(rollout.name, rollout.spec)
    granted = dict.fromkeys(rollout.approved, start)
    for item in raw:
        key, sep, when = item.partition("=")
        if not sep or not key or not when:
            raise InputError(f"--approve-at: {item!r} must be STAGE=TIME (TIME: ISO-8601 or +DURATION)")
        at = (
            start + _duration(when[1:], "--approve-at")
            if when.startswith("+")
            else _instant(when, "--approve-at")
        )
        key = seed_names.get(key, key)
        ids = by_stage.get(key) or ((key,) if key in known else ())
        if not ids:
            gated = ", ".join(sorted(s for s, i in by_stage.items() if i)) or "none"
            raise InputError(
                f"--approve-at: {key!r} is not a stage with an approval (stages with one: {gated})"
            )
        granted.update(dict.fromkeys(ids, at))
    return granted


def _failing(rollout: Rollout, fleet: m.Fleet, raw: list[str], start: datetime) -> frozenset[str]:
    """`--fail STAGE:CLUSTER`: the cluster must be in that stage of the frozen plan."""
    stages = {s.name: s.clusters for s in batching.freeze_plan(rollout.spec, fleet, start).stages}
    chosen = set()
    for item in raw:
        stage, sep, cluster = item.partition(":")
        if not sep or not stage or not cluster:
            raise InputError(f"--fail: {item!r} must be STAGE:CLUSTER")
        if stage not in stages:
            raise InputError(f"--fail: no stage {stage!r} (stages: {', '.join(stages)})")
        if cluster not in stages[stage]:
            members = ", ".join(stages[stage]) or "none"
            raise InputError(f"--fail: cluster {cluster!r} is not in stage {stage} (its clusters: {members})")
        chosen.add(cluster)
    return frozenset(chosen)


def _fleet_from_cluster(kubeconfig: Path) -> m.Fleet:
    """List memberclusters.fleetwave.io on the management cluster (a sync client)."""
    # Only --kubeconfig needs the Kubernetes client: `plan --fleet` starts without loading it.
    from fleetwave.kube import client as kubeclient  # noqa: PLC0415
    from fleetwave.kube import kinds, ops  # noqa: PLC0415

    res = kinds.resource("MemberCluster")
    config = _kubeconfig(kubeconfig)
    try:
        client = kubeclient.client(config)
        docs: list[object] = [obj.to_dict() for obj in client.list(res, namespace=ops.ALL_NAMESPACES)]
    except ops.StatusError as e:  # a plain 404 too: the group is not served without the CRD
        if ops.is_not_found(e):
            raise InputError(
                "--kubeconfig: memberclusters.fleetwave.io is not installed on that cluster "
                "(install the CRDs: `fleetwave crds | kubectl apply -f -`)"
            ) from None
        raise InputError(f"--kubeconfig: listing MemberClusters failed: {ops.message_of(e)}") from None
    except (kubeclient.ConfigError, OSError) as e:
        raise InputError(f"--kubeconfig {kubeconfig}: {e}") from None
    except ops.TransportError as e:
        raise InputError(f"--kubeconfig {kubeconfig}: cannot reach the API server: {e}") from None
    return fleet_from_docs(docs)


def _kubeconfig(path: Path) -> Any:
    from fleetwave.api import yamlsafe  # noqa: PLC0415
    from fleetwave.kube import client as kubeclient  # noqa: PLC0415

    try:
        return kubeclient.config_from_bytes(inputs.read_bytes(path, "--kubeconfig"))
    except yamlsafe.YamlError as e:
        raise InputError(f"--kubeconfig {path}: {e}") from None
    except (kubeclient.ConfigError, KeyError, TypeError, ValueError, AttributeError) as e:
        # lightkube reads the parsed document without checking its shape: name what is missing.
        detail = f"missing {e}" if isinstance(e, KeyError) else type(e).__name__
        raise InputError(f"--kubeconfig {path}: not a usable kubeconfig ({detail})") from None


def _load(file: Path, fleet_file: Path | None, kubeconfig: Path | None) -> tuple[Rollout, m.Fleet]:
    if (fleet_file is None) == (kubeconfig is None):
        raise InputError("give exactly one of --fleet FLEETFILE or --kubeconfig FILE")
    try:
        rollout = from_manifests(load_manifests(_read(file, "-f")))
    except (ManifestError, TranslateError) as e:
        raise InputError(f"{file}: {e}") from None
    try:
        fleet = fleet_from_yaml(_read(fleet_file, "--fleet")) if fleet_file else None
    except TranslateError as e:
        raise InputError(f"{fleet_file}: {e}") from None
    if fleet is None:
        assert kubeconfig is not None
        fleet = _fleet_from_cluster(kubeconfig)
    problems = selector_problems(rollout.spec, fleet, rollout.selector_paths)
    if problems:
        raise InputError(f"{file}: " + "; ".join(str(p) for p in problems))
    misplaced = stage_membership.problem(rollout.spec.stages, fleet, {}) if _staged_run(rollout) else ""
    if misplaced:  # the controller would fail the run's initialization (ADR 0112)
        raise InputError(f"{file}: {rollout.kind} {rollout.name} would fail to initialize: {misplaced}")
    return rollout, fleet


def _staged_run(rollout: Rollout) -> bool:
    return rollout.kind in ("ClusterStagedUpdateRun", "StagedUpdateRun")


def _when(value: str | None) -> str:
    return "-" if value is None else value.replace("T", " ").removesuffix("Z")


def _gate_line(gate: dict[str, Any]) -> tuple[str, str]:
    label = f"{gate['when']}: {gate['detail']}"
    state = gate["state"]
    if state == "pending":
        return label, "waiting for approval (pending)"
    if state in ("skipped", "notReached"):
        return label, "skipped (no clusters)" if state == "skipped" else "not reached"
    if gate["opensAt"] is None:
        return label, "waiting"
    return label, f"opens {_when(gate['opensAt'])}"


def _rows(stage: dict[str, Any]) -> list[tuple[str, str, str]]:
    """Before-gates, then the batches, then after-gates, then the stage's own start and finish."""
    gates = {
        when: [_gate_line(g) for g in stage["gates"] if g["when"] == when] for when in ("before", "after")
    }
    rows = [(label, "", state) for label, state in gates["before"]]
    for b in stage["batches"]:
        done = _when(b["end"]) if b["start"] else "not started"
        rows.append((f"batch {b['index'] + 1}: {', '.join(b['clusters'])}", _when(b["start"]), done))
    if not stage["batches"]:
        rows.append(("no clusters", "", ""))
    if stage.get("setAside"):
        rows.append((f"set aside (failed): {', '.join(stage['setAside'])}", "", ""))
    rows.extend((label, "", state) for label, state in gates["after"])
    start, end = stage["startedAt"] or stage["enteredAt"], stage["succeededAt"]
    rows.append((f"=> {stage['state']}", _when(start), _when(end)))
    return rows


def render_table(report: dict[str, Any], console: Console) -> None:
    r = report["rollout"]
    table = Table(
        title=f"{r['kind']}/{r['name']}: plan from {_when(report['start'])} UTC", title_justify="left"
    )
    for col in ("Stage", "Step", "Earliest start", "Done / opens"):
        table.add_column(col, no_wrap=True)
    for stage in report["stages"]:
        title = f"{stage['name']} ({len(stage['clusters'])}, max {stage['maxInFlight']} in flight)"
        for i, (step, start, end) in enumerate(_rows(stage)):
            table.add_row(title if i == 0 else "", step, start, end)
        table.add_section()
    console.print(table)
    if report["unmatched"]:
        console.print(f"Not in any stage: {', '.join(report['unmatched'])}")
    budget = report.get("failureBudget")
    if budget:
        limits = ", ".join(f"{k} {v}" for k, v in budget.items() if v is not None)
        console.print(f"Failure budget: {limits}; on failure: {report.get('onFailure', 'Halt')}")
    if report["outcome"] == "Blocked":
        console.print(f"[bold yellow]Blocked[/]: {report['blockedOn']}")
    elif report["outcome"] == "Failed":
        console.print(f"[bold red]Failed[/] at {_when(report['finishedAt'])} UTC: {report['failedOn']}")
    elif report["outcome"] == "RolledBack":
        console.print(f"[bold red]Failed[/]: {report['failedOn']}")
        for stage in report["rollback"]:
            console.print(
                f"  rollback {stage['name']}: {', '.join(stage['clusters'])} "
                f"({_when(stage['startedAt'])} - {_when(stage['succeededAt'])})"
            )
        console.print(
            f"[bold]RolledBack[/] at {_when(report['finishedAt'])} UTC: every cluster it updated is back on "
            "the previous revision (clusters it never reached are not touched)"
        )
    else:
        console.print(f"[bold]{report['outcome']}[/] at {_when(report['finishedAt'])} UTC")


def plan(
    file: Annotated[Path, typer.Option("-f", "--file", help="Manifests of the rollout to plan.")],
    fleet: Annotated[
        Path | None, typer.Option("--fleet", help="Fleet file (clusters: [{name, labels}]).")
    ] = None,
    kubeconfig: Annotated[
        Path | None, typer.Option("--kubeconfig", help="Read MemberClusters from this management cluster.")
    ] = None,
    start: Annotated[str | None, typer.Option("--start", help="ISO-8601 start time (default: now).")] = None,
    delivery_time: Annotated[str, typer.Option("--delivery-time", help="Time one cluster takes.")] = "2m",
    approve_at: Annotated[
        list[str] | None,
        typer.Option("--approve-at", help="STAGE=TIME (or APPROVAL-ID=TIME); TIME ISO-8601 or +DURATION."),
    ] = None,
    auto_approve: Annotated[
        bool, typer.Option("--auto-approve", help="Grant approvals when requested.")
    ] = False,
    fail: Annotated[
        list[str] | None,
        typer.Option(
            "--fail",
            help="STAGE:CLUSTER whose delivery fails (repeatable): see what the failure budget does.",
        ),
    ] = None,
    output: Annotated[str, typer.Option("-o", "--output", help="table, json or yaml.")] = "table",
) -> None:
    """Print when each stage, batch and gate of a rollout would happen.

    FILE: a ClusterPromotion, a ClusterProfile, or a (Cluster)StagedUpdateRun with its strategy.
    Fleet: --fleet FLEETFILE (`clusters: [{name, labels}]` or MemberClusters) or --kubeconfig.
    Assumed: --delivery-time per cluster, health checks pass, approvals pending unless granted,
    deliveries succeed except those named by --fail.
    A pending approval shows "waiting for approval (pending)" and the plan stops there (Blocked).
    -o json (or yaml) gives the same data; its schema is in the fleetwave documentation (plan).
    """
    try:
        if output not in ("table", "json", "yaml"):
            raise InputError(f"-o: {output!r} must be table, json or yaml")
        rollout, clusters = _load(file, fleet, kubeconfig)
        begin = _instant(start, "--start") if start else datetime.now(UTC).replace(microsecond=0)
        assumptions = timeline.Assumptions(
            delivery_time=_duration(delivery_time, "--delivery-time"),
            approvals=_approvals(rollout, approve_at or [], begin),
            approve_on_request=auto_approve,
            failing_clusters=_failing(rollout, clusters, fail or [], begin),
        )
    except InputError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    try:
        report = plan_report.build(rollout, clusters, begin, assumptions)
    except OverflowError:
        typer.echo("error: the timeline runs past the year 9999 (check --start and the delays)", err=True)
        raise typer.Exit(2) from None
    if output == "json":
        typer.echo(json.dumps(report, indent=2))
    elif output == "yaml":
        typer.echo(yaml.safe_dump(report, sort_keys=False, default_flow_style=False), nl=False)
    else:
        render_table(report, Console(width=200, highlight=False))
