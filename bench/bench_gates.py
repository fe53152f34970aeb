"""Gate reaction latency of the ClusterPromotion controller on the local fleet (issue 4).

    .venv/bin/python bench/bench_gates.py [--trials 25] [--ratio-trials 5] [--state-dir DIR]

The controller runs as a `fleetwave controller run` subprocess; this script only watches. Per trial
a new content revision goes dev -(delay 1s)-> staging -(approval)-> production, and we measure
  delay:    the dev Delay gate's `until` (status.rollout) -> the watch event of the staging profile
            carrying the new revision (the first write for the next stage);
  approval: just before the approval patch is sent -> the same event for the production profile;
  health:   another promotion's dev stage waits on a post-delay check of a ConfigMap on member-1:
            just before the ConfigMap is patched to open it -> the staging profile's first write.
Receive times of watch events are taken here, so the figures include watch propagation.
Then: a 3-stage rollout with no gates vs applying the same content directly to the 3 members
(waiting for the Deployment to be Available in both cases), as a ratio of wall times, same run; and
the same for a ClusterStagedUpdateRun (a placement of the same content, a strategy with the same
three stages): from the run's creation, once its snapshot is cut, to Succeeded.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from lightkube import AsyncClient, codecs
from lightkube.resources.apps_v1 import Deployment
from lightkube.types import PatchType, on_error_retry

import summary_floor
from fleetwave.health import readiness
from fleetwave.kube import client as kubeclient
from fleetwave.kube import kinds
from fleetwave.local import binaries, fleet, processes
from fleetwave.ux import approval
from fleetwave.ux import demo_setup as setup

NS = "default"  # content lives outside fleetwave's own namespace (ADR 0046)
PINNED_HASH = "fleetwave.io/pinned-content-hash"
Obj = dict[str, Any]


def content(name: str, trial: int) -> list[Obj]:
    """What each revision delivers: a namespace, a ConfigMap and a small Deployment."""
    labels = {"app": name}
    ns = name  # one namespace per promotion: withdrawing one must not delete another's objects
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": ns},
            "data": {"trial": str(trial)},
        },
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": name, "namespace": ns, "labels": labels},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels, "annotations": {"trial": str(trial)}},
                    "spec": {"containers": [{"name": "c", "image": "registry.invalid/x:1"}]},
                },
            },
        },
    ]


def policy_configmap(name: str, trial: int) -> Obj:
    text = yaml.safe_dump_all(content(name, trial))
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": f"{name}-policy", "namespace": NS},
        "data": {"content.yaml": text},
    }


def promotion(name: str, *, gated: bool) -> Obj:
    dev: Obj = {"auto": {"delay": "1s"}} if gated else {"auto": {}}
    staging: Obj = {"manual": {"approved": False, "automaticReset": True}} if gated else {"auto": {}}
    stages = [("dev", "dev", dev), ("staging", "staging", staging), ("production", "prod", None)]
    return {
        "apiVersion": f"{kinds.GROUP}/{kinds.VERSION}",
        "kind": "ClusterPromotion",
        "metadata": {"name": name},
        "spec": {
            "profileSpec": {
                "syncMode": "Continuous",
                "policyRefs": [{"kind": "ConfigMap", "name": f"{name}-policy", "namespace": NS}],
            },
            "stages": [
                {"name": n, "clusterSelector": {"matchLabels": {"env": e}}, **({"trigger": t} if t else {})}
                for n, e, t in stages
            ],
        },
    }


HEALTH_LUA = """
function evaluate()
  if obj.data ~= nil and obj.data.trial == "%s" then
    return {healthy = true, message = "gate open for this trial"}
  end
  return {healthy = false, message = "gate closed"}
