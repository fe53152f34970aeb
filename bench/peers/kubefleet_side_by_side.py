"""KubeFleet side by side with fleetwave on the same light-member fleet (issue 47, docs/adr/0116).

    .venv/bin/python bench/peers/kubefleet_side_by_side.py [--members 20] [--runs 10]
        [--stages 1,9,10] [--kubefleet-source DIR] [--order kubefleet,fleetwave] [--budget 900]
        [--keep-logs DIR]

Each system gets a fresh local fleet of the same shape, one after the other: a management control
plane (API server, its own etcd, kube-controller-manager) and `--members` light member API servers
(API server only, members' own etcd; ADR 0066). They cannot share one management API server:
fleetwave serves KubeFleet's own API groups. On it:
- KubeFleet, built from the pinned source by tools/kubefleet/build.sh (`--kubefleet-source`: a clone
  or mirror of its repository): its CRDs, its hub agent and one member agent per member, webhooks and
  leader election off; the MemberClusters join through the agents.
- fleetwave: `install --upstream-apis`, its controller process, and each member's kubeconfig in the
  Secret fleetwave reads for a KubeFleet MemberCluster (push mode: nothing runs on the members).
Then the same YAML on both (its sha256 is printed): the MemberClusters, labelled into three stages
(`--stages`, 1/9/10 members by default), `--runs` namespaces each holding a ConfigMap, selected by a
ClusterResourcePlacement each (PickAll, strategy External), one ClusterStagedUpdateStrategy of three
stages (maxConcurrency 100%, an Approval after the first and after the second), and `--runs`
ClusterStagedUpdateRuns created at once. The benchmark approves a request as soon as every cluster
of its stage shows Succeeded, and measures, from watches on the hub and on every member:
- approval patched -> the next stage shows Started in the run's status (startTime or Progressing=True);
- approval patched -> the ConfigMap on the first member of the next stage to have it;
- run created -> the ConfigMap on its first-stage member; run created -> the run Succeeded;
- CPU seconds and peak RSS of the controller processes (KubeFleet: hub agent + member agents;
  fleetwave: the controller's process tree) from the placements' creation to the last Succeeded, and
  with nothing placed (members joined) over IDLE seconds; the management API server's beside them.
The load average at the start and the end is printed: the machine may be shared with others.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import datetime as dt
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import kubefleet_agents as kfa
import yaml
from lightkube import ALL_NS, AsyncClient, codecs
from lightkube.generic_resource import create_global_resource
from lightkube.resources.core_v1 import ConfigMap
from lightkube.types import PatchType, on_error_retry

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import bench_scale as bs
from fleetwave.api import families
from fleetwave.kube import client as kubeclient
from fleetwave.local import binaries, fleet, processes
from fleetwave.mgmt import install, registration

Obj = dict[str, Any]
PLACEMENT_API = "placement.kubernetes-fleet.io/v1beta1"
CLUSTER_API = "cluster.kubernetes-fleet.io/v1beta1"
STAGE_LABEL = "bench-stage"
STAGE_NAMES = ("canary", "early", "rest")
STRATEGY = "three-stages"
CONTENT = "settings"  # the ConfigMap each placement's namespace holds
IDLE = 10.0  # seconds of idle CPU reading
RUN = create_global_resource(
    "placement.kubernetes-fleet.io", "v1beta1", "ClusterStagedUpdateRun", "clusterstagedupdateruns"
)
APPROVAL = create_global_resource(
    "placement.kubernetes-fleet.io", "v1beta1", "ClusterApprovalRequest", "clusterapprovalrequests"
)
PLACEMENT = create_global_resource(
    "placement.kubernetes-fleet.io", "v1beta1", "ClusterResourcePlacement", "clusterresourceplacements"
)
STRATEGY_KIND = create_global_resource(
    "placement.kubernetes-fleet.io", "v1beta1", "ClusterStagedUpdateStrategy", "clusterstagedupdatestrategies"
)


# --- the YAML both systems get ------------------------------------------------------------------


def stage_of(sizes: list[int]) -> list[int]:
    """Member index -> stage index (the first sizes[0] members are stage 0, and so on)."""
    return [k for k, size in enumerate(sizes) for _ in range(size)]


def member_docs(names: list[str], sizes: list[int]) -> list[Obj]:
    """KubeFleet MemberClusters, labelled with their stage (KubeFleet's agents join them; fleetwave
    reads each one's kubeconfig from its Secret)."""
    identity = {"kind": "ServiceAccount", "name": "fleet-member-agent", "namespace": "fleet-system"}
    return [
        {
            "apiVersion": CLUSTER_API,
            "kind": "MemberCluster",
            "metadata": {"name": name, "labels": {STAGE_LABEL: str(k + 1)}},
            "spec": {"identity": identity},
        }
        for name, k in zip(names, stage_of(sizes), strict=True)
    ]


def placement_docs(runs: int) -> list[Obj]:
    docs: list[Obj] = []
    for i in range(1, runs + 1):
        ns = f"bench-{i}"
        selector = {"group": "", "version": "v1", "kind": "Namespace", "name": ns}
        docs += [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": CONTENT, "namespace": ns},
                "data": {"greeting": f"hello from run {i}"},
            },
            {
                "apiVersion": PLACEMENT_API,
                "kind": "ClusterResourcePlacement",
                "metadata": {"name": ns},
                "spec": {
                    "resourceSelectors": [selector],
                    "policy": {"placementType": "PickAll"},
                    "strategy": {"type": "External"},
                },
            },
        ]
    return docs


