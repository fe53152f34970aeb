"""Hostile health checks against the real controller (issue 9, ADR 0041, 0097): a Lua script that
used to freeze the whole process (getResource at the script's memory cap), one that used to run
forever (a backtracking pattern inside Lua's C matcher, out of reach of the instruction hook; the
worker's CPU-time limit stops it) and a CEL rule of huge cost each fail with a message naming the
limit that stopped them, while the controller keeps answering /healthz, keeps renewing its Lease and
delivers an unrelated profile. Stopping the controller kills and reaps its sandbox workers."""

from __future__ import annotations

import contextlib
import os
import statistics
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from lightkube import Client, codecs
from lightkube.resources.coordination_v1 import Lease
from lightkube.resources.core_v1 import ConfigMap
from promotion_support import ControllerThread, registered, settings, stage_phases, status, wait_for

from fleetwave.kube import client as kubeclient
from fleetwave.kube import kinds
from fleetwave.local import binaries, fleet
from fleetwave.mgmt import manifests

# Fills the script's memory up to its cap, then makes the host convert large objects into Lua: on
# main this made lupa raise out of an unprotected call while holding the interpreter lock, and every
# thread of the controller stopped.
FREEZE_LUA = """
function evaluate()
  local hog = {}
  pcall(function() for i = 1, 1e9 do hog[i] = i end end)
  local kept = {}
  for i = 1, 1000 do
    kept[i] = getResource("v1", "ConfigMap", obj.metadata.namespace, "big")
  end
  return {healthy = true}
end
"""
# Exponential backtracking inside string.find: in-process it ran for hours on one thread; in the
# sandbox the worker's CPU-time limit (2 s) ends it.
FOREVER_LUA = """
function evaluate()
  local subject = string.rep("a", 40)
  string.find(subject, string.rep("a?", 40) .. string.rep("a", 40))
  return {healthy = true}
end
"""
LIST = "[" + ",".join(str(i) for i in range(60)) + "]"
# 60^3 evaluations of the innermost expression: many minutes in cel-python without a cost limit.
COSTLY_CEL = f"{LIST}.all(a, {LIST}.all(b, {LIST}.all(c, a + b + c >= 0)))"

CPU_STOP = "health checks exceeded the CPU time limit of 2s; stopped"
LIMIT_WORDS = (
    "CPU time limit",
    "wall-time limit",
    "memory limit",
    "instruction limit",
    "time limit exceeded",
    "getResource call limit",
    "getResource data limit",
    "CEL cost limit",
)


@dataclass
class Observations:
    """What a bystander saw while the hostile checks ran: /healthz answers and Lease renewals."""

    healthz_ms: list[float] = field(default_factory=list)
    healthz_failures: list[str] = field(default_factory=list)
    renewals: list[Any] = field(default_factory=list)  # distinct renewTime values, in order
    holders: set[str] = field(default_factory=set)


class Monitor:
    """Probes /healthz and reads the leader Lease every half second on its own thread (and its own
    client), like a kubelet and a would-be successor would."""

    def __init__(self, health_port: int, kubeconfig: str) -> None:
        self.url = f"http://127.0.0.1:{health_port}/healthz"
        self.client = kubeclient.client(kubeclient.config_from_file(kubeconfig))
        self.seen = Observations()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="hostile-monitor", daemon=True)

    def __enter__(self) -> Observations:
        self._thread.start()
        return self.seen

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)

    def _loop(self) -> None:
        while not self._stop.wait(0.5):
            self._probe()
            self._lease()

    def _probe(self) -> None:
        start = time.monotonic()
        try:
            with urllib.request.urlopen(self.url, timeout=10) as response:
                ok = response.status == 200 and response.read() == b"ok"
        except OSError as e:
            self.seen.healthz_failures.append(f"{type(e).__name__}: {e}")
            return
        if ok:
            self.seen.healthz_ms.append((time.monotonic() - start) * 1000)
        else:
            self.seen.healthz_failures.append("unexpected answer")

    def _lease(self) -> None:
        with contextlib.suppress(Exception):  # a missed read is just a missed sample
            spec = self.client.get(Lease, "fleetwave-controller", namespace="fleetwave-system").spec
            if spec.holderIdentity:
                self.seen.holders.add(spec.holderIdentity)
            # A Lease released by an earlier controller keeps its last renewTime with no holder: only
            # renewals made while someone holds it count (that stale time once showed as a 15 s gap).
            held = bool(spec.holderIdentity) and spec.renewTime
            if held and (not self.seen.renewals or self.seen.renewals[-1] != spec.renewTime):
                self.seen.renewals.append(spec.renewTime)


def _policy(name: str, namespace: str, objects: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace},
        "data": {"content.yaml": yaml.safe_dump_all(objects)},
    }


def _config_map(name: str, namespace: str, data: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace},
        "data": data,
    }


def _check(name: str, namespace: str, marker: str, **fields: Any) -> dict[str, Any]:
    return {
        "name": name,
        "featureID": "Resources",
        "group": "",
        "version": "v1",
        "kind": "ConfigMap",
        "namespace": namespace,
        "resourceName": marker,
        **fields,
    }


