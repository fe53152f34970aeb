"""Fleet scale (issue 11): many registered clusters, many concurrent rollouts, one 2-core machine.

    .venv/bin/python bench/bench_scale.py [--sizes 100,250,500,1000] [--servers 20] [--promotions 10]
        [--staged-runs 2] [--budget 900] [--shards 1] [--ratio-trials 3]

Registrations alias onto `--servers` light member API servers (API server only, ADR 0066): every
registration is its own MemberCluster with its own kubeconfig Secret, and every delivery, health
read and status probe is a real request to a real server. All registrations of one server are in
the same stage (env=dev for the first 10% of servers, staging up to 40%, prod for the rest).

For each size N (ascending; registrations are added, earlier points' rollouts stay settled in the
cluster, so later points carry them too):
  1. ratio (`--ratio-trials`, default 3): a 3-stage promotion without maxUpdate (one ConfigMap) and a
     staged run with maxConcurrency 100% (a Namespace and a ConfigMap) over the N registrations,
     each timed per content revision against applying the same objects to the same registrations
     directly, stage by stage, every registration of a stage at once (issue 11's ratio at N); the
     staged run also against its delivered floor, the same applies made as a delivery makes them
     (`manifests.apply`: ownership label and annotation, version precondition) with no controller;
     each timed step starts after SETTLE seconds in which the controllers finish the step before;
  2. no load: one ClusterPromotion over the N clusters, 3 stages, maxUpdate 10%, until Succeeded;
  3. load: `--promotions` such promotions at once (each with a 2 s delay gate after dev) and
     `--staged-runs` ClusterStagedUpdateRuns over the same N clusters (3 stages, maxConcurrency 10%),
     until every one succeeded, within `--budget` seconds.
Reported per point: time of the single rollout and of the loaded batch, their ratio, the delay
gate's reaction under load (the gate's `until` -> the staging profile's first write with clusters,
as seen by a watch here), controller RSS (its process tree: main + health-check workers) and CPU,
management API server and etcd RSS, fleetwave objects in the management cluster, requests per
second served by the member API servers (their `apiserver_request_total`), and the writes the
management API server served during the loaded batch. A point that does not
finish within its budget is reported with its progress, and the curve stops there.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import concurrent.futures
import contextlib
import datetime as dt
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx2
from lightkube import AsyncClient, Client, codecs
from lightkube.resources.core_v1 import Event
from lightkube.types import on_error_retry

import bench_gates as bg
import summary_floor
import watch_lag
from fleetwave.delivery import manifests
from fleetwave.delivery.known_versions import KnownVersions
from fleetwave.delivery.target import MemberTarget
from fleetwave.kube import client as kubeclient
from fleetwave.kube import internals, kinds
from fleetwave.local import binaries, fleet, processes
from fleetwave.mgmt import install, registration

API = f"{kinds.GROUP}/{kinds.VERSION}"
NS = "default"
MEMBERS_NS = "bench-scale"
DELAY_SECONDS = 2
Obj = dict[str, Any]
METRICS_PORT = processes.free_port()


def histogram_totals(text: str, metric: str) -> dict[str, tuple[int, float]]:
    """(count, sum) of a per-controller histogram of the controller's /metrics text."""
    out: dict[str, tuple[int, float]] = {}
    for m in re.finditer(rf'^{metric}_(count|sum)\{{controller="([^"]+)"\}} (\S+)$', text, re.M):
        count, total = out.get(m.group(2), (0, 0.0))
        out[m.group(2)] = (
            (int(float(m.group(3))), total) if m.group(1) == "count" else (count, float(m.group(3)))
        )
    return out


def wait_leading(controller: subprocess.Popen[bytes], timeout: float = 120.0) -> None:
    """Until the controller leads (`fleetwave_leader 1`, or holds a shard): this benchmark measures a running
    controller, not one starting up. A delivery within a few seconds of the controller's start
    searches for leftovers a previous leader may have left (ADR 0121)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and controller.poll() is None:
        with contextlib.suppress(httpx2.HTTPError):
            text = httpx2.get(f"http://127.0.0.1:{METRICS_PORT}/metrics", timeout=5).text
            held = re.search(r"^fleetwave_shards_held ([1-9]\d*)(\.0)?$", text, re.M)  # with --shards
            if held or re.search(r"^fleetwave_leader 1(\.0)?$", text, re.M):
                return
        time.sleep(0.2)
    raise RuntimeError(f"the controller did not lead within {timeout:.0f} s")


def reconcile_seconds() -> dict[str, tuple[int, float]]:
    """Reconciles per controller so far: (count, seconds spent), from the controller's /metrics; the
    time keys waited for a worker goes to WAITS. Empty when the page could not be read."""
    text = _metrics_page()
    if text is None:
        return {}
    out = histogram_totals(text, "fleetwave_reconcile_duration_seconds")
    WAITS.update(histogram_totals(text, "fleetwave_event_to_reconcile_seconds"))
    for m in re.finditer(r'^fleetwave_gc_pause_seconds_(count|sum)\{generation="2"\} (\S+)$', text, re.M):
        GC[m.group(1)] = float(m.group(2))
    LAG.clear()
    for m in re.finditer(r'^fleetwave_event_loop_lag_seconds_bucket\{le="([^"]+)"\} (\S+)$', text, re.M):
        LAG[m.group(1)] = int(float(m.group(2)))
    for m in re.finditer(
        r'^fleetwave_reconcile_total\{controller="([^"]+)",result="([^"]+)"\} (\S+)$', text, re.M
    ):
        RESULTS[f"{m.group(1)}/{m.group(2)}"] = int(float(m.group(3)))
    return out


def _metrics_page() -> str | None:
    """The controller's /metrics; None after three reads of 30 s timed out. The controller's event
    loop serves it, and at 100 rollouts over 1,000 clusters that loop stood still for over 10 s:
    a single 10 s read lost a 100-minute run's table."""
    for _ in range(3):
        try:
            return httpx2.get(f"http://127.0.0.1:{METRICS_PORT}/metrics", timeout=30).text
        except httpx2.TimeoutException:
            continue
    return None


RESULTS: dict[str, int] = {}  # reconciles by controller/result, as last read
WAITS: dict[str, tuple[int, float]] = {}  # (keys taken, seconds they waited) by controller, as last read
GC: dict[str, float] = {}  # full collections of the controller's GC: count and seconds, as last read
LAG: dict[str, int] = {}  # the event loop's lag samples by cumulative bucket bound, as last read


def lag_quantiles(before: dict[str, int], after: dict[str, int]) -> dict[str, str]:
    """The loop-lag bucket bound under which 50% / 99% of the samples taken between two reads fell
    ("+Inf" past the last bound): is the loop busy when a gate opens?"""
    bounds = sorted(after, key=float)
    total = after.get("+Inf", 0) - before.get("+Inf", 0)
    out = {}
    for name, q in (("p50", 0.5), ("p99", 0.99)):
        out[name] = (
            next((b for b in bounds if after[b] - before.get(b, 0) >= q * total), "+Inf") if total else "n/a"
        )
    out["samples"] = str(total)
    return out