def strategy_doc() -> Obj:
    stages = []
    for k, name in enumerate(STAGE_NAMES):
        stage: Obj = {
            "name": name,
            "labelSelector": {"matchLabels": {STAGE_LABEL: str(k + 1)}},
            "maxConcurrency": "100%",
        }
        if k < len(STAGE_NAMES) - 1:
            stage["afterStageTasks"] = [{"type": "Approval"}]
        stages.append(stage)
    return {
        "apiVersion": PLACEMENT_API,
        "kind": "ClusterStagedUpdateStrategy",
        "metadata": {"name": STRATEGY},
        "spec": {"stages": stages},
    }


def run_doc(i: int) -> Obj:
    """A run of the placement's newest snapshot (no index: current KubeFleet snapshots an External
    placement when the run starts; fleetwave takes the newest)."""
    return {
        "apiVersion": PLACEMENT_API,
        "kind": "ClusterStagedUpdateRun",
        "metadata": {"name": f"bench-{i}"},
        "spec": {"placementName": f"bench-{i}", "stagedRolloutStrategyName": STRATEGY, "state": "Run"},
    }


def all_yaml(names: list[str], sizes: list[int], runs: int) -> str:
    docs = [*member_docs(names, sizes), *placement_docs(runs), strategy_doc()]
    docs += [run_doc(i) for i in range(1, runs + 1)]
    return yaml.safe_dump_all(docs, sort_keys=False)


# --- observation: watches on the hub and on every member -----------------------------------------


def plain(obj: Any) -> Obj:
    """A lightkube object as the dict the API server sent."""
    out: Obj = obj.to_dict()
    return out


def condition_true(conditions: list[Obj] | None, kind: str) -> bool:
    return any(c.get("type") == kind and c.get("status") == "True" for c in conditions or [])


def stage_started(stage: Obj) -> bool:
    return bool(stage.get("startTime")) or condition_true(stage.get("conditions"), "Progressing")


def stage_clusters_done(stage: Obj) -> bool:
    clusters = stage.get("clusters") or []
    return bool(clusters) and all(condition_true(c.get("conditions"), "Succeeded") for c in clusters)


