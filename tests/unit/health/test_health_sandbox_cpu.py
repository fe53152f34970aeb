"""Real sandbox workers (no fleet: a tiny plain-HTTP API server stands in for a member): C-level work
that no interpreter hook reaches is stopped by the worker's CPU-time limit, named in the message,
and the pool goes on with a fresh worker; a member that never answers costs one short request
timeout, not the worker (ADR 0097)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import pytest
from sandbox_support import api_server, namespace_check, silent_server

from fleetwave.health import cluster_check
from fleetwave.sandbox.pool import Budget, CheckPool, Verdict

NAMESPACE = [("v1", "Namespace", None, "default")]
HEALTHY = "function evaluate() return {healthy = true} end"
CPU_STOP = Verdict(False, "health checks exceeded the CPU time limit of 2s; stopped")
# Each runs for minutes in Lua's C matcher, where the instruction hook never fires.
C_LEVEL_LUA = {
    "backtracking a? x40": 'string.find(string.rep("a", 40), string.rep("a?", 40) .. string.rep("a", 40))',
    "%b() over 1 MB": 'string.find(string.rep("(", 1e6), "%b()")',
    # (30001)^2 steps per find stays under the pattern-cost guard; the loop never reaches the hook's
    # clock check (16,000 instructions) in useful time.
    ".- loop over 30 KB": 'local s = string.rep("a", 30000) for i = 1, 1e6 do string.find(s, ".-b") end',
}
LIST = "[" + ",".join(str(i) for i in range(60)) + "]"
# 22 doublings make a 16 MiB string, then 3,600 comparisons of two copies of it: cheap in syntax-tree
# steps (well under the CEL cost limit), minutes of memcpy.
DOUBLING_CEL = "['abcd']" + ".map(s, s + s)" * 22 + f".all(s, {LIST}.all(a, {LIST}.all(b, s + s != s)))"
# Generous: the limit is 2-3 s of the worker's CPU; on a loaded 2-core machine wall time runs longer.
BOUND = 15.0


@pytest.fixture
async def pool() -> AsyncIterator[CheckPool]:
    started = CheckPool(Budget(workers=2, cpu_seconds=2, wall_seconds=120.0, request_seconds=1.0))
    await started.start()
    try:
        yield started
    finally:
        await started.close()


@pytest.mark.parametrize("body", C_LEVEL_LUA.values(), ids=C_LEVEL_LUA.keys())
async def test_c_level_lua_is_stopped_by_the_cpu_limit(pool: CheckPool, body: str) -> None:
    script = f"function evaluate()\n{body}\nreturn {{healthy = true}}\nend"
    with api_server() as member:
        began = time.monotonic()
        verdict = await pool.check(member, [namespace_check(script=script)], [], allow_insecure=True)
        took = time.monotonic() - began
        assert verdict == CPU_STOP
        assert took < BOUND
        assert pool.killed == 1
        after = await pool.check(member, [namespace_check(script=HEALTHY)], NAMESPACE, allow_insecure=True)
    assert after == Verdict(True, "ready; health checks passing: probe")


async def test_a_doubling_cel_rule_is_stopped_by_the_cpu_limit(pool: CheckPool) -> None:
    began = time.monotonic()
    verdict = await pool.webhook_condition(DOUBLING_CEL, 200, {}, owner="ClusterPromotion//p")
    assert verdict == CPU_STOP
    assert time.monotonic() - began < BOUND
    again = await pool.webhook_condition(DOUBLING_CEL, 200, {"other": "answer"}, owner="ClusterPromotion//p")
    assert again.message == f"{CPU_STOP.message} (not run again for 30s)"
    assert (await pool.webhook_condition("status == 200", 200, {}, owner="ClusterPromotion//p")).ok


async def test_a_silent_member_fails_by_the_request_timeout_and_keeps_its_worker(pool: CheckPool) -> None:
    with silent_server() as member:
        began = time.monotonic()
        checks = [namespace_check(script=HEALTHY)]
        readiness = await pool.check(member, checks, NAMESPACE, allow_insecure=True)
        took = time.monotonic() - began
    assert readiness == Verdict(
        False, "cluster unreachable: NoAnswer: the member's API server did not answer within 1s"
    )
    assert took < BOUND  # the wall limit here is 120 s
    assert pool.killed == 0


class _Stuck:
    """A reader whose first read blocks like a socket read of a member that never answers."""

    def __init__(self) -> None:
        self.calls = 0

    def list(self, *args: object, **kwargs: object) -> list[object]:
        raise AssertionError("not used")

    def get(self, api_version: str, kind: str, *, namespace: str | None, name: str) -> None:
        self.calls += 1
        time.sleep(30)


def test_after_one_unanswered_read_the_member_is_not_asked_again() -> None:
    stuck = _Stuck()
    reader = cluster_check.BoundedReader(stuck, 0.2)  # type: ignore[arg-type]
    began = time.monotonic()
    for _ in range(5):
        with pytest.raises(cluster_check.NoAnswer, match=r"did not answer within 0\.2s"):
            reader.get("v1", "ConfigMap", namespace="default", name="x")
    assert time.monotonic() - began < 5.0
    assert stuck.calls == 1
