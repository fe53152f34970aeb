"""Benchmark of staged update runs on a real local fleet (management + 3 members).

Measures (a) a ClusterStagedUpdateRun with no waits (3 stages, one member each) from creation to
Succeeded, divided by the time of applying the same snapshot to the same members directly with the
applier the run uses; (b) approval reaction latency: the approval request patched -> the next
stage's first cluster Started in the run's status, p50/p99 over 20 runs, side by side with the same
figure for a ClusterPromotion in the same run (manual trigger approved -> the next stage's first
cluster started in the promotion's status).  Run: .venv/bin/python bench/bench_staged_run.py
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lightkube import ApiError, Client, codecs
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import ConfigMap, Namespace
from lightkube.types import PatchType

from fleetwave.controllers import app
from fleetwave.controllers.kubefleet import snapshots
from fleetwave.delivery import manifests
from fleetwave.delivery.target import MemberTarget
from fleetwave.kube import client as kubeclient
from fleetwave.kube import kinds
from fleetwave.local import binaries, fleet, processes
from fleetwave.mgmt import install, registration

API = f"{kinds.GROUP}/{kinds.VERSION}"
TRIALS = 20
CONFIGMAPS = 20


def wait(probe: Callable[[], Any], timeout: float = 120.0, step: float = 0.01) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            value = probe()
        except ApiError as e:
            if e.status.code != 404:
                raise
            value = None
        if value:
            return value
        time.sleep(step)
    raise TimeoutError("benchmark condition not reached")


def run_controller(kubeconfig: str) -> tuple[threading.Thread, Callable[[], None]]:
    loop = asyncio.new_event_loop()
    holder: dict[str, Any] = {}
    ready = threading.Event()

    async def main() -> None:
        client = kubeclient.async_client(kubeclient.config_from_file(kubeconfig))
        settings = app.Settings(
            metrics_port=processes.free_port(), health_port=processes.free_port(), identity="bench"
        )
        holder["manager"] = app.build(client, settings, handle_signals=False)
        ready.set()
        try:
            await holder["manager"].run()
        finally:
            await client.close()

    thread = threading.Thread(target=lambda: loop.run_until_complete(main()), daemon=True)
    thread.start()
    ready.wait(30)

    def stop() -> None:
        loop.call_soon_threadsafe(holder["manager"].stop)
        thread.join(30)

    return thread, stop


def succeeded(client: Client, name: str) -> bool:
    run = client.get(kinds.resource("ClusterStagedUpdateRun"), name)
    return any(
        c["type"] == "Succeeded" and c["status"] == "True" for c in (run.status or {}).get("conditions") or []
    )


def strategy(name: str, approval: bool) -> dict[str, Any]:
    stages: list[dict[str, Any]] = []
    for i in (1, 2, 3):
        stage: dict[str, Any] = {"name": f"s{i}", "labelSelector": {"matchLabels": {"bench": str(i)}}}
        if approval and i == 1:
            stage["afterStageTasks"] = [{"type": "Approval"}]
        stages.append(stage)
    return {
        "apiVersion": API,
        "kind": "ClusterStagedUpdateStrategy",
        "metadata": {"name": name},
        "spec": {"stages": stages},
    }


def create_run(client: Client, name: str, placement: str, strat: str) -> None:
    doc = {
        "apiVersion": API,
        "kind": "ClusterStagedUpdateRun",
        "metadata": {"name": name},
        "spec": {
            "placementName": placement,
            "resourceSnapshotIndex": "0",
            "stagedRolloutStrategyName": strat,
        },
    }
    client.create(codecs.from_dict(doc))


def direct_apply(state: fleet.FleetState, objects: list[dict[str, Any]]) -> float:
    async def go() -> float:
        started = time.perf_counter()
        for member in state.members:  # one at a time, as the run's stages are
            await manifests.apply(
                MemberTarget.from_file(member.name, member.kubeconfig), objects, inventory="bench/direct"
            )
        return time.perf_counter() - started

    return asyncio.run(go())


def approval_latency(client: Client, placement: str) -> list[float]:
    client.apply(codecs.from_dict(strategy("bench-gated", approval=True)), force=True)
    out = []
    for i in range(TRIALS):
        run = f"bench-gated-{i}"
        create_run(client, run, placement, "bench-gated")
        request = kinds.resource("ClusterApprovalRequest")

        def exists(run: str = run, request: Any = request) -> Any:
            return client.get(request, f"{run}-s1")

        wait(exists)
        now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        patch = {
            "status": {
                "conditions": [
                    {
                        "type": "Approved",
                        "status": "True",
                        "reason": "lgtm",
                        "message": "lgtm",
                        "lastTransitionTime": now,
                        "observedGeneration": 1,
                    }
                ]
            }
        }
        started = time.perf_counter()
        client.patch(request.Status, f"{run}-s1", patch, patch_type=PatchType.MERGE)

        def next_started(run: str = run) -> bool:
            status = client.get(kinds.resource("ClusterStagedUpdateRun"), run).status or {}
            stages = status.get("stagesStatus") or []
            return len(stages) > 1 and bool(stages[1].get("clusters"))

        wait(next_started, step=0.005)
        out.append(time.perf_counter() - started)
        wait(lambda: succeeded(client, run))  # noqa: B023 - called before the loop moves on
    return out


def promotion_doc(name: str, policy: str, namespace: str) -> dict[str, Any]:
    ref = {"kind": "ConfigMap", "name": policy, "namespace": namespace}
    return {
        "apiVersion": API,
        "kind": "ClusterPromotion",
        "metadata": {"name": name},
        "spec": {
            "profileSpec": {"policyRefs": [ref]},
            "stages": [
                {
                    "name": "s1",
                    "clusterSelector": {"matchLabels": {"bench": "1"}},
                    "trigger": {"manual": {"approved": False}},
                },
                {"name": "s2", "clusterSelector": {"matchLabels": {"bench": "2"}}},
            ],
        },
    }


def promotion_latency(client: Client, namespace: str) -> list[float]:
    """Manual trigger approved -> the next stage's first cluster started, for ClusterPromotions."""
    content = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "bench-promo", "namespace": "default"},
    }
    policy = ConfigMap(
        metadata=ObjectMeta(name="bench-policy", namespace=namespace), data={"cm.yaml": json.dumps(content)}
    )
    client.create(policy)
    resource = kinds.resource("ClusterPromotion")
    out = []
    for i in range(TRIALS):
        name = f"bench-promo-{i}"
        client.create(codecs.from_dict(promotion_doc(name, "bench-policy", namespace)))

        def stages(name: str = name) -> list[dict[str, Any]]:
            status = client.get(resource, name).status or {}
            return list((status.get("rollout") or {}).get("stages") or [])

        wait(lambda: (s := stages()) and s[0].get("phase") == "WaitingAfter")
        patch = [{"op": "replace", "path": "/spec/stages/0/trigger/manual/approved", "value": True}]
        started = time.perf_counter()
        client.patch(resource, name, patch, patch_type=PatchType.JSON)
        wait(lambda: (s := stages()) and bool(s[1].get("started")), step=0.005)
        out.append(time.perf_counter() - started)
        client.delete(resource, name)
    return out