def env_of(server: int, servers: int) -> str:
    if server < max(1, servers // 10):
        return "dev"
    if server < max(2, servers * 4 // 10):
        return "staging"
    return "prod"


def light_fleet(state_dir: Path, servers: int, bins: binaries.Binaries) -> fleet.FleetState:
    """A management cluster and `servers` light member API servers (no workload controllers)."""
    members: dict[str, dict[str, str]] = {f"member-{i + 1}": {} for i in range(servers)}
    return fleet.up(
        state_dir,
        members=members,
        now=dt.datetime.now(dt.UTC),
        bin_dir=bins.directory,
        full_members=0,
        members_etcd=True,  # as a management cluster has, its etcd its own (ADR 0066)
    )


def on_a_management_cluster(
    prefix: str, measure: Callable[[fleet.FleetState], Any], report: Callable[[Any], None]
) -> None:
    """`measure` on a management cluster (and one light member) started for it; then `report` what
    it returned (None if it failed) and stop the cluster: the frame of the single-server benchmarks."""
    bins = binaries.ensure()
    print(f"# {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC, load {os.getloadavg()}", flush=True)
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        state_dir = Path(tmp) / "fleet"
        state = light_fleet(state_dir, 1, bins)
        result = None
        try:
            result = measure(state)
        finally:
            report(result)
            fleet.down(state_dir)


def register_upto(
    mgmt_kubeconfig: str, servers: list[fleet.ClusterInfo], start: int, stop: int, sizes: list[int]
) -> None:
    """Registrations start..stop-1, round-robin over the servers, labelled with every point they
    belong to (`p<N>: "y"` when their index is below N)."""
    kubeconfigs = [Path(s.kubeconfig).read_bytes() for s in servers]
    local = threading.local()

    def one(i: int) -> None:
        if not hasattr(local, "client"):
            local.client = kubeclient.client(kubeclient.config_from_file(mgmt_kubeconfig))
        server = i % len(servers)
        labels = {"env": env_of(server, len(servers)), **{f"p{n}": "y" for n in sizes if i < n}}
        registration.register(
            local.client,
            name=f"c-{i:04d}",
            namespace=MEMBERS_NS,
            kubeconfig=kubeconfigs[server],
            labels=labels,
        )

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        list(pool.map(one, range(start, stop)))


def content(name: str) -> Obj:
    text = json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": NS}})
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": f"{name}-policy", "namespace": NS},
        "data": {"content.yaml": text},
    }


def promotion(name: str, point: int, *, gated: bool) -> Obj:
    def stage(stage_name: str, env: str, trigger: Obj | None) -> Obj:
        out: Obj = {"name": stage_name, "clusterSelector": {"matchLabels": {"env": env, f"p{point}": "y"}}}
        return {**out, "trigger": trigger} if trigger else out

    dev = {"auto": {"delay": f"{DELAY_SECONDS}s"}} if gated else {"auto": {}}
    return {
        "apiVersion": API,
        "kind": "ClusterPromotion",
        "metadata": {"name": name},
        "spec": {
            "profileSpec": {
                "maxUpdate": "10%",
                "policyRefs": [{"kind": "ConfigMap", "name": f"{name}-policy", "namespace": NS}],
            },
            "stages": [
                stage("dev", "dev", dev),
                stage("staging", "staging", {"auto": {}}),
                stage("production", "prod", None),
            ],
        },
    }


def staged_docs(name: str, point: int) -> list[Obj]:
    """A placement of one namespace (with a ConfigMap), a 3-stage strategy, and a run of snapshot 0."""
    stages = [
        {
            "name": env,
            "labelSelector": {"matchLabels": {"env": env, f"p{point}": "y"}},
            "maxConcurrency": "10%",
        }
        for env in ("dev", "staging", "prod")
    ]
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings", "namespace": name}},
        {
            "apiVersion": API,
            "kind": "ClusterResourcePlacement",
            "metadata": {"name": name},
            "spec": {
                "resourceSelectors": [{"group": "", "version": "v1", "kind": "Namespace", "name": name}],
                "policy": {"placementType": "PickAll", "affinity": _affinity(point)},
                "strategy": {"type": "External"},
            },
        },
        {
            "apiVersion": API,
            "kind": "ClusterStagedUpdateStrategy",
            "metadata": {"name": name},
            "spec": {"stages": stages},
        },
    ]


def _affinity(point: int) -> Obj:
    term = {"labelSelector": {"matchLabels": {f"p{point}": "y"}}}
    return {
        "clusterAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"clusterSelectorTerms": [term]}
        }
    }


def run_doc(name: str) -> Obj:
    return {
        "apiVersion": API,
        "kind": "ClusterStagedUpdateRun",
        "metadata": {"name": name},
        "spec": {"placementName": name, "resourceSnapshotIndex": "0", "stagedRolloutStrategyName": name},
    }


# --- observation ---------------------------------------------------------------------------------


def _proc_children(pid: int) -> list[int]:
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(OSError):
            out += [int(c) for c in (task / "children").read_text().split()]
    return out


def tree(pid: int) -> list[int]:
    pids, todo = [], [pid]
    while todo:
        p = todo.pop()
        pids.append(p)
        todo += _proc_children(p)
    return pids


def rss_bytes(pids: list[int]) -> int:
    total = 0
    for p in pids:
        try:
            m = re.search(r"VmRSS:\s+(\d+) kB", Path(f"/proc/{p}/status").read_text())
        except OSError:
            continue
        total += int(m.group(1)) * 1024 if m else 0
    return total


def cpu_seconds(pids: list[int]) -> float:
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for p in pids:
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / tick  # utime + stime
    return total


class Sampler:
    """Peak RSS of the controller tree and the management API server and etcd, every second."""

    def __init__(self, controller: int, apiserver: int, etcd: int) -> None:
        self.pids = {"controller": controller, "apiserver": apiserver, "etcd": etcd}
        self.peak = dict.fromkeys(self.pids, 0)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        while not self._stop.is_set():
            for name, pid in self.pids.items():
                self.peak[name] = max(
                    self.peak[name], rss_bytes(tree(pid) if name == "controller" else [pid])
                )
            self._stop.wait(1.0)


def member_requests(servers: list[fleet.ClusterInfo]) -> float:
    """Requests the member API servers have served so far (sum of apiserver_request_total)."""
    total = 0.0
    for s in servers:
        with internals.http(kubeclient.config_from_file(s.kubeconfig), timeout=10) as http:
            text = http.get("/metrics").text
        total += sum(
            float(m.group(1)) for m in re.finditer(r"^apiserver_request_total\{[^}]*\} (\S+)$", text, re.M)
        )
    return total


def requests_by_kind(kubeconfigs: list[str]) -> dict[str, float]:
    """Requests the API servers have served so far, by verb and resource ("GET configmaps")."""
    out: dict[str, float] = collections.defaultdict(float)
    for kubeconfig in kubeconfigs:
        with internals.http(kubeclient.config_from_file(kubeconfig), timeout=10) as http:
            text = http.get("/metrics").text
        for m in re.finditer(r"^apiserver_request_total\{([^}]*)\} (\S+)$", text, re.M):
            labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
            resource = "/".join(x for x in (labels.get("resource"), labels.get("subresource")) if x)
            out[f"{labels.get('verb', '?')} {resource or labels.get('component', '?')}"] += float(m.group(2))
        for m in re.finditer(r"^apiserver_watch_events_total\{([^}]*)\} (\S+)$", text, re.M):
            labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
            out[f"watch-event {labels.get('resource', '?')}"] += float(m.group(2))
    return out


def _requests_text(before: dict[str, float], after: dict[str, float], n: int) -> str:
    """The requests made between two readings, per registration, the most frequent first."""
    moved = {k: v - before.get(k, 0.0) for k, v in after.items() if v - before.get(k, 0.0) >= 1}
    ranked = sorted(moved.items(), key=lambda kv: -kv[1])
    return ", ".join(f"{k} {v / n:.2f}" for k, v in ranked)


async def _mark_requests(sources: dict[str, list[str]]) -> dict[str, dict[str, float]]:
    """The requests each side's API servers ("member", "management") served so far."""
    return {side: await asyncio.to_thread(requests_by_kind, configs) for side, configs in sources.items()}


async def _print_requests(marked: dict[str, dict[str, float]], sources: dict[str, list[str]], n: int) -> None:
    now = await _mark_requests(sources)
    for side, before in marked.items():
        print(f"  {side} requests per registration: {_requests_text(before, now[side], n)}", flush=True)


def management_writes(state: fleet.FleetState) -> float:
    """Writes the management API server has served so far (PATCH, POST, PUT, DELETE): each is an
    etcd write and a watch event for every controller watching the kind."""
    with internals.http(
        kubeclient.config_from_file(state.cluster(fleet.MANAGEMENT).kubeconfig), timeout=10
    ) as http:
        text = http.get("/metrics").text
    return sum(
        float(m.group(2))
        for m in re.finditer(r"^apiserver_request_total\{([^}]*)\} (\S+)$", text, re.M)
        if re.search(r'verb="(PATCH|POST|PUT|DELETE|APPLY)"', m.group(1))
    )


def terminated_watchers(state: fleet.FleetState) -> dict[str, float]:
    """Watchers the management API server has closed for not keeping up, by resource, so far: while
    it waits on a slow watcher it delays that kind's events to every watcher."""
    with internals.http(
        kubeclient.config_from_file(state.cluster(fleet.MANAGEMENT).kubeconfig), timeout=10
    ) as http:
        text = http.get("/metrics").text
    out: dict[str, float] = {}
    for m in re.finditer(r"^apiserver_terminated_watchers_total\{([^}]*)\} (\S+)$", text, re.M):
        resource = re.search(r'resource="([^"]*)"', m.group(1))
        out[resource.group(1) if resource else m.group(1)] = float(m.group(2))
    return out


