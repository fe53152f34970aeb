"""What one ClusterSummary costs the management cluster (issue 47), on a curve of summary counts.

    PYTHONPATH=src .venv/bin/python bench/bench_summary_cost.py [--curve 1100,11000,50000,100000]
        [--clusters 1000] [--concurrency 32]

A management API server + etcd (as `fleetwave local up` starts them, watch cache on) with fleetwave's
CRDs installed. For each point the benchmark writes summaries up to the point's count exactly as the
profile controller and the summary controller write them: the body its profile pass applies
(`summary_writes`, the same code), then the status its delivery writes once the content is deployed
and healthy (`summary_status.status_body`, a merge patch on /status), over `--clusters` clusters and
as many ClusterProfiles as it takes (the profiles a promotion generates: one ConfigMap policyRef).
No controller runs: this is the cost of the object, not of the passes that write it. `--watchers`
watches of all summaries stay open meanwhile (default 1, as one controller keeps): the API server
keeps each event's serialized form for its watchers.

Reported per point, 130 s after the writes (past the 75 s a watch cache keeps events fresh): the
management API server's RSS and live Go heap (read after a collection the benchmark asks for), per
summary (growth since the empty server, divided by the summaries); etcd's RSS and database size in
use, per summary; one summary's stored JSON, its managedFields, spec and status, in bytes; and the
API server's CPU per write while the point's summaries were written.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import re
import threading
import time
from pathlib import Path
from typing import Any

import httpx2

import bench_scale  # the fleet, process and metrics readers are shared
from fleetwave.api.models import ClusterProfile
from fleetwave.controllers.sveltos import summary_status as ss
from fleetwave.controllers.sveltos import summary_writes
from fleetwave.kube import client as kubeclient
from fleetwave.kube import internals, kinds
from fleetwave.local import fleet
from fleetwave.mgmt import install

API = f"{kinds.GROUP}/{kinds.VERSION}"
CLUSTER_NS = "bench-cost"
HISTORY_S = 130.0  # past the 75 s the watch cache keeps events fresh and a forced Go GC (every 2 min)
Obj = dict[str, Any]


def profile_doc(index: int) -> Obj:
    """A stage profile as a promotion generates it: one ConfigMap policyRef, maxUpdate 10%."""
    name = f"p-{index:03d}"
    return {
        "apiVersion": API,
        "kind": "ClusterProfile",
        "metadata": {
            "name": name,
            "labels": {"fleetwave.io/promotion": "bench", "fleetwave.io/stage": "prod"},
        },
        "spec": {
            "clusterSelector": {"matchLabels": {"env": "prod"}},
            "maxUpdate": "10%",
            "policyRefs": [{"kind": "ConfigMap", "name": f"{name}-policy", "namespace": "default"}],
        },
    }


def shared_of(profile: Obj) -> summary_writes.Shared:
    """What every summary of `profile` carries, built by the controller's own code."""
    parsed = ClusterProfile.model_validate(profile)
    owner = {
        "apiVersion": API,
        "kind": "ClusterProfile",
        "name": parsed.metadata.name,
        "uid": profile["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    return summary_writes.Shared.build(
        profile=parsed,
        api_version=API,
        owner_reference=owner,
        snapshot=f"{parsed.metadata.name}-content-1",
        content_hash="c" * 64,
    )


def delivered_status(now: dt.datetime) -> Obj:
    """The status a delivery writes once one ConfigMap is deployed and healthy."""
    feature = ss.Feature(ss.FEATURE_RESOURCES, "Provisioned", "f" * 64, deployed=("ConfigMap.v1.",))
    outcome = ss.Outcome(content_hash="c" * 64, features=(feature,), healthy=True)
    body = ss.status_body(outcome, generation=1, now=now, previous={})
    return {k: v for k, v in body.items() if v is not None}


async def write_summaries(http: httpx2.AsyncClient, bodies: list[Obj], concurrency: int) -> None:
    gate = asyncio.Semaphore(concurrency)
    status = {"status": delivered_status(dt.datetime.now(dt.UTC))}

    async def one(body: Obj) -> None:
        meta = body["metadata"]
        path = f"/apis/{API}/namespaces/{meta['namespace']}/clustersummaries/{meta['name']}"
        async with gate:
            r = await http.patch(
                path,
                params={"fieldManager": kubeclient.FIELD_MANAGER, "force": "true"},
                content=json.dumps(body),
                headers={"Content-Type": "application/apply-patch+yaml"},
            )
            r.raise_for_status()
            r = await http.patch(
                f"{path}/status",
                params={"fieldManager": kubeclient.FIELD_MANAGER},
                content=json.dumps(status),
                headers={"Content-Type": "application/merge-patch+json"},
            )
            r.raise_for_status()

    await asyncio.gather(*(one(b) for b in bodies))


class Watchers:
    """`count` watches of every ClusterSummary, read and dropped, as a controller's informer keeps one
    open for as long as it runs (re-opened when the API server ends one)."""

    def __init__(self, state: fleet.FleetState, count: int) -> None:
        self.config = kubeclient.config_from_file(state.cluster(fleet.MANAGEMENT).kubeconfig)
        self.stop = threading.Event()
        self.events = 0
        self.threads = [threading.Thread(target=self._watch, daemon=True) for _ in range(count)]

    def __enter__(self) -> Watchers:
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop.set()

    def _watch(self) -> None:
        version = ""  # resumed from the last event seen, as an informer does (no relist)
        while not self.stop.is_set():
            params = {"watch": "1", "allowWatchBookmarks": "true", "timeoutSeconds": "600"}
            params |= {"resourceVersion": version} if version else {}
            try:
                with (
                    internals.http(self.config, timeout=660) as http,
                    http.stream("GET", f"/apis/{API}/clustersummaries", params=params) as r,
                ):
                    for line in r.iter_lines():
                        if line.startswith('{"type":"ERROR"'):
                            version = ""  # too old (410): start over from the current state
                        elif seen := _RESOURCE_VERSION.search(line):
                            version = seen.group(1)
                            self.events += 1
                        if self.stop.is_set():
                            return
            except httpx2.HTTPError:
                time.sleep(1.0)


_RESOURCE_VERSION = re.compile(r'"resourceVersion":"(\d+)"')


def metric(text: str, name: str) -> float:
    m = re.search(rf"^{name}(?:{{[^}}]*}})? (\S+)$", text, re.M)
    return float(m.group(1)) if m else float("nan")


def labelled(text: str, name: str, resource: str) -> float:
    """A metric's value on the line whose labels mention `resource`."""
    m = re.search(rf"^{name}{{[^}}]*{resource}[^}}]*}} (\S+)$", text, re.M)
    return float(m.group(1)) if m else float("nan")


class Readings:
    """The management API server's and etcd's memory and size, read together."""

    def __init__(self, state: fleet.FleetState) -> None:
        self.state = state
        pids = {p.name: p.pid for p in state.processes}
        self.apiserver = pids[f"{fleet.MANAGEMENT}/apiserver"]
        self.etcd = next(pid for name, pid in pids.items() if name.startswith("etcd"))
        self.config = kubeclient.config_from_file(state.cluster(fleet.MANAGEMENT).kubeconfig)
        self.profile = b""

    def read(self) -> dict[str, float]:
        with internals.http(self.config, timeout=120) as http:
            # A heap profile taken with gc=1 runs a full collection first: the heap read next is
            # what is live, not what the last cycle left for the next one to find.
            self.profile = http.get("/debug/pprof/heap", params={"gc": "1"}).content
            api = http.get("/metrics").text
        etcd = httpx2.get(f"http://127.0.0.1:{self.state.etcd_port}/metrics", timeout=30).text
        return {
            "apiserver_rss": bench_scale.rss_bytes([self.apiserver]),
            "apiserver_heap": metric(api, "go_memstats_heap_inuse_bytes"),
            "watch_cache_capacity": labelled(api, "watch_cache_capacity", "clustersummaries"),
            "etcd_rss": bench_scale.rss_bytes([self.etcd]),
            "etcd_db": metric(etcd, "etcd_mvcc_db_total_size_in_use_in_bytes"),
        }


def one_summary(state: fleet.FleetState, name: str) -> dict[str, int]:
    """Bytes of one stored summary: all of it, its managedFields, its spec and its status."""
    config = kubeclient.config_from_file(state.cluster(fleet.MANAGEMENT).kubeconfig)
    with internals.http(config, timeout=30) as http:
        obj = http.get(f"/apis/{API}/namespaces/{CLUSTER_NS}/clustersummaries/{name}").json()

    def size(value: Any) -> int:
        return len(json.dumps(value, separators=(",", ":")))

    return {
        "object_bytes": size(obj),
        "managed_fields_bytes": size(obj["metadata"].get("managedFields") or []),
        "spec_bytes": size(obj.get("spec") or {}),
        "status_bytes": size(obj.get("status") or {}),
    }


def create_profiles(state: fleet.FleetState, count: int) -> list[Obj]:
    config = kubeclient.config_from_file(state.cluster(fleet.MANAGEMENT).kubeconfig)
    out = []
    with internals.http(config, timeout=30) as http:
        http.post("/api/v1/namespaces", json={"metadata": {"name": CLUSTER_NS}})
        for i in range(count):
            r = http.post(f"/apis/{API}/clusterprofiles", json=profile_doc(i))
            r.raise_for_status()
            out.append(r.json())
    return out


def bodies_between(profiles: list[Obj], clusters: int, start: int, stop: int) -> list[Obj]:
    """Summaries start..stop-1, profile-major: summary i is profile i // clusters on cluster i % clusters."""
    shared: dict[int, summary_writes.Shared] = {}
    out = []
    for i in range(start, stop):
        p = i // clusters
        if p not in shared:
            shared[p] = shared_of(profiles[p])
        out.append(shared[p].body(f"{CLUSTER_NS}/c-{i % clusters:04d}"))
    return out


def per(grown: float, count: int) -> float:
    return grown / count / 1024 if count else float("nan")


def row_of(count: int, base: dict[str, float], now: dict[str, float], sample: dict[str, int]) -> Obj:
    return {
        "summaries": count,
        "apiserver_rss_mib": round(now["apiserver_rss"] / 2**20),
        "apiserver_rss_kib_per_summary": round(per(now["apiserver_rss"] - base["apiserver_rss"], count), 1),
        "apiserver_heap_kib_per_summary": round(
            per(now["apiserver_heap"] - base["apiserver_heap"], count), 1
        ),
        "etcd_rss_mib": round(now["etcd_rss"] / 2**20),
        "etcd_db_mib": round(now["etcd_db"] / 2**20, 1),
        "etcd_db_kib_per_summary": round(per(now["etcd_db"] - base["etcd_db"], count), 2),
        "watch_cache_capacity": now["watch_cache_capacity"],
        **sample,
    }


def run(args: argparse.Namespace, state: fleet.FleetState) -> list[Obj]:
    curve = sorted(int(n) for n in args.curve.split(","))
    with kubeclient.client(kubeclient.config_from_file(state.cluster(fleet.MANAGEMENT).kubeconfig)) as mgmt:
        install.install(mgmt)
    profiles = create_profiles(state, -(-curve[-1] // args.clusters))
    readings = Readings(state)
    with Watchers(state, args.watchers) as watchers:
        return _points(args, state, curve, profiles, readings, watchers)


def _points(
    args: argparse.Namespace,
    state: fleet.FleetState,
    curve: list[int],
    profiles: list[Obj],
    readings: Readings,
    watchers: Watchers,
) -> list[Obj]:
    time.sleep(HISTORY_S)
    base = readings.read()
    print(f"empty: {json.dumps({k: round(v / 2**20, 1) for k, v in base.items()})} (MiB)", flush=True)
    rows, written = [], 0
    config = kubeclient.config_from_file(state.cluster(fleet.MANAGEMENT).kubeconfig)
    for count in curve:
        bodies = bodies_between(profiles, args.clusters, written, count)
        t, cpu = time.monotonic(), bench_scale.cpu_seconds([readings.apiserver])

        async def write(bodies: list[Obj] = bodies) -> None:
            async with internals.async_http(config, timeout=60) as http:
                await write_summaries(http, bodies, args.concurrency)

        asyncio.run(write())
        took, cpu = time.monotonic() - t, bench_scale.cpu_seconds([readings.apiserver]) - cpu
        writes, written = 2 * (count - written), count
        time.sleep(HISTORY_S)
        row = row_of(count, base, readings.read(), one_summary(state, bodies[-1]["metadata"]["name"]))
        row["write_s"] = round(took, 1)
        # What the API server spent on this point's writes (body apply + status patch per summary).
        row["apiserver_cpu_ms_per_write"] = round(1000 * cpu / writes, 2)
        row["watch_events"] = watchers.events
        rows.append(row)
        print(json.dumps(row), flush=True)
        if args.heap_profile:
            Path(f"{args.heap_profile}.{count}").write_bytes(readings.profile)
    return rows


def report(rows: list[Obj]) -> None:
    print(
        "summaries | apiserver RSS | per summary (RSS / heap) | etcd RSS | etcd db (per summary) | "
        "one summary: object / managedFields / spec / status bytes | API server CPU per write"
    )
    for r in rows:
        print(
            f"{r['summaries']:>9} | {r['apiserver_rss_mib']:>9} MiB | "
            f"{r['apiserver_rss_kib_per_summary']:>7} / {r['apiserver_heap_kib_per_summary']} KiB | "
            f"{r['etcd_rss_mib']} MiB | {r['etcd_db_mib']} MiB ({r['etcd_db_kib_per_summary']} KiB) | "
            f"{r['object_bytes']} / {r['managed_fields_bytes']} / {r['spec_bytes']} / {r['status_bytes']} | "
            f"{r['apiserver_cpu_ms_per_write']} ms"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--curve", default="1100,11000,50000,100000")
    parser.add_argument("--clusters", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--watchers", type=int, default=1, help="watches of all summaries kept open")
    parser.add_argument(
        "--heap-profile", default=None, help="keep the API server's heap profile at each point: PATH.<count>"
    )
    args = parser.parse_args()
    bench_scale.on_a_management_cluster(
        "fleetwave-bench-cost-", lambda state: run(args, state), lambda rows: report(rows or [])
    )


if __name__ == "__main__":
    main()