end
"""
HEALTH_GATE = "bench-health-gate"


def health_promotion(name: str, trial: int) -> Obj:
    """dev -> staging behind a post-delay check on member-1 that passes once its gate ConfigMap
    names this trial (the script changes each trial, so each revision waits on its own opening)."""
    check = {
        "name": "gate",
        "group": "",
        "version": "v1",
        "kind": "ConfigMap",
        "namespace": NS,
        "resourceName": HEALTH_GATE,
        "script": HEALTH_LUA % trial,
    }
    return {
        "apiVersion": f"{kinds.GROUP}/{kinds.VERSION}",
        "kind": "ClusterPromotion",
        "metadata": {"name": name},
        "spec": {
            "profileSpec": {
                "syncMode": "Continuous",
                "policyRefs": [{"kind": "ConfigMap", "name": f"{name}-policy", "namespace": NS}],
            },
            "stages": [
                {
                    "name": "dev",
                    "clusterSelector": {"matchLabels": {"env": "dev"}},
                    "trigger": {"auto": {"delay": "0s", "postDelayHealthChecks": [check]}},
                },
                {"name": "staging", "clusterSelector": {"matchLabels": {"env": "staging"}}},
            ],
        },
    }


def health_gate(trial: int) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": HEALTH_GATE, "namespace": NS},
        "data": {"trial": str(trial)},
    }


class Watcher:
    """Every profile event of one promotion (with its receive time) and its latest object."""

    def __init__(self, client: AsyncClient, name: str) -> None:
        self.client, self.name = client, name
        self.events: list[tuple[float, str, str, int]] = []  # (time, profile, pinned hash, clusterRefs)
        self.promotion: Obj = {}
        self.changed = asyncio.Event()
        self.tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        self.tasks = [asyncio.create_task(self._profiles()), asyncio.create_task(self._promotion())]

    async def _profiles(self) -> None:
        res = kinds.resource("ClusterProfile")
        async for _, obj in self.client.watch(
            res, labels={"fleetwave.io/promotion": self.name}, on_error=on_error_retry
        ):
            t = time.time()
            hash_ = (obj.metadata.annotations or {}).get(PINNED_HASH, "")
            self.events.append((t, obj.metadata.name, hash_, len((obj.spec or {}).get("clusterRefs") or [])))
            self.changed.set()

    async def _promotion(self) -> None:
        res = kinds.resource("ClusterPromotion")
        async for _, obj in self.client.watch(
            res, fields={"metadata.name": self.name}, on_error=on_error_retry
        ):
            self.promotion = obj.to_dict()
            self.changed.set()

    async def until(self, test: Callable[[], Any], limit: float = 120.0) -> Any:
        deadline = time.monotonic() + limit
        while not (found := test()):
            self.changed.clear()
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"{self.name}: condition not met in {limit}s; status={self.rollout()}")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), left)
        return found

    def rollout(self) -> Obj:
        return (self.promotion.get("status") or {}).get("rollout") or {}

    def stage(self, name: str) -> Obj:
        return next((s for s in self.rollout().get("stages") or [] if s["name"] == name), {})

    def first_write(self, profile: str, since: int, old_hash: str) -> tuple[float, str] | None:
        for t, p, h, refs in self.events[since:]:
            if p == profile and h != old_hash and refs:
                return t, h
        return None

    def last_hash(self, profile: str) -> str:
        return next((h for _, p, h, _ in reversed(self.events) if p == profile), "")

    def stop(self) -> None:
        for task in self.tasks:
            task.cancel()


def _ts(value: str) -> float:
    return dt.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


async def gate_trial(client: AsyncClient, w: Watcher, trial: int) -> tuple[float, float]:
    name = w.name
    staging, production = f"{name}-staging", f"{name}-production"
    mark, old_s, old_p = len(w.events), w.last_hash(staging), w.last_hash(production)
    previous = w.rollout().get("contentHash")
    # The rollout's revision hash is not the pinned content hash the profiles carry: compare each
    # with its own previous value.
    await client.apply(codecs.from_dict(policy_configmap(name, trial)), force=True)
    new = await w.until(lambda: (h := w.rollout().get("contentHash")) not in (None, previous) and h)
    t_s, _ = await w.until(lambda: w.first_write(staging, mark, old_s))
    await w.until(lambda: w.rollout().get("contentHash") == new and w.stage("dev").get("gates"))
    until = next(g["until"] for g in w.stage("dev")["gates"] if g["kind"] == "Delay")
    delay_latency = t_s - _ts(until)

    def approval_waits() -> bool:
        gates = w.stage("staging").get("gates") or []
        return any(g["kind"] == "Approval" and g["state"] == "Waiting" for g in gates)

    await w.until(lambda: w.rollout().get("contentHash") == new and approval_waits())
    patch = approval.approval_patch(w.promotion, "staging")
    mark = len(w.events)
    t0 = time.time()
    await client.patch(kinds.resource("ClusterPromotion"), name, patch, patch_type=PatchType.JSON)
    t_p, _ = await w.until(lambda: w.first_write(production, mark, old_p))
    await w.until(lambda: w.rollout().get("contentHash") == new and w.rollout().get("phase") == "Succeeded")
    return delay_latency, t_p - t0


async def health_trial(client: AsyncClient, member: AsyncClient, w: Watcher, trial: int) -> float:
    """The member's gate ConfigMap opened -> the next stage's first write (a member watch, or a poll)."""
    staging = f"{w.name}-staging"
    mark, old = len(w.events), w.last_hash(staging)
    previous = w.rollout().get("contentHash")
    await client.apply(codecs.from_dict(policy_configmap(w.name, trial)), force=True)
    await client.apply(codecs.from_dict(health_promotion(w.name, trial)), force=True)

    def judged_closed() -> bool:
        fresh = w.rollout().get("contentHash") not in (None, previous)
        return (
            fresh
            and w.stage("dev").get("phase") == "WaitingAfter"
            and "gate closed" in json.dumps(w.promotion)
        )

    await w.until(judged_closed)
    await asyncio.sleep(0.5)  # the check has run at least once against the closed gate
    t0 = time.time()
    await member.apply(codecs.from_dict(health_gate(trial)), field_manager="bench", force=True)
    t_s, _ = await w.until(lambda: w.first_write(staging, mark, old))
    await w.until(
        lambda: w.stage("staging").get("phase") == "Succeeded" and w.rollout().get("phase") == "Succeeded"
    )
    return float(t_s) - t0


async def health_trials(client: AsyncClient, member: AsyncClient, trials: int, name: str) -> list[float]:
    health = Watcher(client, name)
    health.start()
    await member.apply(codecs.from_dict(health_gate(0)), field_manager="bench", force=True)
    out = []
    for trial in range(1, trials + 1):
        h = await health_trial(client, member, health, trial)
        out.append(h)
        print(
            f"trial {trial:3d}: health gate opened on member-1 -> staging write {h * 1000:7.1f} ms",
            flush=True,
        )
    health.stop()
    await client.delete(kinds.resource("ClusterPromotion"), health.name)
    return out


async def poll_only(state: fleet.FleetState, trials: int) -> list[float]:
    mk = kubeclient.config_from_file(state.cluster(fleet.MANAGEMENT).kubeconfig)
    client = kubeclient.async_client(mk)
    member = kubeclient.async_client(kubeclient.config_from_file(state.members[0].kubeconfig))
    try:
        return await health_trials(client, member, trials, "bench-health-polled")
    finally:
        for c in (client, member):
            await c.close()


async def warm_up(client: AsyncClient, w: Watcher) -> None:
    """First revision through every stage, so each trial starts from a quiescent promotion."""
    await client.apply(codecs.from_dict(policy_configmap(w.name, 0)), force=True)
    await client.apply(codecs.from_dict(promotion(w.name, gated=True)), force=True)
    await w.until(lambda: w.rollout().get("phase") == "Waiting" and w.stage("staging").get("started"))
    await w.until(lambda: w.stage("staging").get("phase") == "WaitingAfter")
    patch = approval.approval_patch(w.promotion, "staging")
    await client.patch(kinds.resource("ClusterPromotion"), w.name, patch, patch_type=PatchType.JSON)
    await w.until(lambda: w.rollout().get("phase") == "Succeeded")


async def rollout_time(client: AsyncClient, w: Watcher, trial: int) -> float:
    old = w.rollout().get("contentHash")
    t0 = time.monotonic()
    await client.apply(codecs.from_dict(policy_configmap(w.name, trial)), force=True)
    await w.until(
        lambda: w.rollout().get("contentHash") not in (None, old) and w.rollout().get("phase") == "Succeeded"
    )
    return time.monotonic() - t0


async def _available(client: AsyncClient, name: str) -> None:
    """Until the Deployment's rollout is done by the criterion the rollout's readiness uses, which is
    `kubectl rollout status`'s: the new generation observed, every replica updated and available,
    and no old replica left pending termination (a weaker test, e.g. without the last, measured
    direct apply as done ~50 ms per stage before the member had finished)."""
    async for _, d in client.watch(Deployment, namespace=name, fields={"metadata.name": name}):
        obj = d.to_dict()
        obj.setdefault("apiVersion", "apps/v1")
        obj.setdefault("kind", "Deployment")
        if readiness.is_ready(obj)[0]:
            return


async def direct_time(members: list[AsyncClient], trial: int, *, staged: bool) -> float:
    """The same content applied straight to the members (as `kubectl apply` would), until Available:
    stage by stage in the rollout's order (each member Available before the next is touched, what
    a staged rollout must do), or to all three at once."""
    name = "bench-direct-staged" if staged else "bench-direct"
    t0 = time.monotonic()
    if staged:
        for client in members:
            for obj in content(name, trial):
                await client.apply(codecs.from_dict(obj), force=True)
            await _available(client, name)
        return time.monotonic() - t0
    for client in members:
        for obj in content(name, trial):
            await client.apply(codecs.from_dict(obj), force=True)
    for client in members:
        await _available(client, name)
    return time.monotonic() - t0


async def floor_time(
    management: AsyncClient, members: list[AsyncClient], names: list[str], promotion_name: str, trial: int
) -> float:
    """`direct_time(staged=True)` plus the two management writes per member the promotion's shape
    makes, written as it writes them (`summary_floor`): each member's summary applied, its content
    applied until Available, its summary's status; member after member, in the rollout's order."""
    profiles = [f"{promotion_name}-{summary_floor.STAGE_OF_ENV[env]}" for env in setup.ENVS]
    shared = [await summary_floor.shared_of(management, p, trial) for p in profiles]
    clusters = [f"{setup.DemoConfig().member_namespace}/{n}" for n in names]
    name = "bench-floor"
    t0 = time.monotonic()
    for client, stage, cluster in zip(members, shared, clusters, strict=False):
        version = await summary_floor.write_summary(management, stage, cluster)
        for obj in content(name, trial):
            await client.apply(codecs.from_dict(obj), force=True)
        await _available(client, name)
        await summary_floor.write_status(management, stage, cluster, version, trial)
    return time.monotonic() - t0


STAGED = "bench-staged"  # the placement, its strategy and its hub namespace


def staged_strategy() -> Obj:
    envs = ("dev", "staging", "prod")
    return {
        "apiVersion": f"{kinds.GROUP}/{kinds.VERSION}",
        "kind": "ClusterStagedUpdateStrategy",
        "metadata": {"name": STAGED},
        "spec": {"stages": [{"name": e, "labelSelector": {"matchLabels": {"env": e}}} for e in envs]},
    }


def staged_placement() -> Obj:
    return {
        "apiVersion": f"{kinds.GROUP}/{kinds.VERSION}",
        "kind": "ClusterResourcePlacement",
        "metadata": {"name": STAGED},
        "spec": {
            "resourceSelectors": [{"group": "", "version": "v1", "kind": "Namespace", "name": STAGED}],
            "strategy": {"type": "External"},
        },
    }


async def _snapshot_index(client: AsyncClient, after: int, trial: int) -> int:
    """The placement's newest snapshot index, once it is above `after` and holds the whole of the
    trial's content. The content's objects are applied one by one, so the placement may first
    snapshot a part of it; the run is created once the hub has settled, as a person would, so
    that the hub's snapshotting is not counted as the run's time."""
    resource = kinds.resource("ClusterResourceSnapshot")
    while True:
        newest = -1
        async for snap in client.list(resource, labels={"kubernetes-fleet.io/parent-CRP": STAGED}):
            raw = snap.to_dict()
            labels = (raw.get("metadata") or {}).get("labels") or {}
            if labels.get("kubernetes-fleet.io/is-latest-snapshot") == "true" and _holds(raw, trial):
                newest = int(labels.get("kubernetes-fleet.io/resource-index", -1))
        if newest > after:
            await asyncio.sleep(0.2)  # the placement finishes marking the older one not latest
            return newest
        await asyncio.sleep(0.02)


def _holds(snapshot: Obj, trial: int) -> bool:
    """Whether a snapshot holds the trial's Deployment (the last of its objects applied)."""
    for obj in (snapshot.get("spec") or {}).get("selectedResources") or []:
        if obj.get("kind") == "Deployment":
            annotations = (((obj.get("spec") or {}).get("template") or {}).get("metadata") or {}).get(
                "annotations"
            ) or {}
            return bool(annotations.get("trial") == str(trial))
    return False


