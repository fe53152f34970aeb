"""What a staged update run's status writes cost the management API server, as its delivery ledger
was written before ADR 0136, since it, and since ADR 0137.

    PYTHONPATH=src .venv/bin/python bench/bench_status_write_cost.py [--clusters 100] [--rounds 3]
        [--ways tracked,atomic,implied]

A management API server + etcd (as `fleetwave local up` starts them) with fleetwave's CRDs. Each
trial writes one ClusterStagedUpdateRun's status the way a run over `--clusters` clusters in three
stages does: the frozen plan first, then one merge patch on /status per cluster delivered, adding
its ledger entry (`status.deliveries`) and its Started/Succeeded conditions in `stagesStatus` (a
list, so the whole list travels, as the controller sends it). No controller runs.

Three ways alternate, trial by trial, in one run (the CRD is replaced between trials):
- `tracked`: a CRD without `deliveries`/`deletions` (kept as unknown fields, so the server tracks
  every cluster key of the ledger in managedFields), each entry naming its index and hash;
- `atomic`: the CRD the models generate (the ledger one value, ADR 0136), the same entries;
- `implied`: that CRD, and entries at the run's snapshot without its hash (ADR 0137), as
  `ledger.dump` writes them today.
Reported per way: the API server's CPU seconds per write and the wall time of the writes (medians
over the trials), and the final object's bytes and its managedFields' bytes.
"""

from __future__ import annotations

import argparse
import copy
import datetime as dt
import json
import statistics
import time
from typing import Any

import bench_scale  # the fleet and process readers are shared
from fleetwave.api import crds
from fleetwave.api.models import ClusterStagedUpdateRun
from fleetwave.controllers.kubefleet import ledger
from fleetwave.kube import client as kubeclient
from fleetwave.kube import internals, kinds
from fleetwave.kube.status import merge_patch  # what the controller sends
from fleetwave.local import fleet
from fleetwave.mgmt import install

API = f"{kinds.GROUP}/{kinds.VERSION}"
CRD = f"{ClusterStagedUpdateRun.plural}.{kinds.GROUP}"
LEDGER_FIELDS = ("deliveries", "deletions")
STAGES = ("dev", "staging", "prod")
SNAPSHOT_INDEX, SNAPSHOT_HASH = "0", "h" * 64  # the run's snapshot
WAYS = ("tracked", "atomic", "implied")
Obj = dict[str, Any]


def crd(way: str) -> Obj:
    """The run's CRD as generated today, or without the ledger fields (`tracked`)."""
    out = crds.crd_for(ClusterStagedUpdateRun)
    if way == "tracked":
        status = out["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"]
        for name in LEDGER_FIELDS:
            del status["properties"][name]
    return out


def _t(second: int) -> str:
    when = dt.datetime(2026, 12, 1, tzinfo=dt.UTC) + dt.timedelta(seconds=second)
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def _condition(type_: str, reason: str, second: int) -> Obj:
    return {
        "type": type_,
        "status": "True",
        "reason": reason,
        "message": "",
        "observedGeneration": 1,
        "lastTransitionTime": _t(second),
    }


def _plan(clusters: list[str]) -> list[list[str]]:
    """Three stages of 20%, 30% and 50% of the clusters."""
    first, second = len(clusters) // 5, len(clusters) // 2
    return [clusters[:first], clusters[first:second], clusters[second:]]


