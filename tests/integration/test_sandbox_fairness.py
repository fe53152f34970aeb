"""One owner's hostile checks and a silent member do not delay another owner's check (issue 40,
finding 4; ADR 0097), on the real local fleet with the sandbox pool's default budget.

Queued first: eight checks of one owner whose user code spins in C (Lua's pattern matcher, celpy's
string builtins), each of them different so that no cool-down spares a run, and one check of a
second owner against a member whose API server accepts connections and never answers. A third
owner's ordinary check on a healthy member is then judged within 5 s, while the hostile queue is
still being worked through. Before, the pool served one user-code job at a time, first come first
served, each stopped at 20 s only: the same check waited 161 s.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from fleetwave.api.sveltos import ValidateHealth
from fleetwave.local import fleet
from fleetwave.sandbox.pool import Budget, CheckPool, Verdict

BOUND = 5.0  # the bound on the benign check, queueing included
SILENT = "the member's API server did not answer within 5s"
NAMESPACE = [("v1", "Namespace", None, "default")]
HEALTHY = "function evaluate() return {healthy = true} end"
LIST = "[" + ",".join(str(i) for i in range(60)) + "]"


def _lua(body: str) -> dict[str, object]:
    return {"script": f"function evaluate()\n{body}\nreturn {{healthy = true}}\nend"}


def _doubling(times: int) -> dict[str, object]:
    rule = "['abcd']" + ".map(s, s + s)" * times + f".all(s, {LIST}.all(a, {LIST}.all(b, s + s != s)))"
    return {"evaluateCEL": [{"name": "doubling", "rule": rule}]}


HOSTILE = [
    _lua('string.find(string.rep("a", 40), string.rep("a?", 40) .. string.rep("a", 40))'),
    _lua('string.find(string.rep("a", 42), string.rep("a?", 42) .. string.rep("a", 42))'),
    _lua('string.find(string.rep("(", 1e6), "%b()")'),
    _lua('string.find(string.rep("(", 2e6), "%b()")'),
    _lua('local s = string.rep("a", 30000) for i = 1, 1e6 do string.find(s, ".-b") end'),
    _lua('local s = string.rep("b", 30000) for i = 1, 1e6 do string.find(s, ".-a") end'),
    _doubling(22),
    _doubling(21),
]


def _check(name: str, fields: dict[str, object]) -> ValidateHealth:
    return ValidateHealth.model_validate(
        {
            "name": name,
            "featureID": "Resources",
            "group": "",
            "version": "v1",
            "kind": "Namespace",
            "resourceName": "default",
            **fields,
        }
    )


@dataclass(frozen=True)
class Members:
    hostile: bytes  # a healthy member the hostile owner's checks run on
    silent: bytes  # a member whose API server accepts connections and never answers
    healthy: bytes  # another healthy member, for the third owner's check


@contextmanager
def _members(local_fleet: fleet.FleetState) -> Iterator[Members]:
    first, second = local_fleet.members[0], local_fleet.members[1]
    text = Path(first.kubeconfig).read_text(encoding="utf-8")
    assert first.server in text
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)
        silent = text.replace(first.server, f"https://127.0.0.1:{listener.getsockname()[1]}")
        yield Members(text.encode(), silent.encode(), Path(second.kubeconfig).read_bytes())


def _queue_first(
    pool: CheckPool, members: Members
) -> tuple[list[asyncio.Task[Verdict]], asyncio.Task[Verdict]]:
    hostile = [
        asyncio.create_task(
            pool.check(members.hostile, [_check(f"hostile-{i}", f)], [], owner="ClusterProfile//hostile")
        )
        for i, f in enumerate(HOSTILE)
    ]
    silent = _check("silent", {"script": HEALTHY})
    unanswered = asyncio.create_task(
        pool.check(members.silent, [silent], NAMESPACE, owner="ClusterProfile//slow")
    )
    return hostile, unanswered


async def test_hostile_checks_and_a_silent_member_do_not_delay_another_owners_check(
    local_fleet: fleet.FleetState,
) -> None:
    pool = CheckPool(Budget())  # the defaults: 4 workers, one per owner, 2 s of CPU, 5 s per read
    await pool.start()
    try:
        with _members(local_fleet) as members:
            hostile, unanswered = _queue_first(pool, members)
            while pool.idle > pool.budget.workers - 2:  # noqa: ASYNC110 (both owners' first jobs under way)
                await asyncio.sleep(0.05)
            await asyncio.sleep(0.5)
            benign = _check("benign", {"script": HEALTHY})
            began = time.monotonic()
            verdict = await pool.check(members.healthy, [benign], NAMESPACE, owner="ClusterProfile//benign")
            took = time.monotonic() - began
            hostile_left = sum(not h.done() for h in hostile)
            slow = await unanswered
        stopped = await asyncio.gather(*hostile)
    finally:
        await pool.close()

    assert verdict == Verdict(True, "ready; health checks passing: benign")
    assert took < BOUND, took
    assert hostile_left >= 6  # the hostile owner's queue was still there: it had not drained first
    assert slow == Verdict(False, f"cluster unreachable: NoAnswer: {SILENT}")
    # Every hostile check ran and was stopped by the CPU limit (each is other code: no cool-down).
    assert [v.message for v in stopped] == ["health checks exceeded the CPU time limit of 2s; stopped"] * 8