async def staged_run_time(client: AsyncClient, trial: int, after: int) -> tuple[float, int]:
    """(seconds from creating a run of the trial's snapshot to its Succeeded, that snapshot's index)."""
    for obj in content(STAGED, trial):
        await client.apply(codecs.from_dict(obj), force=True)
    index = await _snapshot_index(client, after, trial)
    name = f"{STAGED}-{trial}"
    run = {
        "apiVersion": f"{kinds.GROUP}/{kinds.VERSION}",
        "kind": "ClusterStagedUpdateRun",
        "metadata": {"name": name},
        "spec": {
            "placementName": STAGED,
            "resourceSnapshotIndex": str(index),
            "stagedRolloutStrategyName": STAGED,
        },
    }
    resource = kinds.resource("ClusterStagedUpdateRun")
    t0 = time.monotonic()
    await client.create(codecs.from_dict(run))
    async for _, obj in client.watch(resource, fields={"metadata.name": name}, on_error=on_error_retry):
        conditions = (obj.to_dict().get("status") or {}).get("conditions") or []
        if any(c.get("type") == "Succeeded" and c.get("status") == "True" for c in conditions):
            return time.monotonic() - t0, index
        if any(c.get("type") == "Succeeded" and c.get("status") == "False" for c in conditions):
            raise RuntimeError(f"staged update run {name} failed: {conditions}")
    raise RuntimeError("watch ended")