def watch_traffic(state: fleet.FleetState) -> dict[str, list[float]]:
    """Watch events the management API server has sent so far, by resource: [events, bytes]. Every
    watcher of a kind gets each of its events, so a kind whose events are many or large keeps its
    watchers (the controller's informers, this benchmark's watches) decoding, and a watcher that
    falls behind delays that kind's next events to every watcher."""
    with internals.http(
        kubeclient.config_from_file(state.cluster(fleet.MANAGEMENT).kubeconfig), timeout=10
    ) as http:
        text = http.get("/metrics").text
    out: dict[str, list[float]] = collections.defaultdict(lambda: [0.0, 0.0])
    for name, slot in (("apiserver_watch_events_total", 0), ("apiserver_watch_events_sizes_sum", 1)):
        for m in re.finditer(rf"^{name}\{{([^}}]*)\}} (\S+)$", text, re.M):
            resource = re.search(r'resource="([^"]*)"', m.group(1))
            out[resource.group(1) if resource else "?"][slot] += float(m.group(2))
    return dict(out)


def _traffic_between(before: dict[str, list[float]], after: dict[str, list[float]]) -> dict[str, list[float]]:
    """[events, MiB] per resource between two readings, the largest first."""
    moved = {
        k: [v[0] - before.get(k, [0.0, 0.0])[0], (v[1] - before.get(k, [0.0, 0.0])[1]) / 2**20]
        for k, v in after.items()
    }
    ranked = sorted(((k, v) for k, v in moved.items() if v[0] >= 1), key=lambda kv: -kv[1][1])
    return {k: [round(v[0]), round(v[1], 1)] for k, v in ranked}


def member_events(client: Client) -> dict[str, int]:
    """The controller's Events about MemberClusters, by reason and the start of their message (a
    member that flipped to not ready under load shows here, with the probe's failure)."""
    out: collections.Counter[str] = collections.Counter()
    for event in client.list(Event, namespace=MEMBERS_NS):
        if event.involvedObject.kind == "MemberCluster":
            out[f"{event.reason}: {(event.message or '')[:60]}"] += event.count or 1
    return dict(out.most_common(8))


def object_counts(client: Client) -> dict[str, int]:
    """How many of each kind exist; -1 where the list did not answer in time. Listed in chunks: at
    100,000 summaries one list of them all is gigabytes, and timed out on the loaded API server."""
    out = {}
    for kind in (
        "MemberCluster",
        "ClusterPromotion",
        "ClusterProfile",
        "ClusterSummary",
        "ClusterStagedUpdateRun",
    ):
        namespace = "*" if kind in ("MemberCluster", "ClusterSummary") else None
        try:
            out[kind] = sum(1 for _ in client.list(kinds.resource(kind), namespace=namespace, chunk_size=500))
        except httpx2.TimeoutException:
            out[kind] = -1
    return out


def _delay_until(rollout: Obj) -> str | None:
    """The dev stage's delay gate's `until` in a promotion's engine record."""
    dev: Obj = next((s for s in rollout.get("stages") or [] if s.get("name") == "dev"), {})
    until = next((g.get("until") for g in dev.get("gates") or [] if g.get("kind") == "Delay"), None)
    return str(until) if until else None


def _changed_parts(before: Obj, after: Obj) -> list[str]:
    """The parts of an object that differ between two versions: spec, metadata's and status's keys."""
    changed = ["spec"] if before.get("spec") != after.get("spec") else []
    for part in ("metadata", "status"):
        old, new = before.get(part) or {}, after.get(part) or {}
        skip = {"resourceVersion", "generation", "managedFields"} if part == "metadata" else set()
        changed += [f"{part}.{k}" for k in _differing_keys(old, new, skip)]
    return changed


def _differing_keys(old: Obj, new: Obj, skip: set[str] | frozenset[str] = frozenset()) -> list[str]:
    """The keys, sorted, whose values differ between two mappings (one missing counts), but `skip`."""
    return sorted(k for k in (set(old) | set(new)) - skip if old.get(k) != new.get(k))


def _promotion_parts(before: Obj, after: Obj) -> list[str]:
    """What a promotion event changed, down to the keys of its stages (in `status.stages` and in its
    rollout record): which of its status writes carry a transition and which only progress."""
    old, new = before.get("status") or {}, after.get("status") or {}
    out = [p for p in _changed_parts(before, after) if p not in ("status.rollout", "status.stages")]
    out += _stage_keys("status.stages", old.get("stages"), new.get("stages"))
    old_record, new_record = old.get("rollout") or {}, new.get("rollout") or {}
    out += [f"rollout.{k}" for k in _differing_keys(old_record, new_record, {"stages"})]
    out += _stage_keys("rollout.stages", old_record.get("stages"), new_record.get("stages"))
    return out


def _stage_keys(prefix: str, old: Any, new: Any) -> list[str]:
    """The keys that differ in any stage of two lists of stages (the list's length, if that differs)."""
    old, new = list(old or []), list(new or [])
    if len(old) != len(new):
        return [f"{prefix}[]"]
    keys: set[str] = set()
    for a, b in zip(old, new, strict=True):
        keys.update(_differing_keys(a, b))
    return [f"{prefix}.{k}" for k in sorted(keys)]


class Watch:
    """Stage profiles' first writes with clusters, and promotion/run completion, as events arrive."""

    def __init__(self, client: AsyncClient) -> None:
        self.client = client
        self.first_write: dict[str, float] = {}  # profile name -> receive time
        self.done: dict[str, float] = {}  # promotion or run name -> time seen Succeeded
        self.promotions: dict[str, Obj] = {}
        self.gate_seen: dict[str, float] = {}  # promotion -> receive time of the status naming its delay gate
        self.status_seen: dict[str, list[float]] = {}  # promotion -> receive time of each of its events
        self.changed = asyncio.Event()
        self.tasks: list[asyncio.Task[None]] = []
        self.profiles: dict[str, Obj] = {}  # the last version of each profile seen
        # What each ClusterProfile event changed over the version before it ("spec", "status.rollout"...).
        self.profile_changes: collections.Counter[str] = collections.Counter()
        # The same for each promotion event, down to its stages' keys (`_promotion_parts`).
        self.promotion_changes: collections.Counter[str] = collections.Counter()
        # (receive time, resourceVersion) of every promotion event, and of every profile event with
        # its profile's name: how far the profiles' stream ran behind the promotions' (`watch_lag`).
        self.promotion_seen: list[watch_lag.Seen] = []
        self.profile_seen: list[tuple[float, int, str]] = []

    def start(self) -> None:
        self.tasks = [
            asyncio.create_task(self._profiles()),
            asyncio.create_task(self._promotions()),
            asyncio.create_task(self._runs()),
        ]

    async def _profiles(self) -> None:
        async for _, obj in self.client.watch(kinds.resource("ClusterProfile"), on_error=on_error_retry):
            received = time.time()
            if (obj.spec or {}).get("clusterRefs"):
                self.first_write.setdefault(obj.metadata.name, received)
            self.profile_seen.append((received, _revision(obj), obj.metadata.name))
            body = obj.to_dict()
            before = self.profiles.get(obj.metadata.name)
            self.profiles[obj.metadata.name] = body
            if before is not None:
                self.profile_changes[" ".join(_changed_parts(before, body)) or "nothing"] += 1

    async def _promotions(self) -> None:
        async for _, obj in self.client.watch(kinds.resource("ClusterPromotion"), on_error=on_error_retry):
            body = obj.to_dict()
            before = self.promotions.get(obj.metadata.name)
            if before is not None:
                self.promotion_changes[" ".join(_promotion_parts(before, body)) or "nothing"] += 1
            self.promotions[obj.metadata.name] = body
            self.status_seen.setdefault(obj.metadata.name, []).append(time.time())
            self.promotion_seen.append((time.time(), _revision(obj)))
            rollout = (obj.status or {}).get("rollout") or {}
            if _delay_until(rollout) is not None:
                self.gate_seen.setdefault(obj.metadata.name, time.time())
            if rollout.get("phase") == "Succeeded":
                self.done.setdefault(obj.metadata.name, time.time())
                self.changed.set()

    async def _runs(self) -> None:
        async for _, obj in self.client.watch(
            kinds.resource("ClusterStagedUpdateRun"), on_error=on_error_retry
        ):
            conditions = (obj.status or {}).get("conditions") or []
            if any(c.get("type") == "Succeeded" and c.get("status") == "True" for c in conditions):
                self.done.setdefault(obj.metadata.name, time.time())
                self.changed.set()

    async def until_done(self, names: list[str], budget: float) -> bool:
        deadline = time.monotonic() + budget
        while not all(n in self.done for n in names):
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            self.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), min(left, 5.0))
        return True

    def gate_reactions(self, names: list[str]) -> list[tuple[float, float, list[float]]]:
        """Per gated promotion: the gate's reaction, how long after the gate's `until` the status
        naming the gate was seen here (positive: the gate was recorded only after it had opened),
        and when the promotion's own writes were seen between its `until` and the reaction: a pass
        that began before the gate opened, finishing first (its status write), delays the one that
        opens it."""
        out = []
        for name in names:
            until = _delay_until((self.promotions.get(name, {}).get("status") or {}).get("rollout") or {})
            seen = self.first_write.get(f"{name}-staging")
            if until and seen:
                at = dt.datetime.fromisoformat(until.replace("Z", "+00:00")).timestamp()
                between = [t - at for t in self.status_seen.get(name, []) if at <= t <= seen]
                out.append((seen - at, self.gate_seen.get(name, at) - at, between))
        return out

    def gate_epochs(self, names: list[str]) -> dict[str, list[float]]:
        """Per gated promotion: its gate's `until` and when its next stage's profile was seen (epoch
        seconds), to line up with the controller's log of its passes."""
        out = {}
        for name in names:
            until = _delay_until((self.promotions.get(name, {}).get("status") or {}).get("rollout") or {})
            seen = self.first_write.get(f"{name}-staging")
            if until and seen:
                at = dt.datetime.fromisoformat(until.replace("Z", "+00:00")).timestamp()
                out[name] = [round(at, 3), round(seen, 3)]
        return out

    def profile_lag(self, since: float, names: list[str], raw: Path | None = None) -> dict[str, Any]:
        """How far the profiles' stream ran behind the promotions' from `since` (ms): p50, p99 and
        the most of every profile event, and of each gate's measured event (its next stage's first
        write with clusters), slowest first: a gate seen late because the server's profile watch
        fell behind, not because the write was late, shows here."""
        if raw is not None:  # every event as received, for `watch_lag.py` to set beside the controller's
            raw.write_text(json.dumps({"promotions": self.promotion_seen, "profiles": self.profile_seen}))
        reached = watch_lag.first_reached(self.promotion_seen)
        lags = [watch_lag.lag(reached, (t, rv)) for t, rv, _ in self.profile_seen if t >= since]
        known = [x for x in lags if x is not None]
        gates: list[tuple[str, int]] = []
        for name in names:
            seen = self.first_write.get(f"{name}-staging")
            event = next((e for e in self.profile_seen if e[0] == seen and e[2] == f"{name}-staging"), None)
            late = None if event is None else watch_lag.lag(reached, event[:2])
            if late is not None:
                gates.append((name, round(late * 1000)))
        windows: dict[int, list[float]] = {}
        for (t, _, _), late in zip((e for e in self.profile_seen if e[0] >= since), lags, strict=True):
            if late is not None:
                windows.setdefault(int((t - since) // LAG_WINDOW), []).append(late)
        return {
            "events": len(lags),
            # Per LAG_WINDOW seconds of the batch: [its start (s), events, their p99 lag (ms)].
            "windows": [
                [k * LAG_WINDOW, len(v), round(pct(v, 0.99) * 1000)] for k, v in sorted(windows.items())
            ],
            "p50_ms": round(pct(known, 0.5) * 1000) if known else None,
            "p99_ms": round(pct(known, 0.99) * 1000) if known else None,
            "max_ms": round(max(known) * 1000) if known else None,
            "gates_slowest": sorted(gates, key=lambda g: -g[1])[:8],
        }

    def stop(self) -> None:
        for task in self.tasks:
            task.cancel()


LAG_WINDOW = 10  # seconds of the loaded batch per window of `Watch.profile_lag`


def _revision(obj: Any) -> int:
    """An event's resourceVersion as the integer it is (an etcd revision; -1 if it is not one)."""
    try:
        return int(obj.metadata.resourceVersion)
    except (TypeError, ValueError):
        return -1


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))] if ordered else float("nan")