class Observer:
    """When each run's stages were seen started and done, each run Succeeded, each approval request
    created, and each placement's ConfigMap on each member: receive times of watch events."""

    def __init__(self, hub: AsyncClient, members: dict[str, AsyncClient], alive: Callable[[], bool]) -> None:
        self.hub, self.members, self.alive = hub, members, alive
        self.started: dict[tuple[str, int], float] = {}
        self.stage_done: dict[tuple[str, int], float] = {}
        self.succeeded: dict[str, float] = {}
        self.clusters: dict[str, int] = {}  # run -> clusters listed over its stages
        # (run, stage) -> {request name: generation}: fleetwave opens one approval under two names
        # (upstream's `<run>-after-<stage>` and seed 004's `<run>-<stage>`, ADR 0112)
        self.requests: dict[tuple[str, str], dict[str, int]] = {}
        self.content: dict[tuple[str, str], float] = {}  # (member, namespace) -> first seen
        self.changed = asyncio.Condition()
        self.tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        self.tasks = [asyncio.create_task(self._runs()), asyncio.create_task(self._requests())]
        self.tasks += [asyncio.create_task(self._content(n, c)) for n, c in self.members.items()]

    async def stop(self) -> None:
        for task in self.tasks:
            task.cancel()
        await asyncio.wait(self.tasks, timeout=5.0)

    async def until(self, ready: Callable[[], bool], budget: float) -> None:
        """Until `ready()`; fails when the budget is spent or a controller process exited."""
        deadline = time.monotonic() + budget
        async with self.changed:
            while not ready():
                if not self.alive():
                    raise RuntimeError("a controller process exited during the runs (see its log)")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"runs not done within {budget:.0f} s")
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.changed.wait(), min(left, 1.0))

    async def _seen(self) -> None:
        async with self.changed:
            self.changed.notify_all()

    def run_seen(self, name: str, status: Obj, at: float) -> None:
        stages = status.get("stagesStatus") or []
        for k, stage in enumerate(stages):
            if stage_started(stage):
                self.started.setdefault((name, k), at)
            if stage_clusters_done(stage):
                self.stage_done.setdefault((name, k), at)
        self.clusters[name] = sum(len(s.get("clusters") or []) for s in stages)
        if condition_true(status.get("conditions"), "Succeeded"):
            self.succeeded.setdefault(name, at)

    async def _runs(self) -> None:
        async for _, obj in self.hub.watch(RUN, on_error=on_error_retry):
            run = plain(obj)
            self.run_seen(run["metadata"]["name"], run.get("status") or {}, time.time())
            await self._seen()

    async def _requests(self) -> None:
        async for _, obj in self.hub.watch(APPROVAL, on_error=on_error_retry):
            request = plain(obj)
            spec, meta = request.get("spec") or {}, request["metadata"]
            key = (str(spec.get("parentStageRollout")), str(spec.get("targetStage")))
            self.requests.setdefault(key, {}).setdefault(meta["name"], int(meta.get("generation") or 1))
            await self._seen()

    async def _content(self, member: str, client: AsyncClient) -> None:
        async for _, cm in client.watch(ConfigMap, namespace=ALL_NS, on_error=on_error_retry):
            if cm.metadata and cm.metadata.name == CONTENT:
                self.content.setdefault((member, str(cm.metadata.namespace)), time.time())
                await self._seen()


def approved(generation: int) -> Obj:
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "type": "Approved",
        "status": "True",
        "reason": "BenchmarkApproved",
        "message": "approved by the side-by-side benchmark",
        "lastTransitionTime": now,
        "observedGeneration": generation,
    }


@dataclass
class Trial:
    """One run: when it was created and when each of its after-stage approvals was patched."""

    run: str
    created: float
    approvals: list[float] = field(default_factory=list)