# Seconds the fleet is left to settle before each measurement: what a rollout's controllers do after
# it has finished (a stage profile summing its summaries up) would otherwise land in the next
# measurement, the direct apply's included.
SETTLE = 1.0


async def staged_trials(
    client: AsyncClient, members: list[AsyncClient], trials: int, cpu: ControllerCpu
) -> list[tuple[float, float, float]]:
    """(staged run, direct apply stage by stage, controller CPU during the run) per trial, after a
    first run that creates everything."""
    await client.apply(codecs.from_dict(staged_strategy()), force=True)
    await client.apply(codecs.from_dict(staged_placement()), force=True)
    _, index = await staged_run_time(client, 0, -1)
    out = []
    for trial in range(1, trials + 1):
        await asyncio.sleep(SETTLE)
        before = cpu.seconds()
        r, index = await staged_run_time(client, trial, index)
        used = cpu.seconds() - before
        await asyncio.sleep(SETTLE)
        direct = await direct_time(members, trial, staged=True)
        out.append((r, direct, used))
        print(
            f"staged-run trial {trial}: run {r:.2f} s (controller CPU {used:.2f} s), "
            f"direct apply stage by stage {direct:.2f} s -> {r / direct:.2f}x",
            flush=True,
        )
    return out


class ControllerCpu:
    """CPU seconds (user + system) the controller process has used so far, from /proc: how much of a
    rollout's wall time the controller spends computing rather than waiting."""

    def __init__(self, pid: int) -> None:
        self._stat = Path(f"/proc/{pid}/stat")
        self._tick = os.sysconf("SC_CLK_TCK")

    def seconds(self) -> float:
        # Fields after the command name (which may hold spaces): utime and stime are 14th and 15th.
        fields = self._stat.read_text().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / self._tick


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def start_controller(
    state: fleet.FleetState, helm: str, log: Path, extra: tuple[str, ...] = ()
) -> subprocess.Popen[bytes]:
    mk = state.cluster(fleet.MANAGEMENT).kubeconfig
    # FLEETWAVE_BENCH_PROFILE=<file>: the controller runs under cProfile (where the time goes).
    profile = os.environ.get("FLEETWAVE_BENCH_PROFILE")
    argv = [
        sys.executable,
        *(["-m", "cProfile", "-o", profile] if profile and not extra else []),
        "-m",
        "fleetwave",
        "controller",
        "run",
        "--kubeconfig",
        mk,
        "--helm",
        helm,
        "--metrics-port",
        str(processes.free_port()),
        "--health-port",
        str(processes.free_port()),
        *extra,
    ]
    with log.open("wb") as out:
        controller = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
    # One that exits unasked stops the bench at once, with the end of its log.
    _expected_exits[controller.pid] = processes.watch_exit(controller, "the controller", log)
    return controller


