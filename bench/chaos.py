"""Faults survived, measured (ADR 0115): two rollouts run to completion through crashes and outages.

    .venv/bin/python bench/chaos.py [--seed 46] [--kills 30] [--lease 3]

A real local fleet (management + 3 members, the members on an etcd of their own) and three
`fleetwave controller run` replicas on the leader Lease (`--lease` seconds). Two rollouts in turn:

  * promotion: a seed-002-style ClusterPromotion of a Helm chart, dev (auto, 15 s delay) ->
    staging (manual approval) -> production;
  * staged run: a seed-004-style ClusterResourcePlacement (External) + ClusterStagedUpdateRun,
    staging (TimedWait 15 s) -> canary (sorted by `order`, Approval after).

During each, the leader is SIGKILLed again and again at seeded random moments (a gap of 1-4 s
after the previous takeover; a killed replica restarts 0-1 s later as a follower, as a Deployment
would restart it; a replica that exits on its own is restarted too); the last gate is approved only
once `--kills` kills were made, and the killing goes on until the rollout ends. Once per rollout:
the management API server and its etcd are SIGKILLed and restarted mid-stage; a member's API
server is restarted mid-install (promotion: while `helm upgrade` runs against it; staged run: while
its stage applies); a member's API server is frozen (SIGSTOP) from before a gate until well past it.

After each rollout: gates skipped (a stage started before its delay/wait ended or its approval),
stages out of order (first content seen on the members), clusters updated twice for one revision
(a member's object changed more than once, or a Helm release past revision 1), objects lost (not
on a member at the end) or left behind (still on a member once the rollout is deleted), and
whether the rollout completed. Each fault is printed with its moment (seconds since the rollout
was applied) and its time to recover: a leader kill, until another live replica holds the Lease;
the management restart, until a live replica renewed the Lease after it; a member's restart or
outage, until the member has the content. Exit status 1 if any figure is not 0 or a rollout did not
complete. Bounded: each rollout gives up after --budget seconds. On 2 cores the defaults take
6-10 minutes (389 and 558 s, fleet start-up included); docs/benchmarks.md has the figures.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx2
from lightkube import ApiError, Client, codecs
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.coordination_v1 import Lease
from lightkube.resources.core_v1 import ConfigMap, Namespace, Secret
from lightkube.types import PatchType

from fleetwave.kube import client as kubeclient
from fleetwave.kube import kinds
from fleetwave.local import api, binaries, chartrepo, fleet, processes
from fleetwave.mgmt import install, registration

API = f"{kinds.GROUP}/{kinds.VERSION}"
MEMBERS_NS = "chaos-members"
LEASE = ("fleetwave-controller", install.NAMESPACE)
LABELS = {  # both seeds' labels on the same three members
    "member-1": {"env": "dev", "environment": "canary", "order": "2"},
    "member-2": {"env": "staging", "environment": "staging"},
    "member-3": {"env": "prod", "environment": "canary", "order": "1"},
}
DELAY = 15  # seconds: the promotion's dev delay and the staged run's TimedWait
KILL_GAP = (1.0, 4.0)
FROZEN_PAST_GATE = 10.0  # seconds a frozen member stays frozen after its gate opened
CHART = Path(__file__).resolve().parents[1] / "tests" / "charts" / "hello"
Obj = dict[str, Any]


@dataclasses.dataclass
class Fault:
    kind: str
    rollout: str
    at: float  # seconds since the rollout was applied
    note: str = ""
    recovered: float | None = None  # seconds from the fault to recovery


class Replica:
    """One `fleetwave controller run` process; a restart is a fresh identity (a new pod)."""

    def __init__(self, index: int, kubeconfig: str, helm: str, lease: int, logs: Path) -> None:
        self.index, self.kubeconfig, self.helm, self.lease, self.logs = index, kubeconfig, helm, lease, logs
        self.generation = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self.restart_at: float | None = None
        self.exits = 0  # exits of its own (a lost lease), not kills

    @property
    def identity(self) -> str:
        return f"chaos-r{self.index}-{self.generation}"

    def start(self) -> None:
        self.generation += 1
        self.restart_at = None
        ports = [str(processes.free_port()), str(processes.free_port())]
        argv = [sys.executable, "-m", "fleetwave", "controller", "run", "--kubeconfig", self.kubeconfig]
        argv += ["--helm", self.helm, "--metrics-port", ports[0], "--health-port", ports[1]]
        argv += ["--identity", self.identity, "--allow-loopback-targets", "--lease-duration", str(self.lease)]
        with (self.logs / f"r{self.index}.log").open("ab") as out:
            self.proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGKILL)  # helm children included, as a pod's would be
        self.proc.wait()

    def stop(self) -> None:
        if self.alive():
            assert self.proc is not None
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.kill()


def lease(mgmt: Client) -> Lease | None:
    try:
        return mgmt.get(Lease, LEASE[0], namespace=LEASE[1])
    except Exception:  # the API server is down or warming up
        return None


def _cmdline(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")[:-1]


class Fleet:
    """The local fleet, with restarts of its processes (same argv, same data)."""

    def __init__(self, state: fleet.FleetState) -> None:
        self.state = state

    def record(self, name: str) -> processes.ProcessRecord:
        return next(p for p in self.state.processes if p.name == name)

    def restart(self, names: list[str], *, frozen_for: float = 0.0) -> None:
        """SIGKILL the processes (a crash), then start each again with its own argv, in order."""
        records = [self.record(n) for n in names]
        argvs = [_cmdline(r.pid) for r in records]
        for r in records:
            os.killpg(r.pid, signal.SIGKILL)
        processes.stop(records, grace=5)
        time.sleep(frozen_for)
        fresh = []
        for r, argv in zip(records, argvs, strict=True):
            env = {"GOMAXPROCS": "2"} if r.name.endswith("/apiserver") else None
            fresh.append(processes.start(r.name, argv, log=Path(r.log), marker=r.marker, env=env))
            if not r.name.endswith("/apiserver"):
                time.sleep(1.0)  # etcd listens within a second; the API server retries anyway
        self.state = fleet.replace_processes(self.state, names, fresh)

    def signal(self, name: str, sig: signal.Signals) -> None:
        os.killpg(self.record(name).pid, sig)

    def ready(self, cluster: str) -> bool:
        return api.is_ready(self.state.cluster(cluster).server, Path(self.state.ca_cert), timeout=1.0)


def helm_upgrade_running() -> bool:
    """A `helm upgrade` process exists (the replicas' helm children)."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv = _cmdline(int(entry.name))
            except (OSError, ValueError):
                continue
            if len(argv) > 1 and argv[0].endswith("helm") and argv[1] == "upgrade":
                return True
    return False


def member_client(kubeconfig: str) -> Client:
    """A client whose requests give up after 2 s: a frozen member must not stall the bench."""
    config = kubeclient.config_from_file(kubeconfig)
    return Client(config=config, field_manager="bench", timeout=httpx2.Timeout(2.0), trust_env=False)


class Observer:
    """What the members hold, polled on a thread of its own (a frozen member stalls only it): when
    each member first had one object, every uid/resourceVersion it took, and whether it has it now."""

    def __init__(self, kubeconfigs: dict[str, str], read: Callable[[Client], Any]) -> None:
        self.kubeconfigs, self.read = kubeconfigs, read
        self.first_seen: dict[str, float] = {}
        self.versions: dict[str, set[str]] = {m: set() for m in kubeconfigs}
        self.present: dict[str, bool] = dict.fromkeys(kubeconfigs, False)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        clients = {m: member_client(k) for m, k in self.kubeconfigs.items()}
        while not self._stop.is_set():
            for name, client in clients.items():
                try:
                    obj = self.read(client)
                except Exception:  # a member restarting or frozen: seen next time
                    continue
                self.present[name] = obj is not None
                if obj is not None:
                    self.first_seen.setdefault(name, time.time())
                    self.versions[name].add(f"{obj.metadata.uid}/{obj.metadata.resourceVersion}")
            time.sleep(0.2)

    def holders(self) -> set[str]:
        return {m for m, here in self.present.items() if here}

    def close(self) -> None:
        self._stop.set()
        self._thread.join(10)


def get_or_none(client: Client, resource: Any, name: str, namespace: str | None = None) -> Any:
    try:
        return client.get(resource, name, namespace=namespace)
    except ApiError as e:
        if e.status.code == 404:
            return None
        raise


@dataclasses.dataclass
class Pending:
    fault: Fault
    since: float  # wall time recovery is counted from
    recovered: Callable[[], bool]


class Chaos:
    """Drives one rollout at a time: kills, restarts, the rollout's own scripted faults, recoveries."""

    def __init__(
        self, fl: Fleet, mgmt: Client, replicas: list[Replica], rng: random.Random, kills: int
    ) -> None:
        self.fleet, self.mgmt, self.replicas, self.rng, self.kills = fl, mgmt, replicas, rng, kills
        self.faults: list[Fault] = []
        self.pending: list[Pending] = []
        self.t0 = 0.0
        self.rollout = ""
        self.next_kill = 0.0
        self.killed = 0  # leader kills in the current rollout

    def moment(self) -> float:
        return round(time.time() - self.t0, 1)

    def begin(self, rollout: str) -> None:
        self.rollout, self.t0, self.killed = rollout, time.time(), 0
        self.next_kill = self.t0 + self.rng.uniform(*KILL_GAP)

    def tick(self) -> None:
        self.supervise()
        self.resolve()
        self.kill_leader()

    def supervise(self) -> None:
        now = time.time()
        for r in self.replicas:
            if r.alive():
                continue
            if r.restart_at is None:  # it exited of its own accord: its lease was lost
                r.exits += 1
                r.restart_at = now + 0.5
            if now >= r.restart_at:
                r.start()

    def resolve(self) -> None:
        for p in list(self.pending):
            if p.recovered():
                p.fault.recovered = round(time.time() - p.since, 2)
                self.pending.remove(p)
                self.after_kill()  # the next kill is drawn from the moment the fleet is whole again

    def live_holder(self, *, not_: str = "", renewed_after: float = 0.0) -> bool:
        held = lease(self.mgmt)
        if held is None or held.spec is None or held.spec.holderIdentity in (None, not_):
            return False
        alive = {r.identity for r in self.replicas if r.alive()}
        renewed = held.spec.renewTime.timestamp() if held.spec.renewTime else 0.0
        return held.spec.holderIdentity in alive and renewed > renewed_after

    def kill_leader(self) -> None:
        # One takeover at a time, and none while the management plane is down (no Lease to read);
        # a member's outage or restart does not hold the kills back.
        if time.time() < self.next_kill or any(not p.fault.kind.startswith("member") for p in self.pending):
            return
        held = lease(self.mgmt)
        holder = held.spec.holderIdentity if held is not None and held.spec is not None else None
        victim = next((r for r in self.replicas if r.alive() and r.identity == holder), None)
        if victim is None:
            return
        victim.kill()
        victim.restart_at = time.time() + self.rng.uniform(0.0, 1.0)
        self.killed += 1
        fault = self.add("leader SIGKILL", f"{holder}; a follower takes over")
        self.watch(fault, lambda: self.live_holder(not_=str(holder)))

    def add(self, kind: str, note: str = "") -> Fault:
        fault = Fault(kind, self.rollout, self.moment(), note)
        self.faults.append(fault)
        print(f"  {fault.at:7.1f}s  {kind}: {note}", flush=True)
        return fault

    def watch(self, fault: Fault, recovered: Callable[[], bool], since: float | None = None) -> None:
        self.pending.append(Pending(fault, time.time() if since is None else since, recovered))

    def after_kill(self) -> None:
        self.next_kill = time.time() + self.rng.uniform(*KILL_GAP)

    def restart_management(self, note: str) -> None:
        fault = self.add("management API server + etcd restarted", note)
        started = time.time()
        self.fleet.restart([fleet.ETCD, f"{fleet.MANAGEMENT}/apiserver"])
        self.watch(fault, lambda: self.live_holder(renewed_after=started), since=started)

    def restart_member(self, member: str, note: str, has_content: Callable[[], bool]) -> None:
        fault = self.add(f"member API server restarted ({member})", note)
        self.fleet.restart([f"{member}/apiserver"])
        self.watch(fault, lambda: self.fleet.ready(member) and has_content())

    def settle(self, budget: float = 120.0) -> None:
        """Keep supervising until every fault of the rollout has recovered (bounded)."""
        deadline = time.time() + budget
        while self.pending and time.time() < deadline:
            self.supervise()
            self.resolve()
            time.sleep(0.1)


@dataclasses.dataclass
class Figures:
    completed: bool = False
    gates_skipped: list[str] = dataclasses.field(default_factory=list)
    out_of_order: list[str] = dataclasses.field(default_factory=list)
    updated_twice: list[str] = dataclasses.field(default_factory=list)
    lost: list[str] = dataclasses.field(default_factory=list)
    left_behind: list[str] = dataclasses.field(default_factory=list)


def _t(value: str) -> float:
    return dt.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def apply(mgmt: Client, doc: Obj) -> None:
    mgmt.apply(codecs.from_dict(doc), force=True)


class Promotion:
    """Seed 002's shape: dev (auto, delay) -> staging (manual) -> production, a Helm chart."""

    name = "chaos-promotion"

    def __init__(
        self, mgmt: Client, members: dict[str, Client], kubeconfigs: dict[str, str], repo: str
    ) -> None:
        self.mgmt, self.members, self.repo = mgmt, members, repo
        self.observer = Observer(
            kubeconfigs, lambda c: get_or_none(c, ConfigMap, f"{self.name}-config", self.name)
        )
        self.done_steps: set[str] = set()
        self.approved_at = 0.0
        self.frozen: Fault | None = None

    def doc(self) -> Obj:
        chart = {"repositoryURL": self.repo, "repositoryName": "local", "chartName": "local/hello"}
        chart |= {"chartVersion": "1.0.0", "releaseName": self.name, "releaseNamespace": self.name}
        stages: list[Obj] = [
            {
                "name": "dev",
                "clusterSelector": {"matchLabels": {"env": "dev"}},
                "trigger": {"auto": {"delay": f"{DELAY}s"}},
            },
            {
                "name": "staging",
                "clusterSelector": {"matchLabels": {"env": "staging"}},
                "trigger": {"manual": {"approved": False}},
            },
            {"name": "production", "clusterSelector": {"matchLabels": {"env": "prod"}}},
        ]
        spec = {"profileSpec": {"helmCharts": [chart]}, "stages": stages}
        return {"apiVersion": API, "kind": "ClusterPromotion", "metadata": {"name": self.name}, "spec": spec}

    def status(self) -> Obj:
        try:
            return dict(self.mgmt.get(kinds.resource("ClusterPromotion"), self.name).status or {})
        except Exception:  # the management API server is restarting
            return {}

    def phases(self) -> dict[str, str]:
        """Each stage's phase, and "started" for a stage whose rollout record says it started."""
        status = self.status()
        out = {s["name"]: s.get("phase", "") for s in status.get("stages") or []}
        for s in (status.get("rollout") or {}).get("stages") or []:
            if s.get("startedAt"):
                out[f"{s['name']}:started"] = "yes"
        return out

    def has(self, member: str) -> Callable[[], bool]:
        return lambda: member in self.observer.holders()

    def step(self, chaos: Chaos) -> bool:
        """The scripted faults and the approval; True once the rollout completed."""
        phases, todo = self.phases(), self.done_steps
        if "mgmt" not in todo and phases.get("dev") == "WaitingAfter":
            todo.add("mgmt")
            chaos.restart_management("dev delivered, its delay running")
        if "member" not in todo and phases.get("staging:started") and helm_upgrade_running():
            todo.add("member")
            chaos.restart_member(
                "member-2", "staging: while helm upgrade --install runs", self.has("member-2")
            )
        if "freeze" not in todo and phases.get("staging") == "WaitingAfter":
            todo.add("freeze")
            chaos.fleet.signal("member-3/apiserver", signal.SIGSTOP)
            self.frozen = chaos.add(
                "member unreachable past a gate (member-3)", "frozen before the staging gate"
            )
        if "freeze" in todo and "approve" not in todo and chaos.killed >= chaos.kills:
            todo.add("approve")
            self.approved_at = time.time()
            patch = [{"op": "replace", "path": "/spec/stages/1/trigger/manual/approved", "value": True}]
            self.mgmt.patch(kinds.resource("ClusterPromotion"), self.name, patch, patch_type=PatchType.JSON)
            print(f"  {chaos.moment():7.1f}s  staging gate approved", flush=True)
        if "approve" in todo and "thaw" not in todo and time.time() > self.approved_at + FROZEN_PAST_GATE:
            todo.add("thaw")
            chaos.fleet.signal("member-3/apiserver", signal.SIGCONT)
            assert self.frozen is not None
            chaos.watch(self.frozen, self.has("member-3"))
        return phases.get("production") == "Succeeded" and "thaw" in todo

    def verify(self, figures: Figures) -> None:
        record = {s["name"]: s for s in (self.status().get("rollout") or {}).get("stages") or []}
        if _t(record["staging"]["startedAt"]) - _t(record["dev"]["deliveredAt"]) < DELAY - 1:
            figures.gates_skipped.append("staging started before dev's delay ended")
        if _t(record["production"]["startedAt"]) < self.approved_at - 1:
            figures.gates_skipped.append("production started before its approval")
        seen = self.observer.first_seen
        if seen.get("member-3", 0) < self.approved_at:
            figures.gates_skipped.append("member-3 (production) had the release before the approval")
        if not seen.get("member-1", 0) < seen.get("member-2", 0) < seen.get("member-3", 0):
            figures.out_of_order.append(f"first seen on members: {seen}")
        if seen.get("member-2", 0) - seen.get("member-1", 0) < DELAY - 1:
            figures.gates_skipped.append("member-2 (staging) had the release before dev's delay ended")
        for member, client in self.members.items():
            releases = client.list(Secret, namespace=self.name, labels={"owner": "helm", "name": self.name})
            revisions = sorted(str(s.metadata.name) for s in releases if s.metadata is not None)
            if len(revisions) != 1 or len(self.observer.versions[member]) > 1:
                figures.updated_twice.append(f"{member}: {revisions}, {self.observer.versions[member]}")

    def delete(self) -> None:
        self.mgmt.delete(kinds.resource("ClusterPromotion"), self.name)


class StagedRun:
    """Seed 004's shape: a placement (External) of a namespace with a ConfigMap; staging (TimedWait)
    -> canary (sorted by `order`, Approval after)."""

    name = "chaos-run"
    namespace = "chaos-content"

    def __init__(self, mgmt: Client, members: dict[str, Client], kubeconfigs: dict[str, str]) -> None:
        self.mgmt, self.members = mgmt, members
        self.observer = Observer(kubeconfigs, lambda c: get_or_none(c, ConfigMap, "test-cm", self.namespace))
        self.done_steps: set[str] = set()
        self.approved_at = 0.0
        self.frozen: Fault | None = None
        self.frozen_at = 0.0

    def create(self) -> None:
        """The hub's content, the placement and its snapshot: before the rollout's clock starts."""
        self.mgmt.apply(
            Namespace(metadata=ObjectMeta(name=self.namespace)), field_manager="bench", force=True
        )
        cm = ConfigMap(metadata=ObjectMeta(name="test-cm", namespace=self.namespace), data={"key": "value1"})
        self.mgmt.apply(cm, field_manager="bench", force=True)
        selector = {"group": "", "kind": "Namespace", "name": self.namespace, "version": "v1"}
        spec = {
            "resourceSelectors": [selector],
            "policy": {"placementType": "PickAll"},
            "strategy": {"type": "External"},
        }
        apply(
            self.mgmt,
            {
                "apiVersion": API,
                "kind": "ClusterResourcePlacement",
                "metadata": {"name": self.name},
                "spec": spec,
            },
        )
        stages = [
            {
                "name": "staging",
                "labelSelector": {"matchLabels": {"environment": "staging"}},
                "afterStageTasks": [{"type": "TimedWait", "waitTime": f"{DELAY}s"}],
            },
            {
                "name": "canary",
                "labelSelector": {"matchLabels": {"environment": "canary"}},
                "sortingLabelKey": "order",
                "afterStageTasks": [{"type": "Approval"}],
            },
        ]
        strategy = {"apiVersion": API, "kind": "ClusterStagedUpdateStrategy", "metadata": {"name": self.name}}
        apply(self.mgmt, strategy | {"spec": {"stages": stages}})
        deadline = time.time() + 120
        while (
            get_or_none(self.mgmt, kinds.resource("ClusterResourceSnapshot"), f"{self.name}-0-snapshot")
            is None
        ):
            if time.time() > deadline:
                raise TimeoutError("no resource snapshot for the placement")
            time.sleep(0.5)

    def doc(self) -> Obj:
        spec = {
            "placementName": self.name,
            "resourceSnapshotIndex": "0",
            "stagedRolloutStrategyName": self.name,
        }
        return {
            "apiVersion": API,
            "kind": "ClusterStagedUpdateRun",
            "metadata": {"name": self.name},
            "spec": spec,
        }

    def status(self) -> Obj:
        try:
            return dict(self.mgmt.get(kinds.resource("ClusterStagedUpdateRun"), self.name).status or {})
        except Exception:
            return {}

    def has(self, member: str) -> Callable[[], bool]:
        return lambda: member in self.observer.holders()

    def step(self, chaos: Chaos) -> bool:
        status, todo = self.status(), self.done_steps
        stages = status.get("stagesStatus") or []
        if "mgmt" not in todo and stages and stages[0].get("startTime"):
            todo.add("mgmt")
            chaos.restart_management("the staging stage started")
        if "freeze" not in todo and "member-2" in self.observer.first_seen:
            todo.add("freeze")
            self.frozen_at = time.time()
            chaos.fleet.signal("member-3/apiserver", signal.SIGSTOP)
            self.frozen = chaos.add(
                "member unreachable past a gate (member-3)", "frozen during staging's TimedWait"
            )
        if (
            "freeze" in todo
            and "thaw" not in todo
            and time.time() > self.frozen_at + DELAY + FROZEN_PAST_GATE
        ):
            todo.add("thaw")
            chaos.fleet.signal("member-3/apiserver", signal.SIGCONT)
            assert self.frozen is not None
            chaos.watch(self.frozen, self.has("member-3"))
        if "member" not in todo and len(stages) > 1 and stages[1].get("startTime"):
            todo.add("member")
            chaos.restart_member("member-1", "the canary stage applying", self.has("member-1"))
        self.approve(chaos)
        done = any(
            c.get("type") == "Succeeded" and c.get("status") == "True" for c in status.get("conditions") or []
        )
        return done and "thaw" in todo

    def approve(self, chaos: Chaos) -> None:
        request = f"{self.name}-canary"
        if "approve" in self.done_steps or chaos.killed < chaos.kills:
            return
        try:
            if get_or_none(self.mgmt, kinds.resource("ClusterApprovalRequest"), request) is None:
                return
            now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            condition = {"type": "Approved", "status": "True", "reason": "lgtm", "message": "lgtm"}
            patch = {
                "status": {"conditions": [condition | {"lastTransitionTime": now, "observedGeneration": 1}]}
            }
            self.mgmt.patch(
                kinds.resource("ClusterApprovalRequest").Status, request, patch, patch_type=PatchType.MERGE
            )
        except Exception:  # the management API server is restarting: next tick
            return
        self.done_steps.add("approve")
        self.approved_at = time.time()
        print(f"  {chaos.moment():7.1f}s  canary approval request approved", flush=True)

    def verify(self, figures: Figures) -> None:
        status = self.status()
        staging, canary = status["stagesStatus"]
        waited = next(
            c for c in staging["afterStageTaskStatus"][0]["conditions"] if c["type"] == "WaitTimeElapsed"
        )
        if _t(canary["startTime"]) < _t(waited["lastTransitionTime"]) - 1:
            figures.out_of_order.append("canary started before staging's TimedWait elapsed (status)")
        succeeded = next(c for c in status["conditions"] if c["type"] == "Succeeded")
        if _t(succeeded["lastTransitionTime"]) < self.approved_at - 1:
            figures.gates_skipped.append("the run succeeded before its approval")
        seen = self.observer.first_seen
        for member in ("member-1", "member-3"):
            if seen.get(member, 0) - seen.get("member-2", 0) < DELAY - 1:
                figures.gates_skipped.append(
                    f"{member} (canary) had the content before staging's wait: {seen}"
                )
        for member, versions in self.observer.versions.items():
            if len(versions) != 1:
                figures.updated_twice.append(f"{member}: {sorted(versions)}")

    def delete(self) -> None:
        """The placement first: it withdraws what its runs delivered (the run's record is read too)."""
        self.mgmt.delete(kinds.resource("ClusterResourcePlacement"), self.name)
        deadline = time.time() + 180
        while get_or_none(self.mgmt, kinds.resource("ClusterResourcePlacement"), self.name) is not None:
            if time.time() > deadline:
                break
            time.sleep(1)
        for kind in ("ClusterStagedUpdateRun", "ClusterStagedUpdateStrategy"):
            self.mgmt.delete(kinds.resource(kind), self.name)


Rollout = Promotion | StagedRun


def run_rollout(chaos: Chaos, rollout: Rollout, budget: float) -> Figures:
    figures = Figures()
    print(f"{rollout.name}: applied", flush=True)
    chaos.begin(rollout.name)
    apply(chaos.mgmt, rollout.doc())
    deadline = time.time() + budget
    while time.time() < deadline:
        chaos.tick()
        if rollout.step(chaos):
            figures.completed = True
            break
        time.sleep(0.1)
    print(f"  {chaos.moment():7.1f}s  {'completed' if figures.completed else 'DID NOT COMPLETE'}", flush=True)
    chaos.settle()
    for _ in range(20):  # the members' content, as it is at the end (a member may still be warming up)
        holders = rollout.observer.holders()
        if len(holders) == len(rollout.members):
            break
        time.sleep(1)
    figures.lost = sorted(set(rollout.members) - holders)
    if figures.completed:
        rollout.verify(figures)
    rollout.delete()
    deadline = time.time() + 180
    while (left := rollout.observer.holders()) and time.time() < deadline:
        chaos.supervise()
        time.sleep(1)
    figures.left_behind = sorted(left)
    rollout.observer.close()
    return figures


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered) + 0.5) - 1))]