async def drive(hub: AsyncClient, obs: Observer, i: int, budget: float) -> Trial:
    """Create run i, approve each after-stage request once its stage's clusters all succeeded, and
    wait until the run Succeeded."""
    trial = Trial(f"bench-{i}", time.time())
    await hub.create(codecs.from_dict(run_doc(i)))
    for k, stage in enumerate(STAGE_NAMES[:-1]):
        key = (trial.run, stage)
        await obs.until(lambda: key in obs.requests and (trial.run, k) in obs.stage_done, budget)  # noqa: B023
        names = obs.requests[key]
        # The upstream name, the one KubeFleet opens, on both systems.
        name = f"{trial.run}-after-{stage}" if f"{trial.run}-after-{stage}" in names else next(iter(names))
        generation = names[name]
        patch = {"status": {"conditions": [approved(generation)]}}
        trial.approvals.append(time.time())
        await hub.patch(APPROVAL.Status, name, patch, patch_type=PatchType.MERGE)
    await obs.until(lambda: trial.run in obs.succeeded, budget)
    return trial


# --- the controllers' processes ------------------------------------------------------------------


def pss_bytes(pids: list[int]) -> int:
    """Summed proportional set size: a page shared by k of the processes (the one binary's text
    under 20 member agents, a forked worker's inherited heap) counts 1/k in each, so the sum is what
    the processes together hold. RSS would count such a page k times."""
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError, ValueError):
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1]) * 1024
                    break
    return total


class Usage:
    """CPU seconds of a set of processes, and the peaks of their summed PSS and RSS, sampled every
    half second."""

    def __init__(self, pids: Callable[[], list[int]]) -> None:
        self.pids = pids
        self.peak_pss = self.peak_rss = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def cpu(self) -> float:
        return bs.cpu_seconds(self.pids())

    def memory(self) -> tuple[int, int]:
        pids = self.pids()
        return pss_bytes(pids), bs.rss_bytes(pids)

    def __enter__(self) -> Usage:
        self.peak_pss, self.peak_rss = self.memory()
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(5)

    def _sample(self) -> None:
        while not self._stop.wait(0.5):
            pss, rss = self.memory()
            self.peak_pss, self.peak_rss = max(self.peak_pss, pss), max(self.peak_rss, rss)


@dataclass
class System:
    """One system started on its fleet: its controllers' pids, how to stop them, how long it took."""

    name: str
    pids: Callable[[], list[int]]
    stop: Callable[[], None]
    setup_s: float
    version: str
    alive: Callable[[], bool]
    metrics: bool = False  # fleetwave: its /metrics tell where a pass's time went


def apply_docs(kubeconfig: str, docs: list[Obj]) -> None:
    with kubeclient.client(kubeclient.config_from_file(kubeconfig)) as client:
        for doc in docs:
            client.create(codecs.from_dict(doc))


def start_kubefleet(
    state: fleet.FleetState, bins: binaries.Binaries, kf: Path, log_dir: Path, sizes: list[int]
) -> System:
    started = time.monotonic()
    mk = state.cluster(fleet.MANAGEMENT).kubeconfig
    kfa.install_crds(state, bins, kf)
    names = [m.name for m in state.members]
    apply_docs(mk, [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "fleet-system"}}])
    state, agents = kfa.start(state, kf, log_dir)
    apply_docs(mk, member_docs(names, sizes))
    kfa.wait_joined(state, agents)
    commit = (kf / "COMMIT").read_text().strip()

    def stop() -> None:
        processes.stop(agents, grace=5.0)

    pids = [a.pid for a in agents]
    return System(
        "KubeFleet",
        lambda: pids,
        stop,
        time.monotonic() - started,
        f"kubefleet {commit[:8]}",
        alive=lambda: all(processes.is_ours(a) for a in agents),
    )


def kubeconfig_secret(member: fleet.ClusterInfo) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": families.kubeconfig_secret_name(member.name),
            "namespace": install.NAMESPACE,
            "labels": {registration.MEMBER_SECRET_LABEL: member.name},
        },
        "data": {
            registration.KUBECONFIG_KEY: base64.b64encode(Path(member.kubeconfig).read_bytes()).decode()
        },
    }