# --- the ratio at N: a rollout against applying the same content directly ----------------------


def stage_members(n: int, servers: int) -> dict[str, list[int]]:
    """Registration indexes below `n` by stage, in the order the rollouts take them."""
    out: dict[str, list[int]] = {"dev": [], "staging": [], "prod": []}
    for i in range(n):
        out[env_of(i % servers, servers)].append(i)
    return out


def ratio_payload(name: str, trial: int) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": NS},
        "data": {"trial": str(trial)},
    }


def ratio_promotion(name: str, point: int) -> Obj:
    """3 stages over the point's registrations, no maxUpdate: each stage delivers to all at once."""
    body = promotion(name, point, gated=False)
    del body["spec"]["profileSpec"]["maxUpdate"]
    return body


def ratio_policy(name: str, trial: int) -> Obj:
    text = json.dumps(ratio_payload(name, trial))
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": f"{name}-policy", "namespace": NS},
        "data": {"content.yaml": text},
    }


async def _promotion_revision(
    client: AsyncClient, name: str, trial: int, old: str | None
) -> tuple[float, str]:
    """(seconds from the content edit to the promotion Succeeded on it, its content hash)."""
    resource = kinds.resource("ClusterPromotion")
    t0 = time.monotonic()
    await client.apply(codecs.from_dict(ratio_policy(name, trial)), force=True)
    async for _, obj in client.watch(resource, fields={"metadata.name": name}, on_error=on_error_retry):
        rollout = (obj.to_dict().get("status") or {}).get("rollout") or {}
        if rollout.get("contentHash") not in (None, old) and rollout.get("phase") == "Succeeded":
            return time.monotonic() - t0, str(rollout["contentHash"])
    raise RuntimeError("watch ended")


class _Timeline:
    """When each stage of a promotion trial reached each step (ms since the content edit): its
    profile pinned the new content, its summaries were written with it, and they reported it Ready
    (first .. last of the stage): where the trial's time goes between the stages."""

    def __init__(self, client: AsyncClient, name: str) -> None:
        self.client, self.name = client, name
        self.t0 = time.monotonic()
        self.old: str | None = None
        self.seen: dict[tuple[str, str], list[float]] = collections.defaultdict(list)
        self._done: set[tuple[str, str, str]] = set()
        self._tasks: list[asyncio.Task[None]] = []

    def start(self, old: str | None) -> None:
        self.t0, self.old = time.monotonic(), old
        self.seen.clear()
        self._done.clear()
        if not self._tasks:
            for kind in ("ClusterProfile", "ClusterSummary"):
                self._tasks.append(asyncio.create_task(self._follow(kind)))

    def _mark(self, stage: str, step: str, who: str) -> None:
        if (stage, step, who) not in self._done:
            self._done.add((stage, step, who))
            self.seen[(stage, step)].append((time.monotonic() - self.t0) * 1000)

    async def _follow(self, kind: str) -> None:
        prefix = f"{self.name}-"
        resource: Any = kinds.resource(kind)
        scope: dict[str, Any] = {"namespace": "*"} if kind == "ClusterSummary" else {}
        async for _, obj in self.client.watch(resource, on_error=on_error_retry, **scope):
            raw = obj.to_dict()
            meta = raw.get("metadata") or {}
            annotations = meta.get("annotations") or {}
            if kind == "ClusterProfile":
                stage = str(meta.get("name", ""))
                wanted = annotations.get("fleetwave.io/pinned-content-hash")
                if stage.startswith(prefix) and wanted not in (None, self.old):
                    self._mark(stage[len(prefix) :], "profile", stage)
                continue
            profile = str((meta.get("labels") or {}).get("fleetwave.io/cluster-profile", ""))
            wanted = annotations.get("fleetwave.io/content-hash")
            if not profile.startswith(prefix) or wanted in (None, self.old):
                continue
            stage, who = profile[len(prefix) :], str(meta.get("name"))
            self._mark(stage, "written", who)
            status = raw.get("status") or {}
            ready = any(
                c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or []
            )
            if ready and status.get("observedContentHash") == wanted:
                self._mark(stage, "ready", who)

    def text(self) -> str:
        out = []
        for stage in ("dev", "staging", "production"):
            parts = []
            for step in ("profile", "written", "ready"):
                times = self.seen.get((stage, step)) or []
                if times:
                    parts.append(f"{step} {min(times):.0f}..{max(times):.0f} ({len(times)})")
            out.append(f"{stage}: " + ", ".join(parts))
        return "; ".join(out)

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


async def _stage_by_stage(stages: dict[str, list[int]], deliver: Callable[[int], Awaitable[None]]) -> float:
    """Seconds to `deliver` to every registration of a stage at once, stage after stage."""
    t0 = time.monotonic()
    for members in stages.values():
        await asyncio.gather(*(deliver(i) for i in members))
    return time.monotonic() - t0


async def _measured(state: fleet.FleetState, what: str, step: Awaitable[float]) -> float:
    """`step`'s seconds, with the CPU it cost the fleet and this benchmark printed: the direct apply is
    CPU-bound on a small machine too, and what a rollout adds is read against it."""
    others, own = fleet_cpu(state), time.process_time()
    seconds = await step
    spent, own = _cpu_text(others, fleet_cpu(state)), time.process_time() - own
    print(f"  CPU of the fleet in {what} ({seconds:.2f} s): {spent}, this benchmark {own:.2f} s")
    return seconds