def report(faults: list[Fault], results: dict[str, Figures], replicas: list[Replica]) -> bool:
    print("\nfaults (moment = seconds since the rollout was applied; recovery in seconds):")
    for f in faults:
        rec = f"{f.recovered:6.2f}" if f.recovered is not None else "  NONE"
        print(f"  {f.rollout:16} {f.at:7.1f}s  recovered in {rec}  {f.kind} ({f.note})")
    print("\nper kind: injected / recovered / time to recover p50, p99, max")
    for kind in sorted({f.kind for f in faults}):
        of = [f for f in faults if f.kind == kind]
        times = [f.recovered for f in of if f.recovered is not None]
        spread = (
            f"{statistics.median(times):.2f} s, {percentile(times, 0.99):.2f} s, {max(times):.2f} s"
            if times
            else "-"
        )
        print(f"  {kind:48} {len(of):3} / {len(times):3}   {spread}")
    ok = all(f.recovered is not None for f in faults)
    print(f"\nreplica exits after a lost lease (restarted): {sum(r.exits for r in replicas)}")
    for name, fig in results.items():
        counts = {k: len(v) for k, v in dataclasses.asdict(fig).items() if isinstance(v, list)}
        print(f"{name}: completed={fig.completed} " + " ".join(f"{k}={v}" for k, v in counts.items()))
        for key, items in dataclasses.asdict(fig).items():
            for item in items if isinstance(items, list) else []:
                print(f"    {key}: {item}")
        ok = ok and fig.completed and not any(counts.values())
    return ok