def initial_status(clusters: list[str]) -> Obj:
    plan = _plan(clusters)
    return {
        "resourceSnapshotIndexUsed": "0",
        "policySnapshotIndexUsed": "0",
        "policyObservedClusterCount": len(clusters),
        "conditions": [_condition("Initialized", "UpdateRunInitializedSuccessfully", 0)],
        "stagesStatus": [
            {"stageName": name, "clusters": [{"clusterName": c} for c in members]}
            for name, members in zip(STAGES, plan, strict=True)
        ],
        "rollout": {
            "contentHash": "c" * 64,
            "stagesHash": "s" * 64,
            "startedAt": _t(0),
            "phase": "Progressing",
            "stages": [
                {"name": name, "clusters": members, "maxInFlight": max(len(members) // 10, 1), "started": []}
                for name, members in zip(STAGES, plan, strict=True)
            ],
        },
        "deliveries": {},
        "deletions": {},
    }


def delivered(status: Obj, cluster: str, second: int, way: str) -> Obj:
    """The status once `cluster` was applied and became available: its ledger entry and conditions."""
    out = copy.deepcopy(status)
    entry = ledger.Delivered(SNAPSHOT_INDEX, SNAPSHOT_HASH, _t(second), "ready", done_at=_t(second))
    out["deliveries"][cluster] = entry.dump(SNAPSHOT_HASH if way == "implied" else None)
    for stage in out["stagesStatus"]:
        for entry in stage["clusters"]:
            if entry["clusterName"] == cluster:
                entry["conditions"] = [
                    _condition("Started", "ClusterUpdatingStarted", second),
                    _condition("Succeeded", "ClusterUpdatingSucceeded", second),
                ]
    for stage in out["rollout"]["stages"]:
        if cluster in stage["clusters"]:
            stage["started"] = [*stage["started"], cluster]
    return out


def replace_crd(http: Any, way: str) -> None:
    body = crd(way)
    current = http.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{CRD}").json()
    body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
    http.put(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{CRD}", json=body).raise_for_status()
    time.sleep(5.0)  # the API server rebuilds the kind's handler from the new schema


def trial(http: Any, apiserver: int, way: str, name: str, clusters: list[str]) -> Obj:
    base = f"/apis/{API}/clusterstagedupdateruns"
    run = {
        "apiVersion": API,
        "kind": "ClusterStagedUpdateRun",
        "metadata": {"name": name},
        "spec": {"placementName": name, "stagedRolloutStrategyName": name},
    }
    http.post(base, json=run).raise_for_status()
    status = initial_status(clusters)
    merge = {"Content-Type": "application/merge-patch+json"}
    http.patch(f"{base}/{name}/status", json={"status": status}, headers=merge).raise_for_status()
    cpu, started = bench_scale.cpu_seconds([apiserver]), time.monotonic()
    for i, cluster in enumerate(clusters):
        fresh = delivered(status, cluster, i + 1, way)
        body = {"status": merge_patch(status, fresh)}
        http.patch(f"{base}/{name}/status", json=body, headers=merge).raise_for_status()
        status = fresh
    wall, cpu = time.monotonic() - started, bench_scale.cpu_seconds([apiserver]) - cpu
    stored = http.get(f"{base}/{name}").json()
    http.delete(f"{base}/{name}").raise_for_status()

    def size(value: Any) -> int:
        return len(json.dumps(value, separators=(",", ":")))

    return {
        "cpu_ms_per_write": 1e3 * cpu / len(clusters),
        "wall_ms_per_write": 1e3 * wall / len(clusters),
        "object_bytes": size(stored),
        "managed_fields_bytes": size(stored["metadata"].get("managedFields") or []),
    }


def run(args: argparse.Namespace, state: fleet.FleetState) -> dict[str, list[Obj]]:
    config = kubeclient.config_from_file(state.cluster(fleet.MANAGEMENT).kubeconfig)
    with kubeclient.client(config) as mgmt:
        install.install(mgmt)
    apiserver = next(p.pid for p in state.processes if p.name == f"{fleet.MANAGEMENT}/apiserver")
    clusters = [f"bench-scale/c-{i:04d}" for i in range(args.clusters)]
    results: dict[str, list[Obj]] = {way: [] for way in args.ways.split(",")}
    with internals.http(config, timeout=60) as http:
        for round_ in range(args.rounds):
            for way, trials in results.items():
                replace_crd(http, way)
                trials.append(trial(http, apiserver, way, f"cost-{way}-{round_}", clusters))
                print(way, json.dumps(trials[-1]), flush=True)
    return results


def report(results: dict[str, list[Obj]]) -> None:
    print("\nway | API server CPU per write | wall per write | object bytes | managedFields bytes")
    for way, trials in results.items():
        if not trials:
            continue
        med = {k: statistics.median(t[k] for t in trials) for k in trials[0]}
        print(
            f"{way} | {med['cpu_ms_per_write']:.2f} ms | {med['wall_ms_per_write']:.2f} ms | "
            f"{med['object_bytes']:.0f} | {med['managed_fields_bytes']:.0f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clusters", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--ways", default=",".join(WAYS), help=f"which of {', '.join(WAYS)}, in turn")
    args = parser.parse_args()
    bench_scale.on_a_management_cluster(
        "fleetwave-bench-status-cost-", lambda state: run(args, state), lambda results: report(results or {})
    )


if __name__ == "__main__":
    main()