async def _direct(servers: list[AsyncClient], stages: dict[str, list[int]], docs: list[Obj]) -> float:
    """The same objects applied to every registration's server (each registration its own request,
    as its delivery is), all of a stage at once, stage after stage. ConfigMaps and Namespaces are
    ready once they exist, so a stage is done when its applies have returned."""

    async def deliver(index: int) -> None:
        server = servers[index % len(servers)]
        for doc in docs:  # in order, as a delivery's waves: a namespace before what it holds
            await server.apply(codecs.from_dict(doc), force=True)

    return await _stage_by_stage(stages, deliver)


async def _direct_measured(
    state: fleet.FleetState, servers: list[AsyncClient], stages: dict[str, list[int]], docs: list[Obj]
) -> float:
    return await _measured(state, "the direct apply", _direct(servers, stages, docs))


# The inventory the staged run's delivered floor applies under (one for every registration, as a
# placement's is the same on every cluster).
DELIVERED_INVENTORY = "bench/staged-run-floor"


async def _delivered(
    state: fleet.FleetState, stages: dict[str, list[int]], docs: list[Obj], known: KnownVersions
) -> float:
    """`_direct_measured`, each registration's objects applied as a delivery applies them
    (`manifests.apply`: the inventory label, the owner annotation, over the version its last apply
    returned) with no controller: what the staged run's member applies cost on their own."""
    targets = [MemberTarget.from_file(m.name, m.kubeconfig) for m in state.members]

    async def deliver(index: int) -> None:
        target = targets[index % len(targets)]
        report = await manifests.apply(target, docs, inventory=DELIVERED_INVENTORY, known=known)
        if not report.ok:
            raise RuntimeError("the delivered floor's apply failed: " + "; ".join(report.errors))

    return await _measured(state, "the delivered floor", _stage_by_stage(stages, deliver))


FLOOR_NS = "bench-scale-floor"


class ApiServerProfiles:
    """CPU profiles of API servers, each taken over one timed step of a ratio trial
    (`--apiserver-profiles DIR`): the promotion's and its ClusterSummary floor's, of the management
    API server and of one member API server, to be merged and compared (`go tool pprof -top
    DIR/management-promotion-*.pprof`). Off (`into` None): nothing is asked."""

    SECONDS = 2  # pprof's unit is the second; a step at 100 registrations takes ~1-2 s

    def __init__(self, servers: dict[str, str], into: Path | None) -> None:
        self.servers, self.into = servers, into  # servers: label -> kubeconfig

    def during(self, step: str, trial: int) -> asyncio.Future[Any] | None:
        """Start one profile of `step` now; awaited before the next step, which it would count."""
        if self.into is None:
            return None
        into = self.into
        return asyncio.ensure_future(
            asyncio.gather(
                *(
                    self._take(k, into / f"{label}-{step}-{trial:02d}.pprof")
                    for label, k in self.servers.items()
                )
            )
        )

    async def _take(self, kubeconfig: str, path: Path) -> None:
        config = kubeclient.config_from_file(kubeconfig)
        async with internals.async_http(config, timeout=self.SECONDS + 10.0) as http:
            response = await http.get("/debug/pprof/profile", params={"seconds": self.SECONDS})
            response.raise_for_status()
        await asyncio.to_thread(_write, path, response.content)


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


async def _profiled(task: asyncio.Future[Any] | None) -> None:
    if task is not None:
        await task


def summary_floor_stages(
    name: str, stages: dict[str, list[int]], servers: int
) -> dict[str, list[tuple[str, int]]]:
    """The promotion's stage profiles -> (cluster key, member server index) of their clusters."""
    stage_of = summary_floor.STAGE_OF_ENV
    return {
        f"{name}-{stage_of[env]}": [(f"{MEMBERS_NS}/c-{i:04d}", i % servers) for i in members]
        for env, members in stages.items()
    }


async def _with_records(
    management: AsyncClient, servers: list[AsyncClient], stages: dict[str, list[int]], doc: Obj, trial: int
) -> float:
    """`_direct` plus the two management writes per cluster a promotion's shape makes (its
    ClusterSummary written, then its status), as plain ConfigMap writes in FLOOR_NS that no
    controller follows: record -> member apply -> record's update, each registration of a stage at
    once. What no promotion can beat on this machine, whatever its controller does."""

    async def deliver(i: int) -> None:
        record = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": f"floor-{i:04d}", "namespace": FLOOR_NS},
            "data": {"trial": str(trial), "state": "Provisioning"},
        }
        await management.apply(codecs.from_dict(record), force=True)
        await servers[i % len(servers)].apply(codecs.from_dict(doc), force=True)
        record["data"] = {"trial": str(trial), "state": "Provisioned"}
        await management.apply(codecs.from_dict(record), force=True)

    t0 = time.monotonic()
    for members in stages.values():
        await asyncio.gather(*(deliver(i) for i in members))
    return time.monotonic() - t0


async def _ratio_setup(client: AsyncClient, name: str, staged: str, n: int) -> tuple[str, int]:
    """The floors' namespace and CRD, the promotion and the staged run at their first revision:
    (the promotion's content hash, the run's snapshot index)."""
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": FLOOR_NS}}
    await client.apply(codecs.from_dict(namespace), force=True)
    await summary_floor.install(client)
    await client.apply(codecs.from_dict(ratio_policy(name, 0)), force=True)
    await client.apply(codecs.from_dict(ratio_promotion(name, n)), force=True)
    _, content_hash = await _promotion_revision(client, name, 0, None)
    _, index = await _run_revision(client, staged, n, 0, -1)
    return content_hash, index


async def _floors(
    state: fleet.FleetState,
    client: AsyncClient,
    servers: list[AsyncClient],
    stages: tuple[dict[str, list[int]], dict[str, list[tuple[str, int]]]],
    n: int,
    trial: int,
    timed: tuple[float, float],
    profiles: ApiServerProfiles,
) -> tuple[float, float]:
    """Seconds of the two floors of one trial: the shape's management writes as ConfigMap records,
    and as ClusterSummary writes (`summary_floor`); printed beside `timed` (direct, promotion)."""
    by_env, by_profile = stages
    direct, promoted = timed
    floor = await _with_records(client, servers, by_env, ratio_payload(f"floor-{n}", trial), trial)
    payload = ratio_payload(f"sfloor-{n}", trial)
    others, own = fleet_cpu(state), time.process_time()
    profile = profiles.during("floor", trial)
    same_kind = await summary_floor.run(client, servers, by_profile, payload, trial)
    spent, own = _cpu_text(others, fleet_cpu(state)), time.process_time() - own
    await _profiled(profile)
    print(f"  CPU of the fleet in the ClusterSummary floor: {spent}, this benchmark {own:.2f} s")
    print(
        f"  direct with the shape's two management writes per cluster: as ConfigMap records "
        f"{floor:.2f} s ({floor / direct:.2f}x direct), as ClusterSummary writes {same_kind:.2f} s "
        f"({same_kind / direct:.2f}x direct; the promotion {promoted / same_kind:.2f}x this floor)",
        flush=True,
    )
    return floor, same_kind


def ratio_staged_docs(name: str, point: int, trial: int) -> list[Obj]:
    docs = staged_docs(name, point)
    for stage in docs[3]["spec"]["stages"]:
        stage["maxConcurrency"] = "100%"
    docs[1]["data"] = {"trial": str(trial)}
    return docs


async def _snapshot_after(client: AsyncClient, name: str, after: int, trial: int) -> int:
    """The placement's newest snapshot index once it is above `after` and holds the trial's data."""
    resource = kinds.resource("ClusterResourceSnapshot")
    while True:
        async for snap in client.list(resource, labels={"kubernetes-fleet.io/parent-CRP": name}):
            raw = snap.to_dict()
            labels = (raw.get("metadata") or {}).get("labels") or {}
            index = int(labels.get("kubernetes-fleet.io/resource-index", -1))
            held = [
                o
                for o in (raw.get("spec") or {}).get("selectedResources") or []
                if o.get("kind") == "ConfigMap" and (o.get("data") or {}).get("trial") == str(trial)
            ]
            if labels.get("kubernetes-fleet.io/is-latest-snapshot") == "true" and held and index > after:
                await asyncio.sleep(0.2)  # the placement finishes marking the older one not latest
                return index
        await asyncio.sleep(0.05)


