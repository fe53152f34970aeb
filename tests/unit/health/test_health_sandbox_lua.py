"""The Lua sandbox's own boundaries (ADR 0097): what getResource brings in counts against the script's
memory cap instead of raising it, and the strings' metatable does not lead to string.dump."""

from __future__ import annotations

from typing import Any

from health_objects import check, deployment

from fleetwave.health.checks import evaluate
from fleetwave.health.lua import LuaSandbox
from fleetwave.health.model import Limits, State
from fleetwave.health.reader import DictResourceReader

MIB = 1024 * 1024
# ~120 KB of JSON that becomes ~2.5 MiB of Lua tables (a `{}` is 2 bytes of JSON, ~80 of Lua).
EMPTIES = {
    "apiVersion": "v1",
    "kind": "ConfigMap",
    "metadata": {"name": "empties", "namespace": "apps"},
    "items": [{} for _ in range(30_000)],
}
KEEP_READING = """
function evaluate()
  local kept = {}
  for i = 1, 40 do kept[i] = getResource("v1", "ConfigMap", "apps", "empties") end
  return {healthy = true}
end
"""


def _run(script: str, limits: Limits) -> Any:
    reader = DictResourceReader([deployment("web"), EMPTIES])
    return evaluate(check(script=script), reader, limits=limits)


def test_getresource_results_count_against_the_memory_cap() -> None:
    # 40 reads are ~5 MB of JSON, within the getResource data budget (16 MB), but ~100 MiB as Lua:
    # when each result raised the cap, this passed with the script holding ~12x its limit.
    result = _run(KEEP_READING, Limits(lua_memory_bytes=8 * MIB))
    assert not result.ok
    assert "getResource(v1, ConfigMap, apps, empties): memory limit exceeded" in result.message


def test_getresource_results_that_fit_are_read() -> None:
    assert _run(KEEP_READING, Limits(lua_memory_bytes=256 * MIB)).ok


def test_a_refused_result_leaves_the_script_its_memory() -> None:
    """The dropped conversion is garbage, not the script's: what it allocates next still fits."""
    script = """
function evaluate()
  local kept = {}
  local ok = pcall(function()
    for i = 1, 40 do kept[i] = getResource("v1", "ConfigMap", "apps", "empties") end
  end)
  kept = nil
  local t = {}
  for i = 1, 100000 do t[i] = i end
  return {healthy = not ok}
end
"""
    assert _run(script, Limits(lua_memory_bytes=8 * MIB)).ok


def test_the_string_metatable_does_not_reach_string_dump() -> None:
    sandbox = LuaSandbox(Limits())
    probe = 'return {healthy = ("").dump == nil and ("x"):rep(2) == "xx", message = type(("").dump)}'
    state, message = sandbox.evaluate(f"function evaluate() {probe} end", {}, lambda *args: None)
    assert (state, message) == (State.HEALTHY, "nil")


def test_dumping_through_a_string_fails_the_check() -> None:
    result = _run('function evaluate() return {healthy = ("").dump(evaluate) ~= nil} end', Limits())
    assert not result.ok
    assert "attempt to call a nil value (field 'dump')" in result.message
