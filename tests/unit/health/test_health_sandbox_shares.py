"""Owners' shares of the sandbox pool (ADR 0097), with the worker round trip replaced: user-code jobs
wait in per-owner queues served in turn, one owner holds at most its share of workers, and a check
stopped for CPU holds back the owner's same code on every cluster, a wall-time stop only its job."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Callable

import pytest
from health_objects import check

from fleetwave.api.sveltos import ValidateHealth
from fleetwave.sandbox.pool import Budget, CheckPool, Stop, Verdict

OBJECTS = [("v1", "Namespace", None, "default")]
SPIN = [check(script="function evaluate() while true do end end")]
OTHER = [check(script="function evaluate() return {healthy = true} end")]
CPU = Verdict(False, "health checks exceeded the CPU time limit of 2s; stopped")
WALL = Verdict(False, "health checks exceeded the wall-time limit of 20s; stopped")
Reply = Callable[[str], tuple[Verdict, Stop]]


class GatedPool(CheckPool):
    """Each dispatch records its cluster (the job's kubeconfig text) and waits for that cluster's
    gate (all open with `open_gates`); its reply is `reply(cluster)`."""

    def __init__(self, budget: Budget, reply: Reply | None = None, *, open_gates: bool = False) -> None:
        super().__init__(budget)
        self.started: list[str] = []
        self.open_gates = open_gates
        self.gates: dict[str, asyncio.Event] = {}
        self.reply: Reply = reply or (lambda cluster: (Verdict(True, cluster), ""))

    def gate(self, cluster: str) -> asyncio.Event:
        if cluster not in self.gates:
            self.gates[cluster] = asyncio.Event()
            if self.open_gates:
                self.gates[cluster].set()
        return self.gates[cluster]

    async def _dispatch(self, job: dict[str, object]) -> tuple[Verdict, Stop]:
        cluster = base64.b64decode(str(job["kubeconfig"])).decode()
        self.started.append(cluster)
        await self.gate(cluster).wait()
        return self.reply(cluster)


async def _settle() -> None:
    for _ in range(50):
        await asyncio.sleep(0)


def _submit(
    pool: CheckPool, owner: str, cluster: str, checks: list[ValidateHealth] = SPIN
) -> asyncio.Task[Verdict]:
    return asyncio.create_task(pool.check(cluster.encode(), checks, OBJECTS, owner=owner))


async def test_owners_take_turns_on_the_user_lane() -> None:
    pool = GatedPool(Budget(workers=2))  # one worker for user code, one kept for readiness
    jobs = [_submit(pool, owner, name) for owner, name in [("A", "a1"), ("A", "a2"), ("A", "a3")]]
    jobs += [_submit(pool, "B", "b1"), _submit(pool, "B", "b2"), _submit(pool, "C", "c1")]
    await _settle()
    assert pool.started == ["a1"]
    for name in ("a1", "a2", "a3", "b1", "b2", "c1"):
        pool.gate(name).set()
    await asyncio.gather(*jobs)
    # First come does not mean first served: A's queue waits while B and C have their turns.
    assert pool.started == ["a1", "b1", "c1", "a2", "b2", "a3"]


@pytest.mark.parametrize("share", [1, 2])
async def test_an_owner_holds_at_most_its_share_and_others_start_meanwhile(share: int) -> None:
    pool = GatedPool(Budget(workers=4, owner_workers=share))
    hostile = [_submit(pool, "A", f"a{i}") for i in range(1, 9)]
    await _settle()
    assert pool.started == [f"a{i}" for i in range(1, share + 1)]
    b1, c1 = _submit(pool, "B", "b1"), _submit(pool, "C", "c1")
    await _settle()
    started = [f"a{i}" for i in range(1, share + 1)] + ["b1", "c1"][: 3 - share]
    assert pool.started == started  # three workers for user code in all
    readiness = asyncio.create_task(pool.check(b"r1", [], OBJECTS, owner="A"))
    await _settle()
    assert pool.started == [*started, "r1"]  # the last worker is readiness's
    pool.gate("r1").set()
    assert (await readiness).ok
    for gate in ("b1", "c1"):
        pool.gate(gate).set()
    await asyncio.gather(b1, c1)
    assert "c1" in pool.started
    # Workers are free now, but A's running jobs still hold its share: the rest of A waits.
    await _settle()
    assert sum(name.startswith("a") for name in pool.started) == share
    pool.gate("a1").set()
    await _settle()
    assert pool.started[-1] == f"a{share + 1}"
    for i in range(1, 9):
        pool.gate(f"a{i}").set()
    assert all(v.ok for v in await asyncio.gather(*hostile))


async def test_a_cancelled_waiting_job_gives_up_its_turn() -> None:
    pool = GatedPool(Budget(workers=2))
    first, waiting = _submit(pool, "A", "a1"), _submit(pool, "B", "b1")
    await _settle()
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    pool.gate("a1").set()
    assert (await first).ok
    pool.gate("c1").set()
    assert (await _submit(pool, "C", "c1")).ok
    assert pool.started == ["a1", "c1"]


async def test_a_cpu_stop_holds_the_owners_same_code_on_every_cluster() -> None:
    pool = GatedPool(Budget(), lambda cluster: (CPU, "cpu"), open_gates=True)
    # One owner's check over three clusters: the first run is stopped, the two queued behind it
    # fail at once when their turn comes (one stop per round, not one per cluster).
    verdicts = await asyncio.gather(*(_submit(pool, "ClusterProfile//hostile", f"m{i}") for i in (1, 2, 3)))
    assert verdicts == [CPU] + [Verdict(False, f"{CPU.message} (not run again for 30s)")] * 2
    assert pool.started == ["m1"]
    assert (await _submit(pool, "ClusterProfile//hostile", "m4")).message.endswith("(not run again for 30s)")
    # Another owner's same code, and the owner's other code, are not its doing.
    await _submit(pool, "ClusterProfile//other", "m2")
    await _submit(pool, "ClusterProfile//hostile", "m2", OTHER)
    assert pool.started == ["m1", "m2", "m2"]
    assert pool.held == 3


async def test_a_wall_time_stop_holds_only_its_own_job() -> None:
    def reply(cluster: str) -> tuple[Verdict, Stop]:
        return (WALL, "wall") if cluster == "slow" else (Verdict(True, "ok"), "")

    pool = GatedPool(Budget(), reply, open_gates=True)
    assert await _submit(pool, "A", "slow") == WALL
    # The same code on another member runs: a member that answers slowly is not the script's fault.
    assert (await _submit(pool, "A", "fast")).ok
    assert (await _submit(pool, "A", "slow")).message == f"{WALL.message} (not run again for 30s)"
    assert pool.started == ["slow", "fast"]
