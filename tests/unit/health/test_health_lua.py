"""Lua health checks through checks.evaluate with an in-memory cluster: results, getResource, sandbox."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from health_objects import AVAILABLE_SCRIPT, ISSUER_SCRIPT, check, deployment, secret

from fleetwave.health.checks import evaluate
from fleetwave.health.model import Limits, State
from fleetwave.health.reader import DictResourceReader

SMALL = Limits(lua_instructions=1_000_000, lua_memory_bytes=8 * 1024 * 1024, lua_seconds=5.0)


def _run(script: str, *objects: dict[str, Any], limits: Limits = SMALL, **fields: Any) -> Any:
    objs = objects or (deployment("web"),)
    return evaluate(check(script=script, **fields), DictResourceReader(objs), limits=limits)


def _returns(body: str) -> str:
    return f"function evaluate()\n{body}\nend"


def test_api_form_healthy_when_all_replicas_are_available() -> None:
    result = _run(AVAILABLE_SCRIPT, deployment("a"), deployment("b"))
    assert result.ok
    assert [v.state for v in result.resources] == [State.HEALTHY, State.HEALTHY]
    assert result.message == "health check 'probe': 2 Deployment resources healthy"


def test_api_form_unhealthy_names_check_resource_and_script_message() -> None:
    result = _run(AVAILABLE_SCRIPT, deployment("a"), deployment("b", available=2))
    assert not result.ok
    assert result.message == (
        "health check 'probe': Deployment apps/b is Degraded: "
        "available replicas not matching requested replicas"
    )
    assert [v.ok for v in result.resources] == [True, False]


def test_object_without_status_is_unhealthy_not_an_error() -> None:
    result = _run(AVAILABLE_SCRIPT, deployment("a", available=None))
    assert not result.ok
    assert result.resources[0].state is State.DEGRADED


@pytest.mark.parametrize(
    ("status", "state"),
    [
        ("Healthy", State.HEALTHY),
        ("Progressing", State.PROGRESSING),
        ("Degraded", State.DEGRADED),
        ("Suspended", State.SUSPENDED),
    ],
)
def test_docs_form_status_maps_to_state(status: str, state: State) -> None:
    result = _run(_returns(f'return {{status = "{status}", message = "m"}}'))
    assert result.ok is (state is State.HEALTHY)
    assert result.resources[0].state is state
    if not result.ok:
        assert result.message == f"health check 'probe': Deployment apps/web is {status}: m"


def test_healthy_field_wins_over_status_and_absent_both_is_unhealthy() -> None:
    assert not _run(_returns('return {healthy = false, status = "Healthy"}')).ok
    result = _run(_returns("return {message = 'nothing decided'}"))
    assert not result.ok
    assert result.resources[0].state is State.DEGRADED


@pytest.mark.parametrize(
    ("script", "reason"),
    [
        (_returns('return {status = "Great"}'), "result field 'status' must be one of"),
        (_returns('return {healthy = "yes"}'), "result field 'healthy' must be a boolean"),
        (_returns("return 5"), "evaluate() returned a number, not a table"),
        ("x = ", "syntax error: script:1:"),
        ("y = 1", "the script does not define function evaluate()"),
        (_returns("return obj.spec.missing.field"), "attempt to index a nil value"),
        (_returns("error({})"), "error value of type table"),
    ],
)
def test_script_problems_fail_the_check_with_the_reason(script: str, reason: str) -> None:
    result = _run(script)
    assert not result.ok
    assert result.resources[0].state is State.ERROR
    assert result.message.startswith("health check 'probe': cannot judge Deployment apps/web: ")
    assert reason in result.message


def test_evaluate_receives_obj_as_argument_and_global_and_label_helpers() -> None:
    script = """
    function evaluate(o)
      return {healthy = o == obj and getLabel(o, "tier") == "web" and getAnnotation(o, "x") == nil}
    end
    """
    assert _run(script, deployment("a", labels={"tier": "web"})).ok


def test_get_resource_docs_form_reads_another_object_of_the_cluster() -> None:
    issuer = {
        "apiVersion": "cert-manager.io/v1",
        "kind": "ClusterIssuer",
        "metadata": {"name": "letsencrypt"},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }
    fields = {"group": "cert-manager.io", "kind": "ClusterIssuer", "namespace": "cert-manager"}
    with_secret = _run(ISSUER_SCRIPT, issuer, secret("cloudflare-api-token", "cert-manager"), **fields)
    assert with_secret.ok, with_secret.message
    without = _run(ISSUER_SCRIPT, issuer, secret("cloudflare-api-token", "elsewhere"), **fields)
    assert not without.ok
    assert without.message == (
        "health check 'probe': ClusterIssuer letsencrypt is Degraded: "
        "Missing Secret or ClusterIssuer not ready"
    )


def test_get_resource_upstream_form_is_a_table_lookup() -> None:
    assert _run(_returns('return {healthy = getResource({ready = true}, "ready")}')).ok


def test_get_resource_cluster_scoped_with_nil_namespace() -> None:
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "apps"}}
    script = _returns('return {healthy = getResource("v1", "Namespace", nil, "apps") ~= nil}')
    assert _run(script, deployment("web"), ns).ok


def test_get_resource_misuse_and_reader_failure_are_script_errors() -> None:
    result = _run(_returns('return {healthy = getResource("v1", "Secret") ~= nil}'))
    assert "getResource expects (apiVersion, kind, namespace, name) or (table, key)" in result.message

    class Failing(DictResourceReader):
        def get(self, api_version: str, kind: str, *, namespace: str | None, name: str) -> None:
            raise ConnectionError("apiserver unreachable")

    script = _returns('return {healthy = getResource("v1", "Secret", "ns", "s") ~= nil}')
    result = evaluate(check(script=script), Failing([deployment("web")]), limits=SMALL)
    assert not result.ok
    assert "getResource(v1, Secret, ns, s): apiserver unreachable" in result.message


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ('os.execute("touch MARKER")', "attempt to index a nil value (global 'os')"),
        ('io.open("MARKER", "w"):write("x")', "attempt to index a nil value (global 'io')"),
        ('require("os")', "attempt to call a nil value (global 'require')"),
        ('load("return 1")()', "attempt to call a nil value (global 'load')"),
        ('loadstring("return 1")()', "attempt to call a nil value (global 'loadstring')"),
        ('dofile("MARKER")', "attempt to call a nil value (global 'dofile')"),
        ("debug.sethook()", "attempt to index a nil value (global 'debug')"),
        ("package.loaded.os.execute('true')", "attempt to index a nil value (global 'package')"),
        ("collectgarbage('stop')", "attempt to call a nil value (global 'collectgarbage')"),
        ('python.eval("1")', "attempt to index a nil value (global 'python')"),
        ('getmetatable("").__index.x = 1', "attempt to call a nil value (global 'getmetatable')"),
        ("string.dump(print or evaluate)", "attempt to call a nil value (field 'dump')"),
    ],
)
def test_sandbox_escapes_are_rejected(
    body: str, reason: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = _run(_returns(f"{body}\nreturn {{healthy = true}}"))
    assert not result.ok
    assert reason in result.message
    assert not (tmp_path / "MARKER").exists()


def test_host_functions_expose_no_attributes() -> None:
    probe = "pcall(function() return getResource.__class__.__subclasses__ end)"
    assert _run(_returns(f'return {{healthy = type(getResource) == "function" and not {probe}}}')).ok


def test_string_rep_memory_bomb_fails_fast() -> None:
    result = _run(_returns('local s = string.rep("x", 1 << 30)\nreturn {healthy = true}'))
    assert not result.ok
    assert "string.rep result of 1073741824 bytes is too large" in result.message


def test_doubling_memory_bomb_hits_the_memory_limit() -> None:
    result = _run(_returns('local s = "x"\nfor i = 1, 40 do s = s .. s end\nreturn {healthy = true}'))
    assert not result.ok
    assert result.message.endswith("cannot judge Deployment apps/web: memory limit exceeded")


def test_empty_string_rep_does_not_spin() -> None:
    assert _run(_returns('return {healthy = string.rep("", 1e15) == ""}')).ok


@pytest.mark.parametrize(
    "body",
    ["while true do end", "while true do pcall(function() while true do end end) end"],
)
def test_infinite_loop_is_a_timeout_failure(body: str) -> None:
    result = _run(_returns(body))
    assert not result.ok
    assert result.message.endswith("cannot judge Deployment apps/web: instruction limit exceeded")


def test_wall_clock_limit_applies_when_instructions_are_plentiful() -> None:
    limits = Limits(lua_instructions=10**12, lua_seconds=0.2)
    result = _run(_returns("while true do end"), limits=limits)
    assert result.message.endswith("time limit exceeded")


def test_backtracking_pattern_is_refused_before_it_runs() -> None:
    result = _run(_returns('return {healthy = ("a"):rep(300):find(".-.-.-b") == nil}'))
    assert "with 3 repetitions is too costly on a 300-byte string" in result.message
    assert _run(_returns('return {healthy = ("a-b"):find("a-b", 1, true) == 1}')).ok


def test_each_resource_gets_a_fresh_environment() -> None:
    script = """
    n = (n or 0) + 1
    function evaluate()
      local intact = string.upper ~= nil
      string.upper = nil
      return {healthy = n == 1 and intact}
    end
    """
    result = _run(script, deployment("a"), deployment("b"), deployment("c"))
    assert result.ok, result.message


def test_large_objects_are_converted_outside_the_script_budget() -> None:
    big = deployment("big")
    big["metadata"]["annotations"] = {"blob": "x" * (12 * 1024 * 1024)}
    script = _returns("return {healthy = #obj.metadata.annotations.blob > 0}")
    assert _run(script, big).ok


def test_limits_are_per_resource_and_the_runtime_stays_usable() -> None:
    bomb = deployment("a", labels={"bomb": "yes"})
    script = """
    function evaluate()
      if getLabel(obj, "bomb") then local s = "x" for i = 1, 40 do s = s .. s end end
      return {healthy = true}
    end
    """
    result = _run(script, bomb, deployment("b"))
    assert [v.state for v in result.resources] == [State.ERROR, State.HEALTHY]
