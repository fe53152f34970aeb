"""Pull mode against push mode, same run (issue 44, ADR 0106).

    PYTHONPATH=src .venv/bin/python bench/bench_pull_mode.py [--clusters 100] [--servers 5]
        [--agents-per-process 20] [--pool-workers 2] [--gate-trials 20] [--idle-seconds 15]
        [--settle-seconds 5] [--budget 600] [--json FILE] [--keep-logs DIR]

One management cluster, `--servers` light member API servers (ADR 0066), one controller process
(`fleetwave controller run`), and on them:
  - N push registrations (`mode=push`): each its own MemberCluster and kubeconfig Secret;
  - N pull registrations (`mode=pull`, `register_pull`): each its own hub namespace, account, token
    and agent. The agents share processes, `--agents-per-process` each: every agent is its own
    `agent_app.build(...)` manager with its own hub client and credential, lease, MemberWork informer
    and delivery memory; the agents of one process share one health-check sandbox (`--pool-workers`
    workers) and the process's pool of member connections (push registrations share the controller's
    the same way). On its member every agent acts as the member-side ServiceAccount `fleetwave local
    up --pull-members` gives its agents;
  - one more pull registration (`mode=solo`) served by a real `fleetwave agent run` process of its
    own, for the agent's memory.
Registrations alias onto the servers round-robin; each server's registrations are in one stage
(bench_scale's split: dev the first 10% of the servers, staging up to 40%, prod the rest).

Measured, in this order, one at a time (so each delta belongs to one thing):
  1. per mode, push then pull: the controller, the agents and the management API server idle for
     `--idle-seconds`, then a 3-stage ClusterPromotion of one ConfigMap over the mode's N
     registrations (no maxUpdate): time to Succeeded (as seen by a watch here), and over the rollout
     plus `--settle-seconds`: controller CPU (its process tree), agent CPU (the agent processes and
     their sandbox workers), management API server and etcd CPU, management API server writes
     (mutating requests, by verb and resource; lease renewals counted apart), member API server
     requests. Per cluster, raw and net of the idle rates over the same window (the idle window
     starts once the registrations' own first writes are over). Where the time goes, per stage:
     bench_scale's timeline (profile pinned, summaries written, summaries Ready) and, in pull mode,
     each MemberWork's first write and its agent's first report;
  2. health gate reaction, push and pull trials alternated: a 2-stage promotion whose profile has a
     Lua validateHealths check on a ConfigMap on the member; per trial a new revision waits on the
     first stage's registration until the bench writes that ConfigMap on its member API server.
     From just before that write to (a) the first stage's ClusterSummary seen Ready on the hub,
     (b) the first stage's next phase in the promotion's status, both by watches here;
  3. the solo agent's RSS (its process, and its tree with its two sandbox workers and helm): idle
     after sync, and the peak while it installs the tests' `hello` chart from a local repository.
Prints a table at the end and writes everything to `--json`. Not a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import contextlib
import dataclasses
import json
import logging
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lightkube import AsyncClient, Client, codecs
from lightkube.resources.coordination_v1 import Lease
from lightkube.resources.core_v1 import ConfigMap
from lightkube.types import on_error_retry

import bench_gates as bg
import bench_scale as bs
import fleetwave
from fleetwave.api import pullmode
from fleetwave.controllers.agent import app as agent_app
from fleetwave.kube import client as kubeclient
from fleetwave.kube import kinds
from fleetwave.local import agents as local_agents
from fleetwave.local import binaries, chartrepo, fleet, processes
from fleetwave.mgmt import install, pull_registration, registration
from fleetwave.promapi import guards
from fleetwave.runtime.manager import LeadershipLost, Manager
from fleetwave.sandbox.pool import Budget, CheckPool

API = f"{kinds.GROUP}/{kinds.VERSION}"
NS = "default"
MEMBERS_NS = "bench-pull"
MODES = ("push", "pull")
WRITE_VERBS = frozenset({"POST", "PUT", "PATCH", "DELETE", "APPLY"})
HELLO = Path(__file__).resolve().parents[1] / "tests" / "charts" / "hello"
SOLO = "solo"
Obj = dict[str, Any]
log = logging.getLogger("bench_pull_mode")


# --- registrations -------------------------------------------------------------------------------


def labels_of(mode: str, i: int, servers: int) -> dict[str, str]:
    """The mode; the stage of the registration's server (all registrations of a server in the same
    stage, as in bench_scale: two stages' profiles delivering the same object to one server would
    conflict); for the first two registrations, the gate trials' stages a and b."""
    out = {"mode": mode, "env": bs.env_of(i % servers, servers)}
    if i < 2:
        out["gate"] = "ab"[i]
    return out


def name_of(mode: str, i: int) -> str:
    return f"{mode}-{i:04d}"


@dataclasses.dataclass(frozen=True, slots=True)
class AgentSpec:
    """One agent: its member as the hub registered it, its own credentials, its own identity."""

    cluster: str  # namespace/name
    hub_kubeconfig: str
    member_kubeconfig: str
    identity: str


def _in_threads(kubeconfig: str, count: int, one: Callable[[Client, int], None]) -> None:
    """`one(client, i)` for i in range(count), four at a time, a management client per thread. The
    first one alone: lightkube decoding its first Status in several threads at once crashed the
    interpreter (a segmentation fault in msgspec's type introspection)."""
    local = threading.local()
    made: list[Client] = []

    def call(i: int) -> None:
        if not hasattr(local, "client"):
            local.client = kubeclient.client(kubeclient.config_from_file(kubeconfig))
            made.append(local.client)
        one(local.client, i)

    try:
        call(0)
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            list(pool.map(call, range(1, count)))
    finally:
        for client in made:
            client.close()