def members_ready(kubeconfig: str, names: list[str], timeout: float = 300.0) -> None:
    """Until fleetwave shows every MemberCluster Ready (its probe reached the member)."""
    deadline = time.monotonic() + timeout
    with kubeclient.client(kubeclient.config_from_file(kubeconfig)) as hub:
        while time.monotonic() < deadline:
            ready = {plain(o)["metadata"]["name"] for o in hub.list(kfa.MEMBER_CLUSTER) if _ready(o)}
            if set(names) <= ready:
                return
            time.sleep(0.5)
    raise RuntimeError(f"fleetwave: members not Ready after {timeout:.0f} s")


def _ready(obj: Any) -> bool:
    return condition_true((obj.status or {}).get("conditions"), "Ready") or kfa.joined(obj)


def start_fleetwave(
    state: fleet.FleetState, bins: binaries.Binaries, _kf: Path, log_dir: Path, sizes: list[int]
) -> System:
    started = time.monotonic()
    mk = state.cluster(fleet.MANAGEMENT).kubeconfig
    with kubeclient.client(kubeclient.config_from_file(mk)) as client:
        install.install(client, upstream_apis=True)
    names = [m.name for m in state.members]
    apply_docs(mk, [kubeconfig_secret(m) for m in state.members])
    log_dir.mkdir(parents=True, exist_ok=True)
    # Leader election off, as KubeFleet's agents run here: one replica, and no lease to lose to a
    # loaded machine in the middle of a measurement.
    log = log_dir / "controller.log"
    controller = bs.start_controller(state, bins.path("helm"), log, 1, extra=("--no-leader-elect",))
    apply_docs(mk, member_docs(names, sizes))
    members_ready(mk, names)

    def stop() -> None:
        controller.terminate()
        try:
            controller.wait(30)
        except subprocess.TimeoutExpired:
            controller.kill()

    git = ["git", "-C", str(kfa.ROOT), "rev-parse", "--short", "HEAD"]
    version = subprocess.run(git, check=False, capture_output=True, text=True).stdout
    return System(
        "fleetwave",
        lambda: bs.tree(controller.pid),
        stop,
        time.monotonic() - started,
        f"fleetwave {version.strip()}",
        alive=lambda: controller.poll() is None,
        metrics=True,
    )


Starter = Callable[[fleet.FleetState, binaries.Binaries, Path, Path, list[int]], System]
SYSTEMS: dict[str, Starter] = {"kubefleet": start_kubefleet, "fleetwave": start_fleetwave}


# --- one system's run ----------------------------------------------------------------------------


def scheduled(obj: Any) -> bool:
    return condition_true((obj.status or {}).get("conditions"), "ClusterResourcePlacementScheduled")


async def wait_scheduled(hub: AsyncClient, runs: int, budget: float = 300.0) -> None:
    deadline = time.monotonic() + budget
    while time.monotonic() < deadline:
        done = [o async for o in hub.list(PLACEMENT) if scheduled(o)]
        if len(done) >= runs:
            return
        await asyncio.sleep(0.2)
    raise RuntimeError(f"placements not scheduled after {budget:.0f} s")


def stage_members(names: list[str], sizes: list[int]) -> list[list[str]]:
    out: list[list[str]] = [[] for _ in sizes]
    for name, k in zip(names, stage_of(sizes), strict=True):
        out[k].append(name)
    return out


def latencies(obs: Observer, trials: list[Trial], stages: list[list[str]]) -> dict[str, list[float]]:
    """Per approval: -> next stage Started, -> the next stage's first content; per run: create -> first
    content, create -> Succeeded (seconds)."""
    out: dict[str, list[float]] = {"started": [], "content": [], "first_content": [], "succeeded": []}
    for t in trials:
        seen = [[obs.content[(m, t.run)] for m in stage if (m, t.run) in obs.content] for stage in stages]
        for k, at in enumerate(t.approvals):
            out["started"].append(obs.started[(t.run, k + 1)] - at)
            out["content"].append(min(seen[k + 1]) - at)
        out["first_content"].append(min(seen[0]) - t.created)
        out["succeeded"].append(obs.succeeded[t.run] - t.created)
    return out