def _profile(
    name: str, namespace: str, selector: dict[str, Any], checks: list[dict[str, Any]]
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "clusterSelector": selector,
        "policyRefs": [{"kind": "ConfigMap", "name": name, "namespace": namespace}],
    }
    if checks:
        spec["validateHealths"] = checks
    return {
        "apiVersion": "fleetwave.io/v1alpha1",
        "kind": "ClusterProfile",
        "metadata": {"name": name},
        "spec": spec,
    }


def _summaries(management: Client, profile: str) -> list[Any]:
    return list(
        management.list(
            kinds.resource("ClusterSummary"), namespace="*", labels={"fleetwave.io/cluster-profile": profile}
        )
    )


def _ready(summary: Any) -> dict[str, Any]:
    conditions = (summary.status or {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == "Ready"), {})


def _unhealthy_message(management: Client, profile: str, *words: str) -> str | None:
    """The Ready=False message of the profile's (single) summary once it contains one of `words`."""
    for summary in _summaries(management, profile):
        ready = _ready(summary)
        if ready.get("status") == "False" and any(w in ready.get("message", "") for w in words):
            return str(ready["message"])
    return None


def _sandbox_workers() -> set[int]:
    """Processes of this test process that run the sandbox worker (the controller runs in-process)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            stat = (entry / "stat").read_text()
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            cmdline = (entry / "cmdline").read_bytes()
            if ppid == os.getpid() and b"fleetwave.sandbox.worker" in cmdline:
                found.add(int(entry.name))
    return found


@contextlib.contextmanager
def _controller(state: fleet.FleetState, helm: str) -> Iterator[tuple[ControllerThread, int]]:
    chosen = settings(helm, "hostile")
    thread = ControllerThread(state.cluster(fleet.MANAGEMENT).kubeconfig, chosen)
    thread.start()
    try:
        yield thread, chosen.health_port
    finally:
        thread.stop()


def test_hostile_checks_fail_by_their_limits_while_the_controller_stays_responsive(
    local_fleet: fleet.FleetState,
    management: Client,
    members: dict[str, Client],
    bins: binaries.Binaries,
    namespace: str,
) -> None:
    dev = {"matchLabels": {"env": "dev"}}
    # One marker per hostile rollout: two profiles deploying one object is a conflict (ADR 0063).
    markers = {n: _config_map(f"marker-{n}", namespace, {"k": "v"}) for n in ("freeze", "cel", "forever")}
    # ~600 KB: a few dozen reads reach the script's getResource data budget.
    members["member-1"].apply(
        codecs.from_dict(_config_map("big", namespace, {"blob": "x" * 600_000})), force=True
    )
    freeze = _profile(
        "hostile-freeze", namespace, dev, [_check("freeze", namespace, "marker-freeze", script=FREEZE_LUA)]
    )
    costly = _profile(
        "hostile-cel",
        namespace,
        dev,
        [_check("costly", namespace, "marker-cel", evaluateCEL=[{"name": "nested", "rule": COSTLY_CEL}])],
    )
    forever = {
        "apiVersion": "fleetwave.io/v1alpha1",
        "kind": "ClusterPromotion",
        "metadata": {"name": "hostile-forever"},
        "spec": {
            "profileSpec": {
                "policyRefs": [{"kind": "ConfigMap", "name": "hostile-forever", "namespace": namespace}]
            },
            "stages": [
                {
                    "name": "dev",
                    "clusterSelector": dev,
                    "trigger": {
                        "auto": {
                            "delay": "1s",
                            "postDelayHealthChecks": [
                                _check("forever", namespace, "marker-forever", script=FOREVER_LUA)
                            ],
                        }
                    },
                },
                {"name": "staging", "clusterSelector": {"matchLabels": {"env": "staging"}}},
            ],
        },
    }
    bystander_cm = _config_map("bystander", namespace, {"delivered": "yes"})
    bystander = _profile(
        "bystander", namespace, {"matchExpressions": [{"key": "env", "operator": "Exists"}]}, []
    )
    policies = [
        _policy(name, namespace, [obj])
        for name, obj in (
            ("hostile-freeze", markers["freeze"]),
            ("hostile-cel", markers["cel"]),
            ("hostile-forever", markers["forever"]),
            ("bystander", bystander_cm),
        )
    ]
    hostile_kinds = [
        (kinds.resource("ClusterProfile"), "hostile-freeze"),
        (kinds.resource("ClusterProfile"), "hostile-cel"),
        (kinds.resource("ClusterPromotion"), "hostile-forever"),
        (kinds.resource("ClusterProfile"), "bystander"),
    ]
    mgmt_kubeconfig = local_fleet.cluster(fleet.MANAGEMENT).kubeconfig
    with registered(management, local_fleet), _controller(local_fleet, bins.path("helm")) as (thread, port):
        wait_for(_sandbox_workers, timeout=120, what="the sandbox pool warmed up")
        manifests.apply(management, policies)
        try:
            with Monitor(port, mgmt_kubeconfig) as seen:
                started = time.monotonic()
                manifests.apply(management, [freeze, costly, forever])
                wait_for(
                    lambda: stage_phases(management, "hostile-forever").get("dev") == "WaitingAfter",
                    timeout=120,
                    what="the promotion's dev stage evaluating its post-delay checks",
                )
                # The unrelated rollout gets through while the hostile checks are being stopped.
                manifests.apply(management, [bystander])
                wait_for(
                    lambda: (
                        len(_summaries(management, "bystander")) == 3
                        and all(
                            _ready(s).get("status") == "True" for s in _summaries(management, "bystander")
                        )
                    ),
                    timeout=120,
                    what="the bystander profile delivered and ready on all three members",
                )
                bystander_done = time.monotonic() - started
                frozen = wait_for(
                    lambda: _unhealthy_message(management, "hostile-freeze", *LIMIT_WORDS),
                    timeout=180,
                    what="the memory-cap getResource check failed by a limit",
                )
                cel_message = wait_for(
                    lambda: _unhealthy_message(management, "hostile-cel", "CEL cost limit", "CPU time limit"),
                    timeout=180,
                    what="the costly CEL rule failed by its cost limit",
                )
                cpu = wait_for(
                    lambda: _stage_message(management, "hostile-forever", "CPU time limit"),
                    timeout=180,
                    what="the backtracking check stopped by the CPU time limit",
                )
                stopped_at = time.monotonic() - started
                # Keep watching through the stopped check's cool-down (it fails at once, no worker).
                held = wait_for(
                    lambda: _stage_message(management, "hostile-forever", "not run again for"),
                    timeout=120,
                    what="the stopped check held back by its cool-down",
                )
                elapsed = time.monotonic() - started
            delivered = members["member-3"].get(ConfigMap, "bystander", namespace=namespace)
        finally:
            print(_state(management, [name for _, name in hostile_kinds]))  # shown if the test fails
            for resource, name in hostile_kinds:
                with contextlib.suppress(Exception):
                    management.delete(resource, name)
            for _, name in hostile_kinds:
                wait_for(
                    lambda name=name: (
                        not _summaries(management, name) and not _summaries(management, f"{name}-dev")
                    ),
                    timeout=120,
                    what=f"summaries of {name} withdrawn",
                )
        live_workers = _sandbox_workers()
        assert live_workers, "the controller's sandbox workers should be running"
    assert thread.error is None, thread.error
    assert not (_sandbox_workers() & live_workers), "sandbox workers outlived the controller"

    # Every hostile check failed, each naming the limit that stopped it.
    assert "member-1" in cpu
    assert CPU_STOP in cpu
    assert f"{CPU_STOP} (not run again for 30s)" in held
    assert any(w in frozen for w in LIMIT_WORDS), frozen
    # 100,000 steps of cel-python take ~1.6 s of CPU here: the worker's CPU limit may come first.
    assert (
        "CEL rule 'nested' exceeded the CEL cost limit of 100000 evaluation steps" in cel_message
        or CPU_STOP in cel_message
    ), cel_message
    # ... while the unrelated profile was delivered,
    assert (delivered.data or {}) == {"delivered": "yes"}
    # /healthz answered every probe (the monitor waits 10 s per probe; none failed or timed out),
    assert seen.healthz_failures == []
    assert len(seen.healthz_ms) >= elapsed / 5, (len(seen.healthz_ms), elapsed)
    assert statistics.median(seen.healthz_ms) < 1000, seen.healthz_ms
    # and the Lease kept being renewed by this controller (every ~2 s; it lasts 15 s).
    assert seen.holders == {"hostile"}
    assert len(seen.renewals) >= elapsed / 8, (len(seen.renewals), elapsed)
    gaps = [(b - a).total_seconds() for a, b in zip(seen.renewals, seen.renewals[1:], strict=False)]
    assert max(gaps) < 15, gaps
    print(
        f"\nhostile checks ran {elapsed:.0f}s: /healthz {len(seen.healthz_ms)} probes, "
        f"p50 {statistics.median(seen.healthz_ms):.1f} ms, max {max(seen.healthz_ms):.1f} ms; "
        f"{len(seen.renewals)} lease renewals, longest gap {max(gaps):.1f}s; bystander ready at "
        f"{bystander_done:.0f}s, backtracking check stopped at {stopped_at:.0f}s"
    )


def _state(management: Client, names: list[str]) -> str:
    lines = []
    with contextlib.suppress(Exception):
        for stage in status(management, "hostile-forever").get("stages") or []:
            lines.append(
                f"stage {stage.get('name')}: {stage.get('phase')}: {stage.get('currentStatusDescription')}"
            )
        lines.append(f"promotion conditions: {status(management, 'hostile-forever').get('conditions')}")
    for name in names:
        with contextlib.suppress(Exception):
            for summary in _summaries(management, name) + _summaries(management, f"{name}-dev"):
                lines.append(f"summary {summary.metadata.name}: {_ready(summary)}")
    return "\n".join(lines)


def _stage_message(management: Client, promotion: str, words: str) -> str | None:
    stages = {s["name"]: s for s in status(management, promotion).get("stages") or []}
    text = str(stages.get("dev", {}).get("currentStatusDescription", ""))
    return text if words in text else None