def register_push(mk: str, servers: list[fleet.ClusterInfo], n: int) -> None:
    kubeconfigs = [Path(s.kubeconfig).read_bytes() for s in servers]

    def one(client: Client, i: int) -> None:
        registration.register(
            client,
            name=name_of("push", i),
            namespace=MEMBERS_NS,
            kubeconfig=kubeconfigs[i % len(servers)],
            labels=labels_of("push", i, len(servers)),
        )

    _in_threads(mk, n, one)


def write_private(path: Path, data: bytes) -> Path:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return path


def register_pull(
    state: fleet.FleetState, n: int, workdir: Path, names: list[tuple[str, dict[str, str]]]
) -> list[AgentSpec]:
    """Each (name, labels) registered in pull mode on server i % servers, its agent's hub credential
    written 0600 in `workdir`; its agent acts on its member as the member-side ServiceAccount."""
    mk = state.cluster(fleet.MANAGEMENT).kubeconfig
    server, ca = kubeclient.server_and_ca(kubeclient.config_from_file(mk))
    servers = state.members
    own = [str(local_agents.member_kubeconfig(state, s)) for s in servers]
    out: list[AgentSpec | None] = [None] * len(names)

    def one(client: Client, i: int) -> None:
        name, labels = names[i]
        made = pull_registration.register_pull(
            client, name=name, namespace=MEMBERS_NS, labels=labels, hub_server=server, hub_ca=ca
        )
        path = write_private(workdir / f"{name}.hub-kubeconfig", made.hub_kubeconfig)
        out[i] = AgentSpec(f"{MEMBERS_NS}/{name}", str(path), own[i % len(servers)], f"bench-{name}")

    _in_threads(mk, len(names), one)
    return [s for s in out if s is not None]


# --- agents sharing processes --------------------------------------------------------------------


class SharedPool(CheckPool):
    """The health-check sandbox of one agent host process, shared by its agents: an agent whose
    manager stops (a lost lease) does not close it for the others; the host closes it at the end."""

    async def close(self) -> None:
        return None

    async def close_for_good(self) -> None:
        await super().close()


async def _serve_agent(spec: AgentSpec, helm: str, pool: CheckPool, running: dict[str, Manager]) -> None:
    """One agent, as `fleetwave agent run` serves it: contend again after a lost lease."""
    settings = agent_app.AgentSettings(
        cluster=spec.cluster,
        kubeconfig=Path(spec.member_kubeconfig),
        helm_binary=helm,
        identity=spec.identity,
        metrics_port=0,  # one ephemeral listener for both
        health_port=0,
    )
    config = kubeclient.member_config(await asyncio.to_thread(Path(spec.hub_kubeconfig).read_bytes))
    while True:
        hub = kubeclient.async_client(config, target="management")
        manager = agent_app.build(hub, settings, handle_signals=False, pool=pool)
        running[spec.cluster] = manager
        try:
            await manager.run()
            return  # stopped
        except LeadershipLost as e:
            log.warning("LEASE LOST %s: %s; contending again", spec.cluster, e)
        finally:
            await hub.close()
        await asyncio.sleep(5.0)


async def _host(specs: list[AgentSpec], helm: str, workers: int) -> None:
    """Run every agent of `specs` in this process until SIGTERM."""
    pool = SharedPool(Budget(workers=workers))
    await pool.start()  # before the managers: each one's warm-up then finds it started
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    running: dict[str, Manager] = {}
    tasks = [asyncio.create_task(_serve_agent(s, helm, pool, running)) for s in specs]
    done = asyncio.create_task(stop.wait())
    await asyncio.wait([done, *tasks], return_when=asyncio.FIRST_COMPLETED)
    for manager in running.values():
        manager.stop()
    for result in await asyncio.gather(*tasks, return_exceptions=True):
        if isinstance(result, BaseException):
            log.error("an agent ended with %r", result)
    await pool.close_for_good()


def host_main(spec_file: str, helm: str, workers: int) -> None:
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    specs = [AgentSpec(**s) for s in json.loads(Path(spec_file).read_text())]
    asyncio.run(_host(specs, helm, workers))


def start_hosts(
    specs: list[AgentSpec], per: int, helm: str, workers: int, workdir: Path
) -> list[subprocess.Popen[bytes]]:
    procs = []
    for k, first in enumerate(range(0, len(specs), per)):
        path = workdir / f"agents-{k}.json"
        path.write_text(json.dumps([dataclasses.asdict(s) for s in specs[first : first + per]]))
        argv = [sys.executable, str(Path(__file__).resolve()), "--agent-host", str(path)]
        argv += ["--helm", helm, "--pool-workers", str(workers)]
        with (workdir / f"agents-{k}.log").open("wb") as out:
            procs.append(subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT))
    return procs