def setup(state: fleet.FleetState) -> Client:
    mgmt = kubeclient.client(kubeclient.config_from_file(state.cluster(fleet.MANAGEMENT).kubeconfig))
    install.install(mgmt)
    for member in state.members:
        registration.register(
            mgmt,
            name=member.name,
            namespace=MEMBERS_NS,
            kubeconfig=Path(member.kubeconfig).read_bytes(),
            labels=LABELS[member.name],
        )
    return mgmt


def measure(state: fleet.FleetState, args: argparse.Namespace, tmp: Path) -> bool:
    bins = binaries.Binaries(Path(state.bin_dir))
    mgmt = setup(state)
    members = {m.name: member_client(m.kubeconfig) for m in state.members}
    kubeconfigs = {m.name: m.kubeconfig for m in state.members}
    kubeconfig = state.cluster(fleet.MANAGEMENT).kubeconfig
    replicas = [Replica(i, kubeconfig, bins.path("helm"), args.lease, tmp) for i in range(3)]
    chaos = Chaos(Fleet(state), mgmt, replicas, random.Random(args.seed), args.kills)
    results: dict[str, Figures] = {}
    with chartrepo.serve(bins.path("helm"), tmp / "charts", [(CHART, "1.0.0")]) as repo:
        for r in replicas:
            r.start()
        try:
            results["promotion"] = run_rollout(
                chaos, Promotion(mgmt, members, kubeconfigs, repo.url), args.budget
            )
            run = StagedRun(mgmt, members, kubeconfigs)
            run.create()
            results["staged run"] = run_rollout(chaos, run, args.budget)
        finally:
            for r in replicas:
                r.stop()
    return report(chaos.faults, results, replicas)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seed", type=int, default=46, help="the random moments and gaps (reproducible)")
    parser.add_argument("--kills", type=int, default=30, help="leader kills per rollout, at least")
    parser.add_argument("--lease", type=int, default=3, help="the replicas' --lease-duration, seconds")
    parser.add_argument("--budget", type=float, default=900.0, help="seconds a rollout may take at most")
    args = parser.parse_args()
    started = time.time()
    print(
        f"chaos bench: seed {args.seed}, {args.kills} kills per rollout, lease {args.lease} s,"
        f" {os.cpu_count()} cpus"
    )
    bins = binaries.ensure()
    with tempfile.TemporaryDirectory() as tmp:
        state = fleet.up(
            Path(tmp) / "fleet",
            members={name: {} for name in LABELS},
            now=dt.datetime.now(dt.UTC),
            bin_dir=bins.directory,
            members_etcd=True,
        )
        try:
            ok = measure(state, args, Path(tmp))
        finally:
            fleet.down(Path(tmp) / "fleet")
    print(f"\nwall time {time.time() - started:.0f} s; {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
