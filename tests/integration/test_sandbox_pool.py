"""Health checks run in killable worker processes: hostile scripts fail by a named limit while the
caller's event loop keeps running, and the pool replaces what it killed (real member API server)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from fleetwave.api.sveltos import ValidateHealth
from fleetwave.local import fleet, processes
from fleetwave.sandbox.pool import Budget, CheckPool, Verdict

T = TypeVar("T")

# Exponential backtracking inside Lua's C matcher: no instruction hook fires while it runs.
BACKTRACKING = """
function evaluate()
  local subject = string.rep("a", 40)
  string.find(subject, string.rep("a?", 40) .. string.rep("a", 40))
  return {healthy = true}
end
"""
HEALTHY = "function evaluate() return {healthy = true} end"
GREEDY = """
function evaluate()
  local t = {}
  for i = 1, 1e9 do t[i] = string.rep("x", 1000) .. i end
end
"""


def _check(script: str) -> ValidateHealth:
    return ValidateHealth.model_validate(
        {
            "name": "probe",
            "featureID": "Resources",
            "group": "",
            "version": "v1",
            "kind": "Namespace",
            "resourceName": "default",
            "script": script,
        }
    )


async def _while_ticking(job: Awaitable[T]) -> tuple[T, int, float]:
    """Run `job` while a 20 ms ticker runs on the same loop: (result, ticks, longest gap in s)."""
    gaps: list[float] = []

    async def tick() -> None:
        while True:
            start = time.monotonic()
            await asyncio.sleep(0.02)
            gaps.append(time.monotonic() - start)

    ticker = asyncio.create_task(tick())
    try:
        result = await job
    finally:
        ticker.cancel()
    return result, len(gaps), max(gaps, default=0.0)


def _kubeconfig(local_fleet: fleet.FleetState) -> bytes:
    return Path(local_fleet.members[0].kubeconfig).read_bytes()


async def test_a_backtracking_script_is_stopped_by_wall_time_and_the_loop_keeps_running(
    local_fleet: fleet.FleetState,
) -> None:
    pool = CheckPool(Budget(workers=1, wall_seconds=3.0, cpu_seconds=0))  # the wall clock alone
    await pool.start()
    try:
        kubeconfig = _kubeconfig(local_fleet)
        verdict, ticks, longest = await _while_ticking(pool.check(kubeconfig, [_check(BACKTRACKING)], []))
        assert verdict == Verdict(False, "health checks exceeded the wall-time limit of 3s; stopped")
        assert pool.killed == 1
        # ~150 ticks fit in 3 s; in-process, the same script froze the loop for minutes (zero ticks).
        assert ticks > 30
        assert longest < 1.0
        after = await pool.check(kubeconfig, [_check(HEALTHY)], [("v1", "Namespace", None, "default")])
        assert after == Verdict(True, "ready; health checks passing: probe")
    finally:
        await pool.close()


async def test_memory_and_instruction_limits_fail_the_check_without_killing_the_worker(
    local_fleet: fleet.FleetState,
) -> None:
    pool = CheckPool(Budget(workers=1, wall_seconds=20.0))
    await pool.start()
    try:
        kubeconfig = _kubeconfig(local_fleet)
        greedy = await pool.check(kubeconfig, [_check(GREEDY)], [])
        assert not greedy.ok
        assert "memory limit exceeded" in greedy.message
        spin = await pool.check(kubeconfig, [_check("function evaluate() while true do end end")], [])
        assert "instruction limit exceeded" in spin.message
        assert pool.killed == 0
    finally:
        await pool.close()


async def test_an_unreachable_member_is_a_failed_check_not_an_error() -> None:
    dead = _dead_kubeconfig()
    pool = CheckPool(Budget(workers=1))
    await pool.start()
    try:
        verdict = await pool.check(dead, [_check(HEALTHY)], [("v1", "Namespace", None, "default")])
    finally:
        await pool.close()
    assert not verdict.ok
    assert verdict.message.startswith("cluster unreachable: ConnectError"), verdict.message


def _dead_kubeconfig() -> bytes:
    """A kubeconfig for a loopback port nothing listens on."""
    port = processes.free_port()
    return (
        "apiVersion: v1\nkind: Config\ncurrent-context: x\n"
        f"clusters: [{{name: x, cluster: {{server: 'https://127.0.0.1:{port}'}}}}]\n"
        "users: [{name: x, user: {token: t}}]\n"
        "contexts: [{name: x, context: {cluster: x, user: x}}]\n"
    ).encode()


def _worker_pids() -> set[int]:
    """Live (not yet reaped) sandbox worker processes started by this test process."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                if ppid == os.getpid() and b"fleetwave.sandbox.worker" in (entry / "cmdline").read_bytes():
                    found.add(int(entry.name))
    return found


async def _until(predicate: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 30
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


async def test_closing_the_pool_kills_and_reaps_a_busy_worker(local_fleet: fleet.FleetState) -> None:
    pool = CheckPool(Budget(workers=1, wall_seconds=300.0, cpu_seconds=0))
    await pool.start()
    busy = _worker_pids()
    assert len(busy) == 1
    job = asyncio.create_task(pool.check(_kubeconfig(local_fleet), [_check(BACKTRACKING)], []))
    await _until(lambda: pool.idle == 0, "the job to reach the worker")
    await asyncio.sleep(0.5)
    await pool.close()
    assert await job == Verdict(False, "the health-check sandbox is shut down")
    assert not (_worker_pids() & busy)
    assert pool.processes == 0


async def test_a_cancelled_check_kills_its_worker_and_the_pool_carries_on(
    local_fleet: fleet.FleetState,
) -> None:
    pool = CheckPool(Budget(workers=1, wall_seconds=300.0, cpu_seconds=0))
    await pool.start()
    try:
        kubeconfig = _kubeconfig(local_fleet)
        first = _worker_pids()
        job = asyncio.create_task(pool.check(kubeconfig, [_check(BACKTRACKING)], []))
        await _until(lambda: pool.idle == 0, "the job to reach the worker")
        await asyncio.sleep(0.5)
        job.cancel()
        with pytest.raises(asyncio.CancelledError):
            await job
        await _until(lambda: not (_worker_pids() & first), "the cancelled job's worker to be reaped")
        after = await pool.check(kubeconfig, [_check(HEALTHY)], [("v1", "Namespace", None, "default")])
        assert after == Verdict(True, "ready; health checks passing: probe")
    finally:
        await pool.close()
    assert _worker_pids() == set()


async def test_a_start_cancelled_midway_waits_for_every_process_it_started(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """As when the controller stops while the pool is still warming: its event loop is closed right
    after the pool, so every process must have been waited for by then (else its pipes leak)."""
    started: list[asyncio.subprocess.Process] = []
    spawn = asyncio.create_subprocess_exec

    async def recording(*args: Any, **kwargs: Any) -> asyncio.subprocess.Process:
        proc = await spawn(*args, **kwargs)
        started.append(proc)
        return proc

    monkeypatch.setattr(asyncio, "create_subprocess_exec", recording)
    pool = CheckPool(Budget(workers=2))
    warming = asyncio.create_task(pool.start())
    await _until(lambda: len(started) == 2, "both workers spawned")
    warming.cancel()
    await asyncio.gather(warming, return_exceptions=True)
    await pool.close()
    assert [p.returncode for p in started] == [-9, -9]  # killed, and their exit seen by the loop
    assert _worker_pids() == set()