def start_solo(spec: AgentSpec, helm: str, workdir: Path) -> subprocess.Popen[bytes]:
    """The solo registration's agent: a real `fleetwave agent run` process of its own."""
    argv = [sys.executable, "-m", "fleetwave", "agent", "run", "--cluster", spec.cluster.split("/")[1]]
    argv += ["--cluster-namespace", MEMBERS_NS, "--hub-kubeconfig", spec.hub_kubeconfig]
    argv += ["--kubeconfig", spec.member_kubeconfig, "--helm", helm, "--identity", spec.identity]
    argv += ["--metrics-port", str(processes.free_port()), "--health-port", str(processes.free_port())]
    argv += ["--log-level", "WARNING"]
    env = {**os.environ, guards.ALLOW_LOOPBACK_ENV: "1"}  # the chart repository is on 127.0.0.1
    with (workdir / "solo-agent.log").open("wb") as out:
        return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env)


def stop_all(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    for proc in procs:
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def wait_until(probe: Callable[[], bool], what: str, timeout: float = 600.0) -> float:
    t0 = time.monotonic()
    while not probe():
        if time.monotonic() - t0 > timeout:
            raise TimeoutError(f"{what}: not within {timeout:.0f} s")
        time.sleep(1.0)
    return time.monotonic() - t0


def leases_held(client: Client) -> int:
    leases = client.list(Lease, namespace="*", labels={pullmode.LEASE_LABEL: "true"})
    return sum(1 for lease in leases if lease.spec is not None and lease.spec.holderIdentity)


def members_ready(client: Client) -> int:
    found = client.list(kinds.resource("MemberCluster"), namespace=MEMBERS_NS)
    return sum(1 for m in found if (m.to_dict().get("status") or {}).get("ready"))


# --- readings ------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class Reading:
    at: float
    controller: float  # CPU seconds of the controller's process tree
    agents: float  # CPU seconds of the agent host processes' trees
    fleet: dict[str, float]  # CPU seconds: management API server, etcd, member API servers
    management: dict[str, float]  # requests served by the management API server, by verb and resource
    members: dict[str, float]  # requests served by the member API servers


def read(state: fleet.FleetState, controller: int, agents: list[int]) -> Reading:
    mk = state.cluster(fleet.MANAGEMENT).kubeconfig
    return Reading(
        time.monotonic(),
        bs.cpu_seconds(bs.tree(controller)),
        sum(bs.cpu_seconds(bs.tree(pid)) for pid in agents),
        bs.fleet_cpu(state),
        bs.requests_by_kind([mk]),
        bs.requests_by_kind(sorted({m.kubeconfig for m in state.members})),
    )


def _moved(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {k: v - before.get(k, 0.0) for k, v in after.items() if v - before.get(k, 0.0) >= 0.5}


def window(a: Reading, b: Reading) -> dict[str, Any]:
    """What was spent and served between two readings."""
    writes = {
        k: v for k, v in _moved(a.management, b.management).items() if k.split(" ", 1)[0] in WRITE_VERBS
    }
    leases = sum(v for k, v in writes.items() if k.endswith(" leases"))
    return {
        "seconds": b.at - a.at,
        "controller_cpu": b.controller - a.controller,
        "agents_cpu": b.agents - a.agents,
        "mgmt_apiserver_cpu": b.fleet["management"] - a.fleet["management"],
        "etcd_cpu": b.fleet["etcd"] - a.fleet["etcd"],
        "members_cpu": b.fleet["members"] - a.fleet["members"],
        "mgmt_writes": sum(writes.values()) - leases,
        "lease_writes": leases,
        "member_requests": sum(_moved(a.members, b.members).values()),
        "writes_by_kind": dict(sorted(writes.items(), key=lambda kv: -kv[1])),
        "member_requests_by_kind": dict(sorted(_moved(a.members, b.members).items(), key=lambda kv: -kv[1])),
    }


NUMBERS = (
    "controller_cpu",
    "agents_cpu",
    "mgmt_apiserver_cpu",
    "etcd_cpu",
    "members_cpu",
    "mgmt_writes",
    "lease_writes",
    "member_requests",
)


def per_cluster(spent: dict[str, Any], idle: dict[str, Any], n: int) -> dict[str, float]:
    """Each figure per cluster, raw and net of the idle rate over the same window (`<name>_net`)."""
    scale = spent["seconds"] / idle["seconds"]
    out: dict[str, float] = {}
    for key in NUMBERS:
        out[key] = spent[key] / n
        out[f"{key}_net"] = (spent[key] - idle[key] * scale) / n
    return out


@dataclasses.dataclass
class Run:
    state: fleet.FleetState
    args: argparse.Namespace
    client: AsyncClient
    watch: bs.Watch
    controller: int
    agents: list[int]
    solo: int
    out: dict[str, Any]

    async def read(self) -> Reading:
        return await asyncio.to_thread(read, self.state, self.controller, self.agents)


# --- 1. one rollout per mode ---------------------------------------------------------------------


def rollout_promotion(name: str, mode: str) -> Obj:
    """3 stages over the mode's registrations, no maxUpdate: each stage delivers to all at once."""
    stages: list[tuple[str, str, Obj | None]] = [
        ("dev", "dev", {"auto": {}}),
        ("staging", "staging", {"auto": {}}),
        ("production", "prod", None),
    ]
    return {
        "apiVersion": API,
        "kind": "ClusterPromotion",
        "metadata": {"name": name},
        "spec": {
            "profileSpec": {"policyRefs": [{"kind": "ConfigMap", "name": f"{name}-policy", "namespace": NS}]},
            "stages": [
                {
                    "name": stage,
                    "clusterSelector": {"matchLabels": {"mode": mode, "env": env}},
                    **({"trigger": trigger} if trigger else {}),
                }
                for stage, env, trigger in stages
            ],
        },
    }


class WorkTimes:
    """Per MemberWork of one promotion (its owner, a summary, named after the promotion and stage)
    and revision: when it was first seen here, and first seen with its agent's report about that
    revision (ms after `t0`, the promotion's write), by stage."""

    def __init__(self, client: AsyncClient, promotion: str) -> None:
        self.client, self.marker, self.t0 = client, f"/{promotion}-", time.time()
        self.written: dict[tuple[str, str, str], float] = {}  # (stage, work, revision) -> ms
        self.reported: dict[tuple[str, str, str], float] = {}
        self.task = asyncio.create_task(self._follow())

    async def _follow(self) -> None:
        resource = kinds.resource("MemberWork")
        async for _, obj in self.client.watch(resource, namespace="*", on_error=on_error_retry):
            raw, ms = obj.to_dict(), (time.time() - self.t0) * 1000
            spec = raw.get("spec") or {}
            owner = str(spec.get("owner"))
            if self.marker not in owner:
                continue
            stage = owner.split(self.marker, 1)[1].split("-", 1)[0]
            meta = raw["metadata"]
            key = (stage, f"{meta['namespace']}/{meta['name']}", str(spec.get("revision")))
            self.written.setdefault(key, ms)
            if (raw.get("status") or {}).get("observedRevision") == key[2]:
                self.reported.setdefault(key, ms)

    def text(self) -> str:
        out = []
        for stage in ("dev", "staging", "production"):
            written = [t for k, t in self.written.items() if k[0] == stage]
            reported = [t for k, t in self.reported.items() if k[0] == stage]
            took = sorted(t - self.written[k] for k, t in self.reported.items() if k[0] == stage)
            if written and reported:
                out.append(
                    f"{stage}: written {min(written):.0f}..{max(written):.0f}, reported "
                    f"{min(reported):.0f}..{max(reported):.0f} ({len(reported)}), each "
                    f"p50 {bs.pct(took, 0.5):.0f} / max {took[-1]:.0f}"
                )
        return "; ".join(out) or "no reports seen"

    async def close(self) -> None:
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)


async def _quiet(run: Run, limit: float = 120.0) -> Reading:
    """Once 5 s pass with no management writes but lease renewals (a registration's first member
    status, say, is not the idle rate), or after `limit` seconds."""
    before = await run.read()
    deadline = time.monotonic() + limit
    while True:
        await asyncio.sleep(5.0)
        now = await run.read()
        if window(before, now)["mgmt_writes"] == 0 or time.monotonic() > deadline:
            return now
        before = now


async def rollout(run: Run, mode: str) -> dict[str, Any]:
    n, name = run.args.clusters, f"roll-{mode}"
    await run.client.apply(codecs.from_dict(bs.content(name)), force=True)
    quiet = await _quiet(run)
    await asyncio.sleep(run.args.idle_seconds)
    before = await run.read()
    idle, passes = window(quiet, before), await asyncio.to_thread(bs.reconcile_seconds)
    timeline = bs._Timeline(run.client, name)
    timeline.start(None)
    works, t0 = WorkTimes(run.client, name), time.time()
    await run.client.apply(codecs.from_dict(rollout_promotion(name, mode)), force=True)
    done = await run.watch.until_done([name], run.args.budget)
    await asyncio.sleep(run.args.settle_seconds)
    spent = window(before, await run.read())
    await timeline.close()
    await works.close()
    return {
        "completed": done,
        "done_s": round(run.watch.done[name] - t0, 2) if done else None,
        "idle": idle,
        "spent": spent,
        "per_cluster": per_cluster(spent, idle, n),
        "passes": await bs._passes_since(passes),
        "stages_ms": timeline.text(),
        "works": works.text() if mode == "pull" else "",
    }


# --- 2. health gate reaction ---------------------------------------------------------------------


GATE_LUA = """
function evaluate()
  if obj.data ~= nil and (obj.data.trial == "%d" or obj.data.open == "always") then
    return {healthy = true, message = "gate open"}
  end
  return {healthy = false, message = "gate closed"}
end
"""


def flag(mode: str, data: dict[str, str]) -> Obj:
    meta = {"name": f"gate-flag-{mode}", "namespace": NS}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data}