def all_content(obs: Observer, names: list[str], runs: int) -> bool:
    return all((m, f"bench-{i}") in obs.content for m in names for i in range(1, runs + 1))


async def rollouts(
    hub: AsyncClient, obs: Observer, args: argparse.Namespace, names: list[str]
) -> list[Trial]:
    """The placements and the strategy, then every run at once, driven to Succeeded."""
    for doc in [*placement_docs(args.runs), strategy_doc()]:
        await hub.create(codecs.from_dict(doc))
    await wait_scheduled(hub, args.runs)
    trials = await asyncio.gather(*(drive(hub, obs, i, args.budget) for i in range(1, args.runs + 1)))
    await obs.until(lambda: all_content(obs, names, args.runs), 60.0)
    return list(trials)


async def workload(state: fleet.FleetState, system: System, args: argparse.Namespace) -> Obj:
    mk = state.cluster(fleet.MANAGEMENT).kubeconfig
    hub = kubeclient.async_client(kubeclient.config_from_file(mk))
    members = {
        m.name: kubeclient.async_client(kubeclient.config_from_file(m.kubeconfig)) for m in state.members
    }
    obs = Observer(hub, members, system.alive)
    obs.start()
    names = list(members)
    apiserver = Usage(lambda: [management_apiserver(state)])
    before = Passes.read() if system.metrics else None
    try:
        with Usage(system.pids) as ctl, apiserver:
            cpu0, api0, t0 = ctl.cpu(), apiserver.cpu(), time.monotonic()
            trials = await rollouts(hub, obs, args, names)
            cpu, api, batch = ctl.cpu() - cpu0, apiserver.cpu() - api0, time.monotonic() - t0
        figures: Obj = {
            k: [round(v, 4) for v in vs]
            for k, vs in latencies(obs, trials, stage_members(names, args.sizes)).items()
        }
        return {
            **figures,
            "clusters_per_run": sorted(set(obs.clusters.values())),
            "batch_s": round(batch, 2),
            "cpu_s": round(cpu, 2),
            "peak_pss_mib": round(ctl.peak_pss / 2**20),
            "peak_rss_mib": round(ctl.peak_rss / 2**20),
            "apiserver_cpu_s": round(api, 2),
            "apiserver_peak_rss_mib": round(apiserver.peak_rss / 2**20),
            **({"passes": Passes.read().since(before)} if before else {}),
        }
    finally:
        await obs.stop()
        for client in [hub, *members.values()]:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(client.close(), 5.0)


@dataclass(frozen=True)
class Passes:
    """fleetwave's own account of its reconciles (its /metrics): per controller, the reconciles,
    the seconds spent in them, the seconds their keys waited for a worker; the event loop's lag."""

    reconciles: dict[str, tuple[int, float]]
    waits: dict[str, tuple[int, float]]
    lag: dict[str, int]

    @staticmethod
    def read() -> Passes:
        reconciles = bs.reconcile_seconds()
        return Passes(reconciles, dict(bs.WAITS), dict(bs.LAG))

    def since(self, before: Passes) -> Obj:
        out: Obj = {"event_loop_lag": bs.lag_quantiles(before.lag, self.lag)}
        for name, (count, spent) in sorted(self.reconciles.items()):
            n = count - before.reconciles.get(name, (0, 0.0))[0]
            if n:
                waited = self.waits.get(name, (0, 0.0))[1] - before.waits.get(name, (0, 0.0))[1]
                took = spent - before.reconciles.get(name, (0, 0.0))[1]
                out[name] = {"reconciles": n, "seconds": round(took, 2), "waited_s": round(waited, 2)}
        return out


def management_apiserver(state: fleet.FleetState) -> int:
    return next(p.pid for p in state.processes if p.name == f"{fleet.MANAGEMENT}/apiserver")


