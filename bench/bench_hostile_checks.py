"""The sandbox table (issue 9, ADR 0041, 0097): hostile health checks on a real member, before and after.

Before: the check evaluated in-process on a worker thread, as the controller did before ADR 0041
(today's in-interpreter limits included), in a child process the bench kills after --cap seconds;
the child's event loop ticks every 20 ms next to it and reports its longest stall.
After: the same check through the running controller's own sandbox pool (app.build, the pool's
default budget), while a thread probes that controller's /healthz every 100 ms.
Fairness (issue 40, finding 4): through the same pool, eight C-level hostile checks of one owner and
a check of a second owner against a member that accepts connections and never answers are queued
first; meanwhile a third owner's benign check is judged every 0.25 s. Its latency (queueing
included) is reported beside the hostile checks' own, and beside the same benign check alone.

Run: .venv/bin/python bench/bench_hostile_checks.py [--cap 30] [--skip-before]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Awaitable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from fleetwave.api.sveltos import ValidateHealth
from fleetwave.controllers import app
from fleetwave.kube import client as kubeclient
from fleetwave.kube import sync_ops
from fleetwave.local import binaries, fleet, processes
from fleetwave.mgmt import install
from fleetwave.sandbox.pool import Budget, CheckPool, Verdict

NS = "default"
OBJECTS = [("v1", "ConfigMap", NS, "marker")]
LIST = "[" + ",".join(str(i) for i in range(60)) + "]"


def _lua(body: str) -> str:
    return f"function evaluate()\n{body}\nreturn {{healthy = true}}\nend"


HOSTILE: dict[str, tuple[str, dict[str, object]]] = {
    "getResource at the Lua memory cap": (
        "getResource data budget; on main this froze the whole process",
        {
            "script": _lua(
                "local hog = {}\npcall(function() for i = 1, 1e9 do hog[i] = i end end)\n"
                "local kept = {}\n"
                f'for i = 1, 1000 do kept[i] = getResource("v1", "ConfigMap", "{NS}", "big") end'
            )
        },
    ),
    "backtracking a? x40 in string.find": (
        "C matcher, no hook fires: the worker's CPU-time limit",
        {"script": _lua('string.find(string.rep("a", 40), string.rep("a?", 40) .. string.rep("a", 40))')},
    ),
    "%b() over 1 MB": (
        "C matcher, no hook fires: the worker's CPU-time limit",
        {"script": _lua('string.find(string.rep("(", 1e6), "%b()")')},
    ),
    "lazy .-.-.-.-b over 5 MB": (
        "pattern cost guard",
        {"script": _lua('string.find(string.rep("a", 5e6), ".-.-.-.-b")')},
    ),
    "while true do end": ("instruction limit", {"script": "function evaluate() while true do end end"}),
    "allocation loop": (
        "Lua memory cap",
        {"script": _lua('local t = {}\nfor i = 1, 1e9 do t[i] = string.rep("x", 1000) .. i end')},
    ),
    "1000 getResource calls": (
        "getResource call budget",
        {"script": _lua(f'for i = 1, 1000 do getResource("v1", "ConfigMap", "{NS}", "marker") end')},
    ),
    "CEL nested macros 60^3": (
        "CEL cost limit (~1.6 s of CPU: the CPU-time limit may come first)",
        {
            "evaluateCEL": [
                {"name": "nested", "rule": f"{LIST}.all(a, {LIST}.all(b, {LIST}.all(c, a + b + c >= 0)))"}
            ]
        },
    ),
    "CEL matches('^(a+)+$') on 30 a's + '!'": (
        "RE2 in celpy: linear time",
        {
            "evaluateCEL": [
                {
                    "name": "regex",
                    "rule": "self.kind == 'ConfigMap' && '" + "a" * 30 + "!'.matches('^(a+)+$')",
                }
            ]
        },
    ),
}


def _backtracking(n: int) -> str:
    return f'string.find(string.rep("a", {n}), string.rep("a?", {n}) .. string.rep("a", {n}))'


def _lazy_loop(filler: str, missing: str) -> str:
    return f'local s = string.rep("{filler}", 30000) for i = 1, 1e6 do string.find(s, ".-{missing}") end'


def _doubling(times: int) -> dict[str, object]:
    """A string doubled `times` by `map`, then 3,600 comparisons: few syntax-tree steps, minutes of C."""
    rule = "['abcd']" + ".map(s, s + s)" * times + f".all(s, {LIST}.all(a, {LIST}.all(b, s + s != s)))"
    return {"evaluateCEL": [{"name": "doubling", "rule": rule}]}


# C-level work no interpreter hook reaches, each a different check (no cool-down spares a run).
C_LEVEL: dict[str, dict[str, object]] = {
    "a? x40 backtracking": {"script": _lua(_backtracking(40))},
    "a? x42 backtracking": {"script": _lua(_backtracking(42))},
    "%b() over 1 MB": {"script": _lua('string.find(string.rep("(", 1e6), "%b()")')},
    "%b() over 2 MB": {"script": _lua('string.find(string.rep("(", 2e6), "%b()")')},
    # (30001)^2 steps per find passes the pattern-cost guard; the loop outruns the hook's clock check.
    ".- loop over 30 KB": {"script": _lua(_lazy_loop("a", "b"))},
    ".- loop over 30 KB (2)": {"script": _lua(_lazy_loop("b", "a"))},
    "CEL .all over a doubled string": _doubling(22),
    "CEL .all over a doubled string (2)": _doubling(21),
}
BENIGN: dict[str, object] = {"script": "function evaluate() return {healthy = true} end"}


def _check(fields: dict[str, object], name: str = "hostile") -> ValidateHealth:
    return ValidateHealth.model_validate(
        {
            "name": name,
            "featureID": "Resources",
            "version": "v1",
            "kind": "ConfigMap",
            "namespace": NS,
            "resourceName": "marker",
            **fields,
        }
    )


# --- before: in-process, in a child the bench can kill -------------------------------------------


def child(name: str, kubeconfig: str) -> None:
    """Judge one hostile check on a worker thread while this loop ticks; print progress as JSON lines."""
    from fleetwave.health import cluster_check  # noqa: PLC0415 (the child alone evaluates in-process)

    config = Path(kubeconfig).read_bytes()

    async def main() -> None:
        start = time.monotonic()
        job = asyncio.create_task(
            asyncio.to_thread(cluster_check.judge, config, [_check(HOSTILE[name][1])], OBJECTS)
        )
        longest = 0.0
        last_report = start
        while not job.done():
            before = time.monotonic()
            await asyncio.sleep(0.02)
            longest = max(longest, time.monotonic() - before - 0.02)
            if time.monotonic() - last_report > 1:
                print(json.dumps({"stall_ms": longest * 1000}), flush=True)
                last_report = time.monotonic()
        verdict = job.result()
        seconds = time.monotonic() - start
        print(
            json.dumps(
                {"stall_ms": longest * 1000, "ok": verdict.ok, "message": verdict.message, "s": seconds}
            )
        )

    asyncio.run(main())


def in_process(name: str, kubeconfig: str, cap: float) -> tuple[str, str, str]:
    cmd = [sys.executable, __file__, "--child", name, "--kubeconfig", kubeconfig]
    start = time.monotonic()
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=cap, check=False).stdout
        finished = True
    except subprocess.TimeoutExpired as e:
        raw = e.stdout or b""
        out = raw.decode() if isinstance(raw, bytes) else raw
        finished = False
    lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    stall = f"{lines[-1]['stall_ms']:.0f} ms" if lines else "no tick at all"
    if not finished:
        return f"still running at {cap:g}s (killed)", f">{cap:g} s", stall
    if not lines or "message" not in lines[-1]:
        return "child crashed", f"{time.monotonic() - start:.1f} s", stall
    last = lines[-1]
    return _short(last["message"]), f"{last['s']:.2f} s", stall


# --- after: the running controller's own pool -------------------------------------------------------


class HealthzProbe:
    def __init__(self, port: int) -> None:
        self.url = f"http://127.0.0.1:{port}/healthz"
        self.samples: list[float] = []
        self.failures = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self._stop.wait(0.1):
            start = time.monotonic()
            try:
                with urllib.request.urlopen(self.url, timeout=10) as r:
                    r.read()
                self.samples.append((time.monotonic() - start) * 1000)
            except OSError:
                self.failures += 1

    @contextlib.contextmanager
    def running(self) -> Iterator[HealthzProbe]:
        self.samples, self.failures = [], 0
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            self._thread.join()


@dataclass
class Fairness:
    alone_ms: list[float]  # the benign check with nothing else running
    beside_ms: list[float]  # the same check while the hostile queue and the silent member run
    hostile: list[tuple[str, float, str]]  # (check, seconds from queueing to verdict, verdict)
    silent: tuple[float, str]  # the silent member's check: seconds, verdict


async def sandboxed(
    mgmt_kubeconfig: str, member_kubeconfig: bytes, silent_kubeconfig: bytes
) -> tuple[dict[str, tuple[str, str, str]], Fairness]:
    settings = app.Settings(
        leader_election=False,
        metrics_port=processes.free_port(),
        health_port=processes.free_port(),
        helm_binary="helm",
        health_workers=Budget().workers,  # the pool's default (the controller's flag may lag it)
    )
    client = kubeclient.async_client(kubeclient.config_from_file(mgmt_kubeconfig))
    manager = app.build(client, settings, handle_signals=False)
    running = asyncio.create_task(manager.run())
    pool = manager.health_pool  # type: ignore[attr-defined]
    try:
        while pool.idle < settings.health_workers:  # noqa: ASYNC110 (the manager warms the pool)
            await asyncio.sleep(0.2)
        await asyncio.sleep(1)
        rows = await _one_by_one(pool, HealthzProbe(settings.health_port), member_kubeconfig)
        fair = await fairness(pool, member_kubeconfig, silent_kubeconfig)
    finally:
        manager.stop()
        await running
        await client.close()
    return rows, fair


async def _one_by_one(pool: CheckPool, probe: HealthzProbe, member: bytes) -> dict[str, tuple[str, str, str]]:
    rows = {}
    for name, (_, fields) in HOSTILE.items():
        with probe.running():
            start = time.monotonic()
            verdict = await pool.check(member, [_check(fields)], OBJECTS, owner="ClusterProfile//one-by-one")
            seconds = time.monotonic() - start
            await asyncio.sleep(0.3)  # a few probes after the kill too
        healthz = (
            f"p50 {statistics.median(probe.samples):.1f} / max {max(probe.samples):.1f} ms"
            + (f", {probe.failures} failed" if probe.failures else "")
            if probe.samples
            else "no answer"
        )
        rows[name] = (_short(verdict.message), f"{seconds:.2f} s", healthz)
    return rows


async def _timed(name: str, job: Awaitable[Verdict]) -> tuple[str, float, str]:
    start = time.monotonic()
    verdict = await job
    return name, time.monotonic() - start, _short(verdict.message)


async def _benign(pool: CheckPool, member: bytes) -> float:
    start = time.monotonic()
    verdict = await pool.check(member, [_check(BENIGN, "benign")], OBJECTS, owner="ClusterProfile//benign")
    if not verdict.ok:
        raise RuntimeError(f"the benign check failed: {verdict.message}")
    return (time.monotonic() - start) * 1000


async def fairness(pool: CheckPool, member: bytes, silent: bytes, alone: int = 40) -> Fairness:
    """The benign check alone, then every 0.25 s while the hostile queue and the silent member run."""
    alone_ms = [await _benign(pool, member) for _ in range(alone)]
    hostile_owner = "ClusterProfile//hostile"
    hostile = [
        asyncio.create_task(_timed(name, pool.check(member, [_check(f, name)], OBJECTS, owner=hostile_owner)))
        for name, f in C_LEVEL.items()
    ]
    slow = pool.check(silent, [_check(BENIGN, "silent")], OBJECTS, owner="ClusterProfile//slow")
    unanswered = asyncio.create_task(_timed("silent", slow))
    beside_ms: list[float] = []
    while not all(h.done() for h in hostile):
        await asyncio.sleep(0.25)
        beside_ms.append(await _benign(pool, member))
    _, seconds, message = await unanswered
    return Fairness(alone_ms, beside_ms, [h.result() for h in hostile], (seconds, message))


def _pct(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, round(q / 100 * len(ordered) + 0.5) - 1))]


def _latency(values: Sequence[float], unit: str) -> str:
    return (
        f"n={len(values):<3} p50 {_pct(values, 50):8.1f} {unit}  p99 {_pct(values, 99):8.1f} {unit}"
        f"  max {max(values):8.1f} {unit}"
    )


def _short(text: str, width: int = 100) -> str:
    for prefix in (
        "health check hostile failing: ",
        "health check 'hostile': ",
        "cannot judge ConfigMap default/marker: ",
    ):
        text = text.removeprefix(prefix)
    return text if len(text) <= width else text[: width - 3] + "..."


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cap", type=float, default=30.0, help="seconds an in-process run may take")
    parser.add_argument("--skip-before", action="store_true", help="leave out the in-process runs")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--kubeconfig", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.kubeconfig)
        return
    bins = binaries.ensure()
    with tempfile.TemporaryDirectory(prefix="fleetwave-bench-hostile-") as tmp:
        state_dir = Path(tmp) / "fleet"
        state = fleet.up(
            state_dir,
            members=fleet.default_member_labels(1),
            now=dt.datetime.now(dt.UTC),
            bin_dir=bins.directory,
        )
        try:
            mgmt = state.cluster(fleet.MANAGEMENT).kubeconfig
            install.install(kubeclient.client(kubeclient.config_from_file(mgmt)))
            member = state.members[0]
            _seed(member.kubeconfig)
            with _silent(member) as silent:
                after, fair = asyncio.run(sandboxed(mgmt, Path(member.kubeconfig).read_bytes(), silent))
            skipped = ("skipped", "-", "-")
            before = {
                n: skipped if args.skip_before else in_process(n, member.kubeconfig, args.cap)
                for n in HOSTILE
            }
        finally:
            fleet.down(state_dir)
    _report(before, after)
    _report_fairness(fair)


def _seed(kubeconfig: str) -> None:
    member_client = kubeclient.client(kubeclient.config_from_file(kubeconfig))
    for name, data in (("marker", {"k": "v"}), ("big", {"blob": "x" * 600_000})):
        doc = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": NS}}
        sync_ops.apply(member_client, doc | {"data": data})


@contextlib.contextmanager
def _silent(member: fleet.ClusterInfo) -> Iterator[bytes]:
    """The member's kubeconfig pointed at a loopback server that accepts and never answers."""
    text = Path(member.kubeconfig).read_text(encoding="utf-8")
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)
        yield text.replace(member.server, f"https://127.0.0.1:{listener.getsockname()[1]}").encode()