async def _run_revision(
    client: AsyncClient, name: str, point: int, trial: int, after: int
) -> tuple[float, int]:
    """(seconds from creating a run of the trial's snapshot to its Succeeded, the snapshot index)."""
    for doc in ratio_staged_docs(name, point, trial):
        await client.apply(codecs.from_dict(doc), force=True)
    index = await _snapshot_after(client, name, after, trial)
    run = {**run_doc(name), "metadata": {"name": f"{name}-{trial}"}}
    run["spec"] = {**run["spec"], "resourceSnapshotIndex": str(index)}
    resource = kinds.resource("ClusterStagedUpdateRun")
    t0 = time.monotonic()
    await client.create(codecs.from_dict(run))
    async for _, obj in client.watch(
        resource, fields={"metadata.name": f"{name}-{trial}"}, on_error=on_error_retry
    ):
        conditions = (obj.to_dict().get("status") or {}).get("conditions") or []
        if any(c.get("type") == "Succeeded" and c.get("status") == "True" for c in conditions):
            return time.monotonic() - t0, index
        if any(c.get("type") == "Succeeded" and c.get("status") == "False" for c in conditions):
            raise RuntimeError(f"staged update run {name}-{trial} failed: {conditions}")
    raise RuntimeError("watch ended")


async def _passes_since(before: dict[str, tuple[int, float]]) -> str:
    """Reconciles per controller since `before`: count and seconds spent in them (from /metrics;
    a pass's seconds include its waits on the API servers)."""
    now = await asyncio.to_thread(reconcile_seconds)
    moved = {
        k: (c - before.get(k, (0, 0.0))[0], t - before.get(k, (0, 0.0))[1])
        for k, (c, t) in now.items()
        if c != before.get(k, (0, 0.0))[0]
    }
    return ", ".join(f"{k} {c} ({t:.1f} s)" for k, (c, t) in sorted(moved.items()))


def fleet_cpu(state: fleet.FleetState) -> dict[str, float]:
    """CPU seconds so far of the management API server, etcd, and all member API servers."""
    out = {"management": 0.0, "etcd": 0.0, "members": 0.0}
    for p in state.processes:
        side = {"management/apiserver": "management", "etcd": "etcd"}.get(p.name, "members")
        with contextlib.suppress(OSError):
            out[side] += cpu_seconds([p.pid])
    return out


IDLE_SAMPLE = 5.0  # seconds the fleet's CPU is read with nothing rolling out, before the trials


async def _print_idle_cpu(state: fleet.FleetState) -> None:
    before = fleet_cpu(state)
    await asyncio.sleep(IDLE_SAMPLE)
    print(f"  CPU of the fleet idle, {IDLE_SAMPLE:.0f} s: {_cpu_text(before, fleet_cpu(state))}", flush=True)


def _cpu_text(before: dict[str, float], after: dict[str, float]) -> str:
    return ", ".join(f"{k} {after[k] - before[k]:.2f} s" for k in before)


async def _promotion_trial(
    state: fleet.FleetState,
    client: AsyncClient,
    trial: tuple[str, int, str | None],
    controller_pid: int,
    timeline: _Timeline | None,
    profiles: ApiServerProfiles,
) -> tuple[float, str, float]:
    """One promotion trial (`trial`: the promotion, the trial's number, the content hash before it):
    its time, the new content hash and the controller's CPU, with the passes and the fleet's CPU
    printed; and the stage timeline when one is followed."""
    name, number, old = trial
    # The scrape first: the controller's CPU in rendering its metrics is not the trial's.
    work = await asyncio.to_thread(reconcile_seconds)
    before = cpu_seconds(tree(controller_pid))
    if timeline is not None:
        timeline.start(old)
    others, own = fleet_cpu(state), time.process_time()
    profile = profiles.during("promotion", number)
    promoted, content_hash = await _promotion_revision(client, name, number, old)
    promotion_cpu = cpu_seconds(tree(controller_pid)) - before
    await _profiled(profile)
    print(f"  passes of the promotion trial: {await _passes_since(work)}", flush=True)
    if timeline is not None:
        print(f"  stages of the promotion trial (ms): {timeline.text()}", flush=True)
    print(
        f"  CPU of the fleet in the promotion trial: {_cpu_text(others, fleet_cpu(state))}, "
        f"controller {promotion_cpu:.2f} s, this benchmark {time.process_time() - own:.2f} s"
    )
    return promoted, content_hash, promotion_cpu


async def _staged_trial(
    state: fleet.FleetState,
    client: AsyncClient,
    trial: tuple[str, int, int, int],
    controller_pid: int,
    profiles: ApiServerProfiles,
) -> tuple[float, int, float]:
    """One staged-run trial (`trial`: the placement, the point, the trial's number, the snapshot
    index before it): its time, the new snapshot index and the controller's CPU, with the fleet's
    CPU and the passes printed."""
    staged, n, number, index = trial
    work = await asyncio.to_thread(reconcile_seconds)
    before = cpu_seconds(tree(controller_pid))
    others, own = fleet_cpu(state), time.process_time()
    profile = profiles.during("staged", number)
    ran, index = await _run_revision(client, staged, n, number, index)
    run_cpu = cpu_seconds(tree(controller_pid)) - before
    await _profiled(profile)
    print(
        f"  CPU of the fleet in the staged-run trial: {_cpu_text(others, fleet_cpu(state))}, "
        f"controller {run_cpu:.2f} s, this benchmark {time.process_time() - own:.2f} s"
    )
    print(f"  passes of the staged-run trial: {await _passes_since(work)}", flush=True)
    return ran, index, run_cpu


# Seconds the fleet is left to settle before each timed step of a ratio trial: bench_gates' own.
SETTLE = bg.SETTLE


async def ratio(
    state: fleet.FleetState,
    n: int,
    trials: int,
    controller_pid: int,
    *,
    follow_stages: bool = False,
    profiles_into: Path | None = None,
) -> dict[str, Any]:
    """Per trial, side by side: a 3-stage promotion (no maxUpdate) of one ConfigMap over the N
    registrations, a staged run (maxConcurrency 100%) of a Namespace and a ConfigMap, and applying
    each's content directly to the same registrations stage by stage; medians and ratios.
    `follow_stages`: print each promotion trial's stage timeline, from a watch of every summary that
    this benchmark decodes during the trial (on two busy cores, CPU taken from the promotion: the
    floors run without one)."""
    mk = state.cluster(fleet.MANAGEMENT).kubeconfig
    client = kubeclient.async_client(kubeclient.config_from_file(mk))
    servers = [kubeclient.async_client(kubeclient.config_from_file(m.kubeconfig)) for m in state.members]
    stages = stage_members(n, len(state.members))
    name, staged = f"ratio-{n}", f"sratio-{n}"
    rows: list[tuple[float, float, float, float, float, float, float]] = []
    known = KnownVersions()  # the delivered floor's, kept across trials as the controller keeps its own
    timeline = _Timeline(client, name)
    profiles = ApiServerProfiles({"management": mk, "member": state.members[0].kubeconfig}, profiles_into)
    floors: list[float] = []
    summary_floors: list[tuple[float, float]] = []  # (floor / direct, promotion / floor)
    floor_stages = summary_floor_stages(name, stages, len(servers))
    try:
        content_hash, index = await _ratio_setup(client, name, staged, n)
        sources = {"member": sorted({m.kubeconfig for m in state.members}), "management": [mk]}
        await _print_idle_cpu(state)
        for trial in range(1, trials + 1):
            await asyncio.sleep(SETTLE)
            marked = await _mark_requests(sources)
            followed = timeline if follow_stages else None
            promoted, content_hash, promotion_cpu = await _promotion_trial(
                state, client, (name, trial, content_hash), controller_pid, followed, profiles
            )
            await _print_requests(marked, sources, n)
            await asyncio.sleep(SETTLE)
            direct = await _direct_measured(state, servers, stages, [ratio_payload(f"direct-{n}", trial)])
            await asyncio.sleep(SETTLE)
            floor, same_kind = await _floors(
                state, client, servers, (stages, floor_stages), n, trial, (direct, promoted), profiles
            )
            floors.append(floor / direct)
            summary_floors.append((same_kind / direct, promoted / same_kind))
            await asyncio.sleep(SETTLE)
            marked = await _mark_requests(sources)
            ran, index, run_cpu = await _staged_trial(
                state, client, (staged, n, trial, index), controller_pid, profiles
            )
            await _print_requests(marked, sources, n)
            staged_docs_n = ratio_staged_docs(f"sdirect-{n}", n, trial)[:2]
            await asyncio.sleep(SETTLE)
            profile = profiles.during("direct-staged", trial)
            direct_staged = await _direct_measured(state, servers, stages, staged_docs_n)
            await _profiled(profile)
            await asyncio.sleep(SETTLE)
            delivered_docs = ratio_staged_docs(f"sdelivered-{n}", n, trial)[:2]
            delivered = await _delivered(state, stages, delivered_docs, known)
            rows.append((promoted, direct, promotion_cpu, ran, direct_staged, run_cpu, delivered))
            print(
                f"ratio at {n}, trial {trial}: promotion {promoted:.2f} s (CPU {promotion_cpu:.2f} s) "
                f"vs direct {direct:.2f} s -> {promoted / direct:.2f}x; staged run {ran:.2f} s "
                f"(CPU {run_cpu:.2f} s) vs direct {direct_staged:.2f} s -> {ran / direct_staged:.2f}x, "
                f"vs its delivered floor {delivered:.2f} s -> {ran / delivered:.2f}x",
                flush=True,
            )
    finally:
        await timeline.close()
        for c in [client, *servers]:
            await c.close()
    columns = list(zip(*rows, strict=True))
    med = [statistics.median(c) for c in columns]
    return {
        "ratio_trials": trials,
        "promotion_s": round(med[0], 2),
        "promotion_direct_s": round(med[1], 2),
        "promotion_ratio": round(statistics.median(r[0] / r[1] for r in rows), 2),
        "promotion_cpu_s": round(med[2], 2),
        "floor_ratio": round(statistics.median(floors), 2),
        "summary_floor_ratio": round(statistics.median(f for f, _ in summary_floors), 2),
        "promotion_vs_summary_floor": round(statistics.median(p for _, p in summary_floors), 2),
        "run_s": round(med[3], 2),
        "run_direct_s": round(med[4], 2),
        "run_ratio": round(statistics.median(r[3] / r[4] for r in rows), 2),
        "run_cpu_s": round(med[5], 2),
        "run_delivered_s": round(med[6], 2),
        "run_vs_delivered": round(statistics.median(r[3] / r[6] for r in rows), 2),
        "delivered_vs_direct": round(statistics.median(r[6] / r[4] for r in rows), 2),
    }