def idle(state: fleet.FleetState, system: System) -> Obj:
    """Members joined, nothing placed: the controllers' RSS and CPU over IDLE seconds."""
    time.sleep(2.0)  # let start-up work settle
    ctl, apiserver = Usage(system.pids), Usage(lambda: [management_apiserver(state)])
    cpu0, api0 = ctl.cpu(), apiserver.cpu()
    time.sleep(IDLE)
    pss, rss = ctl.memory()
    return {
        "idle_pss_mib": round(pss / 2**20),
        "idle_rss_mib": round(rss / 2**20),
        "idle_cpu_s": round(ctl.cpu() - cpu0, 2),
        "idle_apiserver_cpu_s": round(apiserver.cpu() - api0, 2),
        "processes": len(system.pids()),
    }


def measure(name: str, args: argparse.Namespace, bins: binaries.Binaries, kf: Path, tmp: Path) -> Obj:
    """A fresh fleet, the system on it, idle figures, the staged runs; the fleet torn down after."""
    state_dir = tmp / name / "fleet"
    state = bs.light_fleet(state_dir, args.members, bins)
    system: System | None = None
    try:
        system = SYSTEMS[name](state, bins, kf, tmp / name / "logs", args.sizes)
        state = fleet.load(state_dir) or state
        print(
            f"{system.version}: started, {args.members} members ready in {system.setup_s:.1f} s", flush=True
        )
        out = {"system": system.name, "version": system.version, "setup_s": round(system.setup_s, 1)}
        out |= idle(state, system)
        out |= asyncio.run(workload(state, system, args))
        print(json.dumps(out), flush=True)
        return out
    finally:
        if system is not None:
            system.stop()
        fleet.down(state_dir)


# --- the table -----------------------------------------------------------------------------------


def _ms(values: list[float], q: float) -> float:
    return round(bs.pct(values, q) * 1000)


def _s(values: list[float], q: float) -> float:
    return round(bs.pct(values, q), 2)


def rows(r: Obj, runs: int) -> Iterator[tuple[str, float, str]]:
    """(measure, value, unit) for one system's result; lower is better for every one of them."""
    n = len(r["started"])
    yield (
        f"approval patched -> next stage Started in status, p50 ({n} approvals)",
        _ms(r["started"], 0.5),
        "ms",
    )
    yield "approval patched -> next stage Started in status, p99", _ms(r["started"], 0.99), "ms"
    yield "approval patched -> content on the next stage's first member, p50", _ms(r["content"], 0.5), "ms"
    yield "approval patched -> content on the next stage's first member, p99", _ms(r["content"], 0.99), "ms"
    yield (
        f"run created -> content on its first-stage member, p50 ({runs} runs)",
        _s(r["first_content"], 0.5),
        "s",
    )
    yield "run created -> run Succeeded, p50", _s(r["succeeded"], 0.5), "s"
    yield "run created -> run Succeeded, max", _s(r["succeeded"], 1.0), "s"
    yield "placements created -> every run Succeeded", r["batch_s"], "s"
    yield "controllers CPU seconds, placements created -> every run Succeeded", r["cpu_s"], "s"
    yield "controllers peak memory during the runs (summed PSS)", r["peak_pss_mib"], "MiB"
    yield "controllers peak memory during the runs (summed RSS)", r["peak_rss_mib"], "MiB"
    yield "controllers idle memory, members joined, nothing placed (summed PSS)", r["idle_pss_mib"], "MiB"
    yield "controllers idle memory (summed RSS)", r["idle_rss_mib"], "MiB"
    yield f"controllers idle CPU seconds over {IDLE:.0f} s", r["idle_cpu_s"], "s"
    yield "management API server CPU seconds during the runs", r["apiserver_cpu_s"], "s"
    yield "management API server peak RSS during the runs", r["apiserver_peak_rss_mib"], "MiB"


def _ratio(kf: float, fw: float) -> str:
    return f"{kf / fw:.2f}" if fw > 0 else "-"