_expected_exits: dict[int, threading.Event] = {}


def stop_controller(controller: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL after 30 s, saying so: a slow shutdown is a finding, not a reason to
    leave the fleet running."""
    expected = _expected_exits.pop(controller.pid, None)
    if expected is not None:
        expected.set()
    controller.terminate()
    try:
        controller.wait(timeout=30)
    except subprocess.TimeoutExpired:
        print("controller did not exit within 30 s of SIGTERM; killed", flush=True)
        controller.kill()
        controller.wait()


async def measure(
    state: fleet.FleetState, trials: int, ratio_trials: int, cpu: ControllerCpu
) -> dict[str, Any]:
    mk = kubeclient.config_from_file(state.cluster(fleet.MANAGEMENT).kubeconfig)
    client = kubeclient.async_client(mk)
    members = [kubeclient.async_client(kubeclient.config_from_file(m.kubeconfig)) for m in state.members]
    try:
        delays: list[float] = []
        approvals: list[float] = []
        healths: list[float] = []
        if trials:
            gated = Watcher(client, "bench-gated")
            gated.start()
            await warm_up(client, gated)
            for trial in range(1, trials + 1):
                d, a = await gate_trial(client, gated, trial)
                delays.append(d)
                approvals.append(a)
                print(
                    f"trial {trial:3d}: delay gate -> staging write {d * 1000:7.1f} ms; "
                    f"approval -> production write {a * 1000:7.1f} ms",
                    flush=True,
                )
            gated.stop()
            await client.delete(kinds.resource("ClusterPromotion"), gated.name)
            healths = await health_trials(client, members[0], trials, "bench-health")
        free = Watcher(client, "bench-nogates")
        free.start()
        await client.apply(codecs.from_dict(policy_configmap(free.name, 0)), force=True)
        await client.apply(codecs.from_dict(promotion(free.name, gated=False)), force=True)
        await free.until(lambda: free.rollout().get("phase") == "Succeeded")
        ratios = []
        floors: list[float] = []
        if ratio_trials:
            await summary_floor.install(client)
        for trial in range(1, ratio_trials + 1):
            await asyncio.sleep(SETTLE)
            before = cpu.seconds()
            r = await rollout_time(client, free, trial)
            used = cpu.seconds() - before
            await asyncio.sleep(SETTLE)
            staged = await direct_time(members, trial, staged=True)
            await asyncio.sleep(SETTLE)
            d = await direct_time(members, trial, staged=False)
            await asyncio.sleep(SETTLE)
            f = await floor_time(client, members, [m.name for m in state.members], free.name, trial)
            ratios.append((r, staged, d, used))
            floors.append(f)
            print(
                f"ratio trial {trial}: 3-stage rollout {r:.2f} s (controller CPU {used:.2f} s), "
                f"direct apply stage by stage {staged:.2f} s "
                f"-> {r / staged:.2f}x (all members at once {d:.2f} s -> {r / d:.1f}x); with the shape's "
                f"two ClusterSummary writes per member {f:.2f} s -> {r / f:.2f}x that floor",
                flush=True,
            )
        free.stop()
        await client.delete(kinds.resource("ClusterPromotion"), free.name)
        staged_ratios = await staged_trials(client, members, ratio_trials, cpu) if ratio_trials else []
        return {
            "delay": delays,
            "approval": approvals,
            "health": healths,
            "ratio": ratios,
            "ratio_floor": floors,
            "staged_run_ratio": staged_ratios,
        }
    finally:
        for c in (client, *members):
            await c.close()


def report(results: dict[str, Any]) -> None:
    """Each part measured (a run may ask for gate trials only, or ratio trials only), then the JSON."""
    _report_gates(results)
    if results["ratio"]:
        _report_rollout_ratio(results)
    if results["staged_run_ratio"]:
        _report_staged_run_ratio(results["staged_run_ratio"])
    keys = ("delay", "approval", "health", "health_polled", "ratio", "ratio_floor", "staged_run_ratio")
    print(json.dumps({k: results[k] for k in keys}))


def _report_gates(results: dict[str, Any]) -> None:
    for key, label in (
        ("delay", "delay expires -> next stage's first write"),
        ("approval", "approval patched -> next stage's first write"),
        ("health", "member change opens a health check -> next stage's first write"),
        ("health_polled", "the same with member watches off (poll every 2 s)"),
    ):
        values = results[key]
        if not values:
            continue
        print(
            f"{label}: p50 {pct(values, 0.5) * 1000:.0f} ms, p99 {pct(values, 0.99) * 1000:.0f} ms, "
            f"max {max(values) * 1000:.0f} ms over {len(values)} trials (goal p99 < 500 ms)"
        )


def _report_rollout_ratio(results: dict[str, Any]) -> None:
    rollouts = [r for r, _, _, _ in results["ratio"]]
    staged = [s for _, s, _, _ in results["ratio"]]
    directs = [d for _, _, d, _ in results["ratio"]]
    used = [c for _, _, _, c in results["ratio"]]
    print(
        f"3-stage rollout without gates: median {statistics.median(rollouts):.2f} s; "
        f"direct apply stage by stage: median {statistics.median(staged):.2f} s "
        f"(ratio {statistics.median(rollouts) / statistics.median(staged):.2f}x, goal 1.3x); "
        f"to the 3 members at once: median {statistics.median(directs):.2f} s "
        f"(ratio {statistics.median(rollouts) / statistics.median(directs):.1f}x); "
        f"controller CPU per rollout: median {statistics.median(used):.2f} s"
    )
    if results.get("ratio_floor"):
        per_trial = statistics.median(r / f for r, f in zip(rollouts, results["ratio_floor"], strict=True))
        print(
            f"the same against direct + the shape's two ClusterSummary writes per member: median "
            f"{statistics.median(results['ratio_floor']):.2f} s, the rollout {per_trial:.2f}x that floor "
            "(median of the trials' ratios)"
        )


def _report_staged_run_ratio(trials: list[tuple[float, float, float]]) -> None:
    runs = [r for r, _, _ in trials]
    direct = [d for _, d, _ in trials]
    run_cpu = [c for _, _, c in trials]
    print(
        f"3-stage staged update run without waits: median {statistics.median(runs):.2f} s; direct apply "
        f"stage by stage: median {statistics.median(direct):.2f} s "
        f"(ratio {statistics.median(runs) / statistics.median(direct):.2f}x, goal 1.3x); "
        f"controller CPU per run: median {statistics.median(run_cpu):.2f} s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=25)
    parser.add_argument("--ratio-trials", type=int, default=5)
    parser.add_argument("--poll-trials", type=int, default=10, help="health trials with member watches off")
    parser.add_argument("--state-dir", type=Path, default=None, help="reuse/keep a fleet here")
    args = parser.parse_args()
    bins = binaries.ensure()
    with tempfile.TemporaryDirectory(prefix="fleetwave-bench-gates-") as tmp:
        state_dir = args.state_dir or Path(tmp) / "fleet"
        state = fleet.up(
            state_dir,
            members=fleet.default_member_labels(3),
            now=dt.datetime.now(dt.UTC),
            bin_dir=bins.directory,
        )
        controller = None
        try:
            mgmt = kubeclient.client(kubeclient.config_from_file(state.cluster(fleet.MANAGEMENT).kubeconfig))
            setup.install_and_register(mgmt, state, setup.DemoConfig())
            mgmt.close()
            controller = start_controller(state, bins.path("helm"), Path(tmp) / "controller.log")
            cpu = ControllerCpu(controller.pid)
            results = asyncio.run(measure(state, args.trials, args.ratio_trials, cpu))
            # The same health gate with member watches off (the poll alone), same fleet, same run.
            stop_controller(controller)
            controller = start_controller(
                state, bins.path("helm"), Path(tmp) / "controller-polled.log", ("--member-watches", "0")
            )
            results["health_polled"] = (
                asyncio.run(poll_only(state, args.poll_trials)) if args.poll_trials else []
            )
            report(results)
        finally:
            if controller is not None:
                stop_controller(controller)
            if args.state_dir is None:
                fleet.down(state_dir)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