def gate_policy(mode: str, trial: int) -> Obj:
    """The trial's content (a ConfigMap naming the trial), in a policy of its own."""
    policy = bs.ratio_policy(f"gate-{mode}", trial)
    policy["metadata"]["name"] = f"gate-{mode}-policy-{trial}"
    return policy


def gate_promotion(mode: str, trial: int) -> Obj:
    """first (the mode's registration 0) -> second (its registration 1), both judged by a Lua check
    of the member's flag ConfigMap; the script names the trial, so each revision waits on its own.
    Each trial's content is a policy of its own, so one write makes the revision: a revision that
    changes the check alone passes on the summary's earlier verdict."""
    name = f"gate-{mode}"
    check = {"name": "flag", "group": "", "version": "v1", "kind": "ConfigMap", "namespace": NS}
    check |= {"resourceName": f"gate-flag-{mode}", "script": GATE_LUA % trial}
    profile = {"kind": "ConfigMap", "name": f"{name}-policy-{trial}", "namespace": NS}
    first = {"matchLabels": {"mode": mode, "gate": "a"}}
    return {
        "apiVersion": API,
        "kind": "ClusterPromotion",
        "metadata": {"name": name},
        "spec": {
            "profileSpec": {"syncMode": "Continuous", "policyRefs": [profile], "validateHealths": [check]},
            "stages": [
                {"name": "first", "clusterSelector": first, "trigger": {"auto": {}}},
                {"name": "second", "clusterSelector": {"matchLabels": {"mode": mode, "gate": "b"}}},
            ],
        },
    }