def _percentiles(latencies: list[float]) -> str:
    ordered = sorted(latencies)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return (
        f"p50 {statistics.median(ordered) * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms"
        f" (max {ordered[-1] * 1000:.0f} ms, {len(ordered)} runs)"
    )


def main() -> int:
    bins = binaries.ensure()
    with tempfile.TemporaryDirectory() as tmp:
        state = fleet.up(
            Path(tmp),
            members=fleet.default_member_labels(3),
            now=dt.datetime.now(dt.UTC),
            bin_dir=bins.directory,
        )
        try:
            return measure(state)
        finally:
            fleet.down(Path(tmp))


def measure(state: fleet.FleetState) -> int:
    kubeconfig = state.cluster(fleet.MANAGEMENT).kubeconfig
    client = kubeclient.client(kubeclient.config_from_file(kubeconfig))
    install.install(client)
    for i, member in enumerate(state.members, start=1):
        registration.register(
            client,
            name=member.name,
            namespace="bench-members",
            kubeconfig=Path(member.kubeconfig).read_bytes(),
            labels={"bench": str(i)},
        )
    _thread, stop = run_controller(kubeconfig)
    ns = f"bench-{uuid.uuid4().hex[:6]}"
    client.create(Namespace(metadata=ObjectMeta(name=ns)))
    for j in range(CONFIGMAPS):
        client.create(ConfigMap(metadata=ObjectMeta(name=f"cm-{j}", namespace=ns), data={"k": "v" * 100}))
    placement = {
        "apiVersion": API,
        "kind": "ClusterResourcePlacement",
        "metadata": {"name": "bench"},
        "spec": {
            "resourceSelectors": [{"group": "", "version": "v1", "kind": "Namespace", "name": ns}],
            "strategy": {"type": "External"},
        },
    }
    client.apply(codecs.from_dict(placement), force=True)
    snap = wait(lambda: client.get(kinds.resource("ClusterResourceSnapshot"), "bench-0-snapshot"))
    objects = snapshots.resources(snap.to_dict())
    client.apply(codecs.from_dict(strategy("bench-fast", approval=False)), force=True)
    started = time.perf_counter()
    create_run(client, "bench-fast", "bench", "bench-fast")
    wait(lambda: succeeded(client, "bench-fast"))
    staged = time.perf_counter() - started
    direct = direct_apply(state, objects)
    latencies = approval_latency(client, "bench")
    promotions = promotion_latency(client, ns)
    stop()
    print(f"staged run, 3 stages x 1 member, {len(objects)} objects, no waits: {staged:.3f} s")
    print(f"direct apply of the same snapshot to the same 3 members:        {direct:.3f} s")
    print(f"ratio staged / direct:                                           {staged / direct:.2f}")
    print(f"approval -> next stage Started, staged update run: {_percentiles(latencies)}")
    print(f"approval -> next stage started, ClusterPromotion:  {_percentiles(promotions)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