# --- one point -----------------------------------------------------------------------------------


async def point(
    state: fleet.FleetState, n: int, args: argparse.Namespace, controller_pid: int
) -> dict[str, Any]:
    mk = state.cluster(fleet.MANAGEMENT).kubeconfig
    client = kubeclient.async_client(kubeclient.config_from_file(mk))
    sync = kubeclient.client(kubeclient.config_from_file(mk))
    watch = Watch(client)
    watch.start()
    load_start = os.getloadavg()  # the machine is shared: readers judge the figures by its load
    try:
        single = f"single-{n}"
        await client.apply(codecs.from_dict(content(single)), force=True)
        t0 = time.monotonic()
        await client.apply(codecs.from_dict(promotion(single, n, gated=False)), force=True)
        if not await watch.until_done([single], args.budget):
            return {"clusters": n, "completed": False, "stage": "single rollout"}
        t_single = time.monotonic() - t0
        work_single = await asyncio.to_thread(reconcile_seconds)
        waits_single = dict(WAITS)
        lag_single = dict(LAG)
        gc_single = dict(GC)

        names = [f"load-{n}-{j}" for j in range(args.promotions)]
        runs = [f"run-{n}-{j}" for j in range(args.staged_runs)]
        for name in names:
            await client.apply(codecs.from_dict(content(name)), force=True)
        for name in runs:
            for doc in staged_docs(name, n):
                await client.apply(codecs.from_dict(doc), force=True)
        apiserver = next(p.pid for p in state.processes if p.name == "management/apiserver")
        etcd = next(p.pid for p in state.processes if p.name == "etcd")
        requests_before = await asyncio.to_thread(member_requests, state.members)
        writes_before = await asyncio.to_thread(management_writes, state)
        traffic_before = await asyncio.to_thread(watch_traffic, state)
        cpu_before = cpu_seconds(tree(controller_pid))
        with Sampler(controller_pid, apiserver, etcd) as sampler:
            t0, load_epoch = time.monotonic(), time.time()
            await asyncio.gather(
                *(
                    client.apply(codecs.from_dict(promotion(name, n, gated=True)), force=True)
                    for name in names
                ),
                *(_create_run_when_snapshotted(client, name) for name in runs),
            )
            completed = await watch.until_done(names + runs, args.budget)
            t_load = time.monotonic() - t0
        cpu = cpu_seconds(tree(controller_pid)) - cpu_before
        work = await asyncio.to_thread(reconcile_seconds)
        requests = await asyncio.to_thread(member_requests, state.members) - requests_before
        writes = await asyncio.to_thread(management_writes, state) - writes_before
        gates = watch.gate_reactions(names)
        reactions = [r for r, _, _ in gates]
        counts = await asyncio.to_thread(object_counts, sync)
        events = await asyncio.to_thread(member_events, sync)
        closed = await asyncio.to_thread(terminated_watchers, state)
        traffic = _traffic_between(traffic_before, await asyncio.to_thread(watch_traffic, state))
        finished = [x for x in names + runs if x in watch.done]
        passes = _promotion_passes(work_single, work, len(names))
        return {
            "clusters": n,
            "completed": completed,
            "finished": f"{len(finished)}/{len(names) + len(runs)}",
            "single_s": round(t_single, 1),
            "load_s": round(t_load, 1),
            "ratio": round(t_load / t_single, 2) if names or runs else None,
            "gate_p50_ms": round(pct(reactions, 0.5) * 1000) if reactions else None,
            "gate_p99_ms": round(pct(reactions, 0.99) * 1000) if reactions else None,
            "gate_samples": len(reactions),
            # Each gate's reaction, with when its status was seen relative to its `until` (ms).
            "gate_ms": sorted([round(r * 1000), round(late * 1000)] for r, late, _ in gates),
            # Per gate (slowest first): its reaction, and its promotion's writes seen in between (ms).
            "gate_writes_between_ms": sorted(
                ([round(r * 1000), [round(t * 1000) for t in between]] for r, _, between in gates),
                reverse=True,
            ),
            "gate_epochs": watch.gate_epochs(names),
            # The profiles' watch stream behind the promotions' over the loaded batch (`watch_lag`).
            "profile_watch_lag": watch.profile_lag(load_epoch, names, args.watch_lag_file),
            "terminated_watchers": closed,
            # The loaded batch's watch events from the management API server: [events, MiB] by resource.
            "watch_events_load": traffic,
            # What the ClusterProfile events this benchmark saw changed, the most frequent first.
            "profile_event_changes": dict(watch.profile_changes.most_common(12)),
            # The same for the promotions' events, down to their stages' keys.
            "promotion_event_changes": dict(watch.promotion_changes.most_common(16)),
            "controller_rss_mib": round(sampler.peak["controller"] / 2**20),
            "controller_cpu_s": round(cpu, 1),
            "controller_cores": round(cpu / max(t_load, 1e-3), 2),
            "apiserver_rss_mib": round(sampler.peak["apiserver"] / 2**20),
            "etcd_rss_mib": round(sampler.peak["etcd"] / 2**20),
            "member_requests_per_s": round(requests / max(t_load, 1e-3)),
            "management_writes": round(writes),
            "objects": counts,
            "member_events": events,
            # Reconciles per controller and the seconds spent in them: single rollout, then load.
            "results": dict(RESULTS),
            "reconciles_single": {k: [c, round(t, 1)] for k, (c, t) in work_single.items()},
            "reconciles_load": {
                k: [c - work_single.get(k, (0, 0.0))[0], round(t - work_single.get(k, (0, 0.0))[1], 1)]
                for k, (c, t) in work.items()
            },
            # Mean time a key waited for a worker in the loaded batch (watch event or timer -> pass).
            "queue_wait_ms_load": {
                k: round(
                    1000 * (t - waits_single.get(k, (0, 0.0))[1]) / max(1, c - waits_single.get(k, (0, 0))[0])
                )
                for k, (c, t) in WAITS.items()
            },
            # The event loop's lag in the loaded batch (bucket bounds, seconds).
            "loop_lag_load": lag_quantiles(lag_single, LAG),
            # Full collections of the controller's cyclic GC in the batch (the loop stops meanwhile).
            "gc_full_load": {
                "count": round(GC.get("count", 0) - gc_single.get("count", 0)),
                "seconds": round(GC.get("sum", 0.0) - gc_single.get("sum", 0.0), 2),
            },
            **passes,
            # 1/5/15-minute load averages of the machine when the point began and ended.
            "loadavg_start": [round(x, 2) for x in load_start],
            "loadavg_end": [round(x, 2) for x in os.getloadavg()],
        }
    finally:
        watch.stop()
        await client.close()
        sync.close()