def _verdict(raw: Obj) -> tuple[int, str, str] | None:
    """(generation, Ready's status, its message) when the summary's Ready condition is about its
    current generation and content."""
    generation = (raw.get("metadata") or {}).get("generation")
    conditions = (raw.get("status") or {}).get("conditions") or []
    ready = next((c for c in conditions if c.get("type") == "Ready"), None)
    wanted = ((raw.get("metadata") or {}).get("annotations") or {}).get("fleetwave.io/content-hash")
    seen = (raw.get("status") or {}).get("observedContentHash")
    if ready is None or generation is None or ready.get("observedGeneration") != generation:
        return None
    if not wanted or seen != wanted:
        return None
    return int(generation), str(ready.get("status")), str(ready.get("message"))


class GateWatch(bg.Watcher):
    """bench_gates' watch of one promotion's status (every event kept here) and profiles, and of its
    first stage's summary."""

    def __init__(self, client: AsyncClient, name: str) -> None:
        super().__init__(client, name)
        self.summaries: list[tuple[float, Obj]] = []
        self.rollouts: list[tuple[float, Obj]] = []

    def start(self) -> None:
        super().start()
        self.tasks.append(asyncio.create_task(self._summaries()))

    async def _promotion(self) -> None:
        resource = kinds.resource("ClusterPromotion")
        fields: dict[str, Any] = {"metadata.name": self.name}
        async for _, obj in self.client.watch(resource, fields=fields, on_error=on_error_retry):
            self.promotion = obj.to_dict()
            self.rollouts.append((time.time(), self.rollout()))
            self.changed.set()

    async def _summaries(self) -> None:
        labels: dict[str, Any] = {"fleetwave.io/cluster-profile": f"{self.name}-first"}
        resource = kinds.resource("ClusterSummary")
        async for _, obj in self.client.watch(
            resource, namespace=MEMBERS_NS, labels=labels, on_error=on_error_retry
        ):
            self.summaries.append((time.time(), obj.to_dict()))
            self.changed.set()

    def generation(self) -> int:
        raw = self.summaries[-1][1] if self.summaries else {}
        return int((raw.get("metadata") or {}).get("generation") or 0)

    def closed(self, old: int, previous: str | None) -> bool:
        """The first stage's summary at a generation above `old`, judged unhealthy, and the
        promotion's status on a revision other than `previous`."""
        verdict = _verdict(self.summaries[-1][1]) if self.summaries else None
        fresh = self.rollout().get("contentHash") not in (None, previous)
        if not fresh or verdict is None:
            return False
        return verdict[0] > old and verdict[1] == "False" and "gate closed" in verdict[2]

    def ready_after(self, t0: float, generation: int) -> float | None:
        for t, raw in self.summaries:
            verdict = _verdict(raw)
            if t >= t0 and verdict is not None and verdict[:2] == (generation, "True"):
                return t
        return None

    def moved_on_after(self, t0: float, revision: str, phase: str) -> float | None:
        """When the first stage left `phase` on this revision, as the promotion's status said."""
        for t, rollout in self.rollouts:
            first: Obj = next((s for s in rollout.get("stages") or [] if s.get("name") == "first"), {})
            if t >= t0 and rollout.get("contentHash") == revision and first.get("phase") != phase:
                return t
        return None


async def gate_trial(w: GateWatch, member: AsyncClient, mode: str, trial: int) -> tuple[float, float]:
    """(flip -> first stage's summary Ready on the hub, flip -> first stage's next phase)."""
    old, previous = w.generation(), w.rollout().get("contentHash")
    await w.client.apply(codecs.from_dict(gate_policy(mode, trial)), force=True)
    await w.client.apply(codecs.from_dict(gate_promotion(mode, trial)), force=True)
    await w.until(lambda: w.closed(old, previous))
    await asyncio.sleep(0.5)  # judged closed at least once more
    revision, waiting = str(w.rollout().get("contentHash")), str(w.stage("first").get("phase"))
    generation = w.generation()
    t0 = time.time()
    await member.apply(codecs.from_dict(flag(mode, {"trial": str(trial)})), field_manager="bench", force=True)
    ready = await w.until(lambda: w.ready_after(t0, generation))
    moved = await w.until(lambda: w.moved_on_after(t0, revision, waiting))
    await w.until(
        lambda: w.rollout().get("contentHash") == revision and w.rollout().get("phase") == "Succeeded"
    )
    return float(ready) - t0, float(moved) - t0


async def _gate_setup(run: Run, mode: str, servers: list[AsyncClient]) -> GateWatch:
    """The flags (registration 1's always open), and the promotion's first revision done."""
    await servers[0].apply(codecs.from_dict(flag(mode, {"trial": "0"})), field_manager="bench", force=True)
    await servers[1].apply(
        codecs.from_dict(flag(mode, {"open": "always"})), field_manager="bench", force=True
    )
    w = GateWatch(run.client, f"gate-{mode}")
    w.start()
    await run.client.apply(codecs.from_dict(gate_policy(mode, 0)), force=True)
    await run.client.apply(codecs.from_dict(gate_promotion(mode, 0)), force=True)
    await w.until(lambda: w.rollout().get("phase") == "Succeeded", limit=run.args.budget)
    return w