def _report(before: dict[str, tuple[str, str, str]], after: dict[str, tuple[str, str, str]]) -> None:
    budget = Budget()
    print("Sandbox table: one hostile check on one real member (kube-apiserver), same run.")
    print("before = in-process on a worker thread (today's in-interpreter limits), child killed at the cap;")
    print("         'loop stall' = longest gap of a 20 ms asyncio ticker in that process.")
    print(
        f"after  = the running controller's sandbox pool (defaults: {budget.workers} workers, "
        f"{budget.cpu_seconds} s CPU per job, {budget.wall_seconds:g} s wall, 1 GiB);"
    )
    print("         /healthz of that controller probed every 100 ms during the check.\n")
    for name, (stopper, _) in HOSTILE.items():
        b_out, b_time, b_stall = before[name]
        a_out, a_time, a_healthz = after[name]
        print(f"{name}  [{stopper}]")
        print(f"  before: {b_time:>8}  loop stall {b_stall:>10}  {b_out}")
        print(f"  after:  {a_time:>8}  /healthz {a_healthz}  {a_out}")


def _report_fairness(fair: Fairness) -> None:
    budget = Budget()
    print(
        f"\nFairness: {len(C_LEVEL)} C-level hostile checks of one owner and one check of a second owner "
        "against a member that accepts and never answers, queued first; a third owner's benign check "
        f"every 0.25 s meanwhile (pool: {budget.workers} workers, {budget.owner_workers} per owner, "
        f"{budget.cpu_seconds} s CPU, {budget.request_seconds:g} s per read)."
    )
    print(f"  benign alone:           {_latency(fair.alone_ms, 'ms')}")
    print(f"  benign beside hostile:  {_latency(fair.beside_ms, 'ms')}")
    hostile_s = [seconds for _, seconds, _ in fair.hostile]
    print(f"  hostile, queue to verdict: {_latency(hostile_s, 's')}")
    for name, seconds, message in fair.hostile:
        print(f"    {name:<36} {seconds:6.2f} s  {message}")
    print(f"  silent member:          {fair.silent[0]:6.2f} s  {fair.silent[1]}")


if __name__ == "__main__":
    main()