def _promotion_passes(
    single: dict[str, tuple[int, float]], total: dict[str, tuple[int, float]], promotions: int
) -> dict[str, float | None]:
    """Passes of the promotion controller per rollout: the single rollout's, and the loaded batch's
    divided by its promotions (the staged runs are another controller's)."""
    name = next((k for k in total if k.startswith("clusterpromotion")), None)
    if name is None:
        return {"promotion_passes_single": None, "promotion_passes_per_rollout_load": None}
    before = single.get(name, (0, 0.0))[0]
    return {
        "promotion_passes_single": before,
        "promotion_passes_per_rollout_load": round((total[name][0] - before) / max(promotions, 1), 1),
    }


async def _create_run_when_snapshotted(client: AsyncClient, name: str) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            await client.get(kinds.resource("ClusterResourceSnapshot"), f"{name}-0-snapshot")
            break
        except Exception:
            await asyncio.sleep(0.2)
    await client.create(codecs.from_dict(run_doc(name)))


# --- the run -------------------------------------------------------------------------------------


def start_controller(
    state: fleet.FleetState,
    helm: str,
    log: Path,
    shards: int,
    profile: str | None = None,
    extra: tuple[str, ...] = (),
) -> subprocess.Popen[bytes]:
    """`extra`: more flags of `fleetwave controller run` (bench/peers: `--no-leader-elect`)."""
    argv = [
        sys.executable,
        *(["-m", "cProfile", "-o", profile] if profile else []),
        # FLEETWAVE_BENCH_ENTRY=<script>: run the controller through a script (instrumented runs).
        *(
            [os.environ["FLEETWAVE_BENCH_ENTRY"]]
            if os.environ.get("FLEETWAVE_BENCH_ENTRY")
            else ["-m", "fleetwave"]
        ),
        "controller",
        "run",
        "--kubeconfig",
        state.cluster(fleet.MANAGEMENT).kubeconfig,
        "--helm",
        helm,
        "--metrics-port",
        str(METRICS_PORT),
        "--health-port",
        str(processes.free_port()),
        "--log-level",
        "WARNING",
    ]
    if shards > 1:
        argv += ["--shards", str(shards)]
    argv += extra
    with log.open("wb") as out:
        return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)


def keep_logs(tmp: Path, into: Path) -> None:
    """Copy every log of the run (the controller's, each fleet process's) for a post-mortem."""
    into.mkdir(parents=True, exist_ok=True)
    for path in tmp.rglob("*.log"):
        target = into / "-".join(path.relative_to(tmp).parts)
        shutil.copyfile(path, target)
    print(f"logs kept in {into}", flush=True)


def report(rows: list[dict[str, Any]], args: argparse.Namespace) -> None:
    print(
        f"\n{args.servers} light member API servers; {args.promotions} promotions + "
        f"{args.staged_runs} staged runs per point, 3 stages, maxUpdate/maxConcurrency 10%"
    )
    head = (
        "clusters | single rollout | loaded batch | ratio | gate p50/p99 | controller RSS | controller CPU "
        "| mgmt apiserver / etcd RSS | member req/s | mgmt writes | summaries"
    )
    print(head)
    for row in rows:
        if "single_s" not in row:
            print(f"{row['clusters']:>8} | did not finish: {row.get('stage')}")
            continue
        done = "" if row["completed"] else f" (NOT done: {row['finished']})"
        r: dict[str, Any] = {k: ("-" if v is None else v) for k, v in row.items()}
        print(
            f"{r['clusters']:>8} | {r['single_s']:>12} s | {r['load_s']:>10} s{done} | {r['ratio']:>5} | "
            f"{r['gate_p50_ms']}/{r['gate_p99_ms']} ms | {r['controller_rss_mib']:>10} MiB | "
            f"{r['controller_cpu_s']} s ({r['controller_cores']} cores) | "
            f"{r['apiserver_rss_mib']} / {r['etcd_rss_mib']} MiB | {r['member_requests_per_s']} | "
            f"{r['management_writes']} | {r['objects']['ClusterSummary']}"
        )
    for row in rows:
        if row.get("promotion_passes_per_rollout_load") is not None:
            print(
                f"promotion passes per rollout at {row['clusters']} clusters: "
                f"{row['promotion_passes_per_rollout_load']} under load "
                f"(single rollout: {row['promotion_passes_single']}); load average at start "
                f"{row['loadavg_start']}, at end {row['loadavg_end']}"
            )
    for row in rows:
        if "promotion_ratio" in row:
            print(
                f"ratio at {row['clusters']} clusters (medians of {row['ratio_trials']}): promotion "
                f"{row['promotion_s']} s vs direct {row['promotion_direct_s']} s "
                f"-> {row['promotion_ratio']}x "
                f"(controller CPU {row['promotion_cpu_s']} s); staged run {row['run_s']} s vs direct "
                f"{row['run_direct_s']} s -> {row['run_ratio']}x (controller CPU {row['run_cpu_s']} s)"
            )
            print(
                f"staged run's delivered floor at {row['clusters']} clusters (medians): "
                f"{row['run_delivered_s']} s, {row['delivered_vs_direct']}x direct; the staged run "
                f"{row['run_vs_delivered']}x it"
            )
            print(
                f"floors at {row['clusters']} clusters (medians): ConfigMap records {row['floor_ratio']}x "
                f"direct, ClusterSummary writes {row['summary_floor_ratio']}x direct; promotion "
                f"{row['promotion_vs_summary_floor']}x the ClusterSummary floor"
            )
    print(json.dumps(rows))


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,250,500,1000")
    parser.add_argument("--servers", type=int, default=20)
    parser.add_argument("--promotions", type=int, default=10)
    parser.add_argument("--staged-runs", type=int, default=2)
    parser.add_argument("--budget", type=float, default=900.0, help="seconds each point may take")
    parser.add_argument("--shards", type=int, default=1)
    parser.add_argument(
        "--ratio-trials",
        type=int,
        default=3,
        help="per point: rollouts timed against a direct apply (0: none)",
    )
    parser.add_argument("--profile", default=None, help="run the controller under cProfile, into this file")
    parser.add_argument(
        "--apiserver-profiles",
        type=Path,
        default=None,
        help="into this directory: a CPU profile of the management API server over each promotion "
        "trial and each ClusterSummary floor",
    )
    parser.add_argument(
        "--stage-timeline",
        action="store_true",
        help="print when each stage of a promotion trial was pinned, written and Ready (a watch of "
        "every summary during the trial, whose CPU the trial then shares)",
    )
    parser.add_argument(
        "--watch-lag-file",
        type=Path,
        default=None,
        help="write every promotion and ClusterProfile event this benchmark received (time, "
        "resourceVersion) into this file, for bench/watch_lag.py",
    )
    parser.add_argument(
        "--keep-logs",
        default=None,
        help="copy the controller's and the fleet's logs into this directory before tearing down",
    )
    return parser.parse_args()


def main() -> None:
    args = _arguments()
    sizes = sorted(int(s) for s in args.sizes.split(","))
    bins = binaries.ensure()
    with tempfile.TemporaryDirectory(prefix="fleetwave-bench-scale-") as tmp:
        state_dir = Path(tmp) / "fleet"
        state = light_fleet(state_dir, args.servers, bins)
        controller = None
        stopping = threading.Event()
        rows: list[dict[str, Any]] = []
        try:
            mk = state.cluster(fleet.MANAGEMENT).kubeconfig
            with kubeclient.client(kubeclient.config_from_file(mk)) as mgmt:
                install.install(mgmt)
            log = Path(tmp) / "controller.log"
            controller = start_controller(state, bins.path("helm"), log, args.shards, args.profile)
            stopping = processes.watch_exit(controller, "the controller", log)
            wait_leading(controller)
            registered = 0
            for n in sizes:
                t = time.monotonic()
                register_upto(mk, state.members, registered, n, sizes)
                registered = n
                print(f"{n} clusters registered ({time.monotonic() - t:.0f} s)", flush=True)
                ratios = (
                    asyncio.run(
                        ratio(
                            state,
                            n,
                            args.ratio_trials,
                            controller.pid,
                            follow_stages=args.stage_timeline,
                            profiles_into=args.apiserver_profiles,
                        )
                    )
                    if args.ratio_trials
                    else {}
                )
                row = {**asyncio.run(point(state, n, args, controller.pid)), **ratios}
                rows.append(row)
                print(json.dumps(row), flush=True)
                if not row.get("completed"):
                    break
        finally:
            stopping.set()
            if controller is not None:
                controller.terminate()
                try:
                    controller.wait(30)
                except subprocess.TimeoutExpired:
                    controller.kill()
            report(rows, args)
            if args.keep_logs:
                keep_logs(Path(tmp), Path(args.keep_logs))
            fleet.down(state_dir)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