async def gates(run: Run) -> dict[str, Any]:
    servers = [
        kubeclient.async_client(kubeclient.config_from_file(m.kubeconfig)) for m in run.state.members[:2]
    ]
    out: dict[str, Any] = {mode: {"summary_ready_ms": [], "stage_passed_ms": []} for mode in MODES}
    watches = {mode: await _gate_setup(run, mode, servers) for mode in MODES}
    try:
        for trial in range(1, run.args.gate_trials + 1):
            for mode in MODES:
                ready, moved = await gate_trial(watches[mode], servers[0], mode, trial)
                out[mode]["summary_ready_ms"].append(round(ready * 1000, 1))
                out[mode]["stage_passed_ms"].append(round(moved * 1000, 1))
                print(
                    f"gate trial {trial:3d} {mode}: summary Ready {ready * 1000:7.1f} ms, "
                    f"stage passed {moved * 1000:7.1f} ms",
                    flush=True,
                )
    finally:
        for w in watches.values():
            w.stop()
        for c in servers:
            await c.close()
    return out


# --- 3. the solo agent's memory ------------------------------------------------------------------


def _status_kib(pid: int, field: str) -> int:
    try:
        m = re.search(rf"{field}:\s+(\d+) kB", Path(f"/proc/{pid}/status").read_text())
    except OSError:
        return 0
    return int(m.group(1)) if m else 0


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