def table(kf: Obj, fw: Obj, runs: int) -> str:
    lines = [
        "| measure | KubeFleet | fleetwave | KubeFleet / fleetwave |",
        "|---|---|---|---|",
    ]
    for (label, a, unit), (_, b, _) in zip(rows(kf, runs), rows(fw, runs), strict=True):
        lines.append(f"| {label} | {a} {unit} | {b} {unit} | {_ratio(a, b)} |")
    lines.append(
        f"| (context) controller processes | {kf['processes']} | {fw['processes']} | |\n"
        f"| (context) start-up until every member joined / Ready "
        f"| {kf['setup_s']} s | {fw['setup_s']} s | |\n"
        f"| (context) clusters in each run | {kf['clusters_per_run']} | {fw['clusters_per_run']} | |"
    )
    return "\n".join(lines)


def header(args: argparse.Namespace, text: str, kf: Path) -> str:
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return (
        f"date {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC; {os.cpu_count()} cores, {mem:.0f} GiB, "
        f"{platform.python_implementation()} {platform.python_version()}\n"
        f"load average at start (1/5/15 min): {load}\n"
        f"KubeFleet {(kf / 'COMMIT').read_text().strip()} (tools/kubefleet/build.sh)\n"
        f"{args.members} light members, stages {'/'.join(map(str, args.sizes))}, {args.runs} runs at once; "
        f"the same YAML on both, sha256 {hashlib.sha256(text.encode()).hexdigest()[:16]}"
    )


def _keep_logs(tmp: Path, into: str | None) -> None:
    """Every process's log of both systems (agents, API servers, the controller) into `into`, before
    the temporary directory goes: a run that fails in setup is otherwise left with no cause."""
    if into is None:
        return
    for log in tmp.rglob("*.log"):
        target = Path(into) / log.relative_to(tmp)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(log, target)
    print(f"logs kept in {into}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int, default=20)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--stages", default="1,9,10", help="members per stage, in order (three stages)")
    parser.add_argument(
        "--kubefleet-source", default=None, help="a clone or mirror of kubefleet-dev/kubefleet"
    )
    parser.add_argument("--order", default="kubefleet,fleetwave")
    parser.add_argument("--budget", type=float, default=900.0, help="seconds each wait of a run may take")
    parser.add_argument("--print-yaml", action="store_true", help="print the YAML both systems get, and exit")
    parser.add_argument("--keep-logs", default=None, help="copy every log into this directory at the end")
    args = parser.parse_args()
    args.sizes = [int(s) for s in args.stages.split(",")]
    if len(args.sizes) != len(STAGE_NAMES) or sum(args.sizes) != args.members:
        parser.error(f"--stages must give {len(STAGE_NAMES)} sizes adding up to --members")
    text = all_yaml([f"member-{i + 1}" for i in range(args.members)], args.sizes, args.runs)
    if args.print_yaml:
        print(text, end="")
        return
    kf = kfa.build(args.kubefleet_source)
    bins = binaries.ensure()
    print(header(args, text, kf), flush=True)
    results: dict[str, Obj] = {}
    with tempfile.TemporaryDirectory(prefix="fleetwave-bench-kubefleet-") as tmp:
        try:
            for name in args.order.split(","):
                results[name] = measure(name, args, bins, kf, Path(tmp))
        finally:
            _keep_logs(Path(tmp), args.keep_logs)
    if {"kubefleet", "fleetwave"} <= set(results):  # (one system alone: its JSON line above)
        print("\n" + table(results["kubefleet"], results["fleetwave"], args.runs))
    for name, result in results.items():
        if "passes" in result:
            print(
                f"{name} reconciles during the runs (count, seconds in them, seconds keys waited): "
                + json.dumps(result["passes"])
            )
    print("load average at end (1/5/15 min): " + ", ".join(f"{x:.2f}" for x in os.getloadavg()))
    print(json.dumps(results))


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    with contextlib.suppress(KeyboardInterrupt):
        main()
