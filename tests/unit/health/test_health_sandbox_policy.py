"""The sandbox pool's scheduling policy (ADR 0041), with the worker round trip replaced: a job that had
to be stopped is held back for a doubling cool-down, and jobs running user code never take the last
worker, so readiness-only judgements always find one. Owners' shares: test_health_sandbox_shares.py."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from health_objects import check

from fleetwave.sandbox.pool import Budget, CheckPool, Stop, Verdict

WALL = Verdict(False, "health checks exceeded the wall-time limit of 20s; stopped")
KUBECONFIG = b"apiVersion: v1\nkind: Config\n"
OBJECTS = [("v1", "Namespace", None, "default")]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class ScriptedPool(CheckPool):
    """Replies from a script instead of a worker: each dispatch pops (verdict, why it was stopped)."""

    def __init__(self, budget: Budget, clock: Clock, replies: list[tuple[Verdict, Stop]]) -> None:
        super().__init__(budget, clock=clock)
        self.replies = replies
        self.dispatched = 0

    async def _dispatch(self, job: dict[str, object]) -> tuple[Verdict, Stop]:
        self.dispatched += 1
        return self.replies.pop(0)


async def test_a_stopped_job_is_held_back_with_its_message_and_a_doubling_cool_down() -> None:
    clock = Clock()
    ready: tuple[Verdict, Stop] = (Verdict(True, "ready"), "")
    pool = ScriptedPool(Budget(), clock, [(WALL, "wall"), (WALL, "wall"), ready, ready])
    spin = [check(script="function evaluate() while true do end end")]

    assert await pool.check(KUBECONFIG, spin, OBJECTS) == WALL
    held = await pool.check(KUBECONFIG, spin, OBJECTS)
    assert held == Verdict(False, f"{WALL.message} (not run again for 30s)")
    assert (pool.dispatched, pool.held) == (1, 1)

    clock.now += 30
    assert await pool.check(KUBECONFIG, spin, OBJECTS) == WALL  # tried again: stopped again
    clock.now += 59
    assert (await pool.check(KUBECONFIG, spin, OBJECTS)).message.endswith("(not run again for 60s)")
    clock.now += 1
    assert await pool.check(KUBECONFIG, spin, OBJECTS) == Verdict(True, "ready")
    assert await pool.check(KUBECONFIG, spin, OBJECTS) == Verdict(True, "ready")  # forgiven
    assert pool.dispatched == 3 + 1


async def test_a_wall_time_cool_down_is_per_job_and_capped() -> None:
    clock = Clock()
    budget = Budget(cooldown_seconds=100, max_cooldown_seconds=150)
    stopped: tuple[Verdict, Stop] = (WALL, "wall")
    pool = ScriptedPool(budget, clock, [stopped] * 3 + [(Verdict(True, "ok"), ""), stopped])
    spin = [check(script="function evaluate() while true do end end")]
    await pool.check(KUBECONFIG, spin, OBJECTS)
    # Another cluster, other checks or other objects are other jobs: not held.
    assert (await pool.check(b"other", spin, OBJECTS)).message == WALL.message
    assert (await pool.check(KUBECONFIG, [], OBJECTS)).message == WALL.message
    assert (await pool.check(KUBECONFIG, spin, [])).ok
    clock.now += 100
    assert await pool.check(KUBECONFIG, spin, OBJECTS) == WALL  # its second stop: 200s, capped at 150s
    clock.now += 149
    assert (await pool.check(KUBECONFIG, spin, OBJECTS)).message.endswith("(not run again for 150s)")


async def test_a_failed_check_that_was_not_stopped_is_not_held() -> None:
    failing = Verdict(False, "health check 'probe': instruction limit exceeded")
    pool = ScriptedPool(Budget(), Clock(), [(failing, ""), (failing, "")])
    spin = [check(script="function evaluate() while true do end end")]
    assert await pool.check(KUBECONFIG, spin, OBJECTS) == failing
    assert await pool.check(KUBECONFIG, spin, OBJECTS) == failing
    assert pool.dispatched == 2


class BlockingPool(CheckPool):
    """Every dispatch waits until released; records which jobs are running."""

    def __init__(self, budget: Budget) -> None:
        super().__init__(budget)
        self.running: list[str] = []
        self.release = asyncio.Event()

    async def _dispatch(self, job: dict[str, Any]) -> tuple[Verdict, Stop]:
        kind = "user" if job["checks"] else "readiness"
        self.running.append(kind)
        await self.release.wait()
        return Verdict(True, kind), ""


async def _settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


@pytest.mark.parametrize("workers", [2, 4])
async def test_user_code_never_takes_the_last_worker(workers: int) -> None:
    pool = BlockingPool(Budget(workers=workers))
    user = [check(script="function evaluate() while true do end end")]
    hostile = [
        asyncio.create_task(pool.check(f"c{i}".encode(), user, OBJECTS, owner=f"ClusterProfile//p{i}"))
        for i in range(workers + 2)
    ]
    await _settle()
    assert pool.running == ["user"] * (workers - 1)
    readiness = asyncio.create_task(pool.check(KUBECONFIG, [], OBJECTS))
    await _settle()
    assert pool.running == ["user"] * (workers - 1) + ["readiness"]
    pool.release.set()
    assert (await readiness).message == "readiness"
    assert [v.message for v in await asyncio.gather(*hostile)] == ["user"] * (workers + 2)


async def test_a_single_worker_pool_still_runs_user_code() -> None:
    pool = BlockingPool(Budget(workers=1))
    pool.release.set()
    verdict = await pool.check(KUBECONFIG, [check(script="x")], OBJECTS)
    assert verdict == Verdict(True, "user")