class Peak(threading.Thread):
    """Peak RSS of a process and of its tree (its helm children apart), every 20 ms."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.main = self.tree = self.helm = 0
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.is_set():
            pids = bs.tree(self.pid)
            self.main = max(self.main, bs.rss_bytes([self.pid]))
            self.tree = max(self.tree, bs.rss_bytes(pids))
            helm = [p for p in pids if _comm(p) == "helm"]
            self.helm = max(self.helm, bs.rss_bytes(helm))
            self.stopping.wait(0.02)

    def mib(self) -> dict[str, float]:
        return {
            k: round(v / 2**20, 1) for k, v in (("main", self.main), ("tree", self.tree), ("helm", self.helm))
        }


def helm_promotion(repo_url: str) -> Obj:
    chart = {
        "repositoryURL": repo_url,
        "repositoryName": "local",
        "chartName": "local/hello",
        "chartVersion": "1.0.0",
        "releaseName": "solo-hello",
        "releaseNamespace": "solo-hello",
        "helmChartAction": "Install",
    }
    stage = {"name": "only", "clusterSelector": {"matchLabels": {"mode": SOLO}}}
    return {
        "apiVersion": API,
        "kind": "ClusterPromotion",
        "metadata": {"name": "solo-helm"},
        "spec": {"profileSpec": {"helmCharts": [chart]}, "stages": [stage]},
    }


async def _sample_idle(pid: int, seconds: float) -> dict[str, float]:
    peak = Peak(pid)
    peak.start()
    await asyncio.sleep(seconds)
    peak.stopping.set()
    peak.join()
    return peak.mib()


async def agent_rss(run: Run, helm: str, workdir: Path) -> dict[str, Any]:
    """The solo agent idle, then while it installs `hello` (until the release's ConfigMap is on its
    member, and 5 s more of the agent judging it)."""
    idle = await _sample_idle(run.solo, 5.0)
    member = kubeclient.async_client(kubeclient.config_from_file(run.state.members[0].kubeconfig))
    peak = Peak(run.solo)
    try:
        with chartrepo.serve(helm, workdir / "charts", [(HELLO, "1.0.0")]) as repo:
            peak.start()
            t0 = time.monotonic()
            await run.client.apply(codecs.from_dict(helm_promotion(repo.url)), force=True)
            installed = await _installed(member, run.args.budget)
            took = time.monotonic() - t0
            await asyncio.sleep(5.0)
    finally:
        peak.stopping.set()
        await member.close()
    return {
        "idle_mib": idle,
        "helm_peak_mib": peak.mib(),
        "installed_s": round(took, 2) if installed else None,
        "hwm_main_mib": round(_status_kib(run.solo, "VmHWM") / 1024, 1),
    }


async def _installed(member: AsyncClient, budget: float) -> bool:
    deadline = time.monotonic() + budget
    while time.monotonic() < deadline:
        with contextlib.suppress(Exception):
            await member.get(ConfigMap, "solo-hello-config", namespace="solo-hello")
            return True
        await asyncio.sleep(0.1)
    return False


# --- the run -------------------------------------------------------------------------------------


async def measure(
    state: fleet.FleetState,
    args: argparse.Namespace,
    pids: tuple[int, list[int], int],
    helm: str,
    workdir: Path,
    out: dict[str, Any],
) -> None:
    """Each part in turn, its figures into `out` as soon as they are known."""
    client = kubeclient.async_client(kubeclient.config_from_file(state.cluster(fleet.MANAGEMENT).kubeconfig))
    controller, agents, solo = pids
    run = Run(state, args, client, bs.Watch(client), controller, agents, solo, out)
    run.watch.start()
    try:
        for mode in MODES:
            out[mode] = got = await rollout(run, mode)
            print(f"{mode}: done in {got['done_s']} s; {json.dumps(got['per_cluster'])}", flush=True)
            print(f"  {mode} passes: {got['passes']}", flush=True)
            print(f"  {mode} stages (ms after the promotion's write): {got['stages_ms']}", flush=True)
            print(f"  {mode} member requests: {got['spent']['member_requests_by_kind']}", flush=True)
            if got["works"]:
                print(f"  {mode} MemberWork (ms after the promotion's write): {got['works']}", flush=True)
        before = await run.read()
        out["gates"] = await gates(run)
        out["gates_window"] = window(before, await run.read())
        out["agent_rss"] = await agent_rss(run, helm, workdir)
        out["hosts_rss_mib"] = [round(bs.rss_bytes(bs.tree(p)) / 2**20) for p in agents]
        out["hosts_main_rss_mib"] = [round(bs.rss_bytes([p]) / 2**20) for p in agents]
    finally:
        run.watch.stop()
        await client.close()


def lost_leases(workdir: Path) -> int:
    return sum(p.read_text(errors="replace").count("LEASE LOST") for p in workdir.glob("agents-*.log"))


def setup_members(
    state: fleet.FleetState, args: argparse.Namespace, workdir: Path
) -> tuple[list[AgentSpec], AgentSpec]:
    mk, n = state.cluster(fleet.MANAGEMENT).kubeconfig, args.clusters
    t0 = time.monotonic()
    register_push(mk, state.members, n)
    specs = register_pull(
        state, n, workdir, [(name_of("pull", i), labels_of("pull", i, len(state.members))) for i in range(n)]
    )
    solo = register_pull(state, 1, workdir, [(SOLO, {"mode": SOLO})])[0]
    print(f"{2 * n + 1} registrations in {time.monotonic() - t0:.0f} s", flush=True)
    return specs, solo


def start_everything(
    state: fleet.FleetState,
    args: argparse.Namespace,
    bins: binaries.Binaries,
    workdir: Path,
    started: list[subprocess.Popen[bytes]],
) -> tuple[subprocess.Popen[bytes], list[subprocess.Popen[bytes]], subprocess.Popen[bytes]]:
    """The controller, the registrations, the agent hosts and the solo agent; returns once every
    agent holds its lease and every member is ready."""
    mk, helm = state.cluster(fleet.MANAGEMENT).kubeconfig, bins.path("helm")
    with kubeclient.client(kubeclient.config_from_file(mk)) as mgmt:
        install.install(mgmt)
        controller = bs.start_controller(state, helm, workdir / "controller.log", 1)
        started.append(controller)
        specs, solo = setup_members(state, args, workdir)
        hosts = start_hosts(specs, args.agents_per_process, helm, args.pool_workers, workdir)
        started += hosts
        started.append(solo_proc := start_solo(solo, helm, workdir))
        took = wait_until(lambda: leases_held(mgmt) >= args.clusters + 1, "every agent's lease")
        print(f"{args.clusters + 1} agents hold their leases ({took:.0f} s)", flush=True)
        took = wait_until(lambda: members_ready(mgmt) >= 2 * args.clusters + 1, "every member ready")
        print(f"every member ready ({took:.0f} s)", flush=True)
    return controller, hosts, solo_proc


def run_bench(workdir: Path, bins: binaries.Binaries, args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {"args": {k: v for k, v in vars(args).items() if k != "agent_host"}}
    state_dir = workdir / "fleet"
    state = bs.light_fleet(state_dir, args.servers, bins)
    started: list[subprocess.Popen[bytes]] = []
    stopping = threading.Event()
    try:
        controller, hosts, solo = start_everything(state, args, bins, workdir, started)
        stopping = processes.watch_exit(controller, "the controller", workdir / "controller.log")
        pids = (controller.pid, [h.pid for h in hosts], solo.pid)
        asyncio.run(measure(state, args, pids, bins.path("helm"), workdir, out))
    finally:
        stopping.set()
        out["lost_leases"] = lost_leases(workdir)
        stop_all(list(reversed(started)))
        if args.keep_logs:
            bs.keep_logs(workdir, Path(args.keep_logs))
        fleet.down(state_dir)
    return out


# --- the report ----------------------------------------------------------------------------------


ROWS = (
    ("hub controller CPU, s / cluster", "controller_cpu", 4),
    ("mgmt API server writes / cluster (lease renewals apart)", "mgmt_writes", 2),
    ("lease renewals / cluster over the window", "lease_writes", 2),
    ("agent CPU (hosts + sandboxes), s / cluster", "agents_cpu", 4),
    ("mgmt API server CPU, s / cluster", "mgmt_apiserver_cpu", 4),
    ("etcd CPU, s / cluster", "etcd_cpu", 4),
    ("member API servers CPU, s / cluster", "members_cpu", 4),
    ("member API server requests / cluster", "member_requests", 2),
)


def _cell(got: dict[str, Any], key: str, digits: int) -> str:
    figures = got["per_cluster"]
    return f"{figures[key]:.{digits}f} (net {figures[f'{key}_net']:.{digits}f})"


def report_rollouts(out: dict[str, Any]) -> list[str]:
    modes = [m for m in MODES if m in out]
    lines = [f"{'':58} | " + " | ".join(f"{m:>26}" for m in modes)]
    done = [f"{out[m]['done_s']} s" if out[m]["completed"] else "NOT DONE" for m in modes]
    window_s = [f"{out[m]['spent']['seconds']:.1f} s" for m in modes]
    lines.append(f"{'time to done (3 stages)':58} | " + " | ".join(f"{d:>26}" for d in done))
    lines.append(f"{'measured window (to done + settle)':58} | " + " | ".join(f"{w:>26}" for w in window_s))
    for label, key, digits in ROWS:
        lines.append(f"{label:58} | " + " | ".join(f"{_cell(out[m], key, digits):>26}" for m in modes))
    for m in modes:
        idle, s = out[m]["idle"], out[m]["idle"]["seconds"]
        lines.append(
            f"idle before {m} ({s:.0f} s), per s: controller CPU {idle['controller_cpu'] / s:.3f}, "
            f"agents CPU {idle['agents_cpu'] / s:.3f}, mgmt writes {idle['mgmt_writes'] / s:.2f}, "
            f"lease renewals {idle['lease_writes'] / s:.2f}"
        )
    n = out["args"]["clusters"]
    for m in modes:
        kinds_ = ", ".join(
            f"{k} {v / n:.2f}" for k, v in list(out[m]["spent"]["writes_by_kind"].items())[:10]
        )
        lines.append(f"{m} mgmt writes per cluster by verb and resource: {kinds_}")
    return lines


def report_gates(gates_: dict[str, Any], spent: dict[str, Any] | None) -> list[str]:
    lines = []
    for key, what in (
        ("summary_ready_ms", "summary Ready on the hub"),
        ("stage_passed_ms", "the stage's next phase"),
    ):
        cells = []
        for m in MODES:
            values = gates_[m][key]
            cells.append(f"{m} p50 {bs.pct(values, 0.5):.0f} / p99 {bs.pct(values, 0.99):.0f} ms")
        ratio = bs.pct(gates_["pull"][key], 0.5) / max(bs.pct(gates_["push"][key], 0.5), 1e-9)
        trials = len(gates_["push"][key])
        lines.append(
            f"health gate, flip on member -> {what} ({trials} trials): {'; '.join(cells)}; "
            f"pull/push p50 {ratio:.1f}x"
        )
    if spent is not None:
        kinds_ = ", ".join(f"{k} {v:.0f}" for k, v in list(spent["writes_by_kind"].items())[:8])
        lines.append(f"mgmt writes during the gate trials ({spent['seconds']:.0f} s, both modes): {kinds_}")
    return lines


def report(out: dict[str, Any]) -> None:
    a = out["args"]
    hosts = -(-a["clusters"] // a["agents_per_process"])
    lines = [
        "",
        f"pull mode against push mode, same run: {a['clusters']} registrations per mode on {a['servers']} "
        f"light member API servers; pull agents {a['agents_per_process']} per process ({hosts} processes, "
        f"{a['pool_workers']} sandbox workers each); figures per cluster, raw (net of the idle rates)",
        *report_rollouts(out),
    ]
    if "gates" in out:
        lines += report_gates(out["gates"], out.get("gates_window"))
    if "agent_rss" in out:
        r = out["agent_rss"]
        lines.append(
            f"agent RSS (one `fleetwave agent run`): idle {r['idle_mib']['main']} MiB (tree with its sandbox "
            f"workers {r['idle_mib']['tree']} MiB); during a Helm install of hello: peak "
            f"{r['helm_peak_mib']['main']} MiB (tree {r['helm_peak_mib']['tree']} MiB, helm itself "
            f"{r['helm_peak_mib']['helm']} MiB), installed in {r['installed_s']} s"
        )
        lines.append(
            f"agent host processes RSS (tree / main), MiB: {out['hosts_rss_mib']} / "
            f"{out['hosts_main_rss_mib']}"
        )
    lines.append(f"agent leases lost and contended for again: {out.get('lost_leases')}")
    print("\n".join(lines), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--clusters", type=int, default=100, help="registrations per mode")
    parser.add_argument("--servers", type=int, default=10, help="light member API servers (at least 3)")
    parser.add_argument("--agents-per-process", type=int, default=20)
    parser.add_argument("--pool-workers", type=int, default=2, help="sandbox workers per agent process")
    parser.add_argument("--gate-trials", type=int, default=20)
    parser.add_argument("--idle-seconds", type=float, default=15.0)
    parser.add_argument("--settle-seconds", type=float, default=5.0)
    parser.add_argument("--budget", type=float, default=600.0, help="seconds a rollout may take")
    parser.add_argument("--json", default="bench_pull_mode.json", help="where the figures are written")
    parser.add_argument("--keep-logs", default=None, help="copy the run's logs here before tearing down")
    parser.add_argument("--agent-host", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--helm", default="helm", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.agent_host:
        host_main(args.agent_host, args.helm, args.pool_workers)
        return
    if args.servers < 3 or args.clusters < args.servers:
        parser.error("--servers must be at least 3 (a server per stage), --clusters at least --servers")
    src = str(Path(fleetwave.__file__).resolve().parents[1])  # subprocesses run this fleetwave
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (src, os.environ.get("PYTHONPATH")) if p)
    bins = binaries.ensure()
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="fleetwave-bench-pull-") as tmp:
        try:
            out = run_bench(Path(tmp), bins, args)
        finally:
            if out:
                Path(args.json).write_text(json.dumps(out, indent=1))
                report(out)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
