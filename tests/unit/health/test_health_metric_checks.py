"""Metric checks in the evaluator, with the queries answered in memory (ADR 0079): the values reach
Lua's `metrics` table and CEL's `metrics` map, metrics-only checks run with no object, credentials
come from a Secret the reader serves, and no message ever shows a Secret's value. The real
Prometheus exchange is tests/integration/test_metric_checks.py."""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any

import pytest
from health_objects import check, deployment

from fleetwave.health import metrics
from fleetwave.health.checks import evaluate
from fleetwave.health.model import Limits
from fleetwave.health.reader import DictResourceReader
from fleetwave.promapi import guards
from fleetwave.promapi.results import QueryFailed

SOURCE = {"url": "http://prometheus.monitoring:9090"}
TOKEN = "s3cr3t-t0ken-value"


class Answers:
    """Answers queries from a table and records what was asked, with which Authorization."""

    def __init__(self, values: dict[str, float], fail: str = "") -> None:
        self.values, self.fail = values, fail
        self.asked: list[tuple[str, str | None, list[tuple[str, str]]]] = []

    def __call__(
        self, target: guards.Endpoint, auth: str | None, queries: Sequence[tuple[str, str]], limits: Limits
    ) -> dict[str, float]:
        self.asked.append((target.display, auth, list(queries)))
        if self.fail:
            raise QueryFailed(self.fail)
        return {name: self.values[text] for name, text in queries}


def metric_check(**fields: Any) -> Any:
    return check(metricSource=SOURCE, **fields)


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def secret(data: dict[str, str], name: str = "prom-auth", namespace: str = "monitoring") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace},
        "data": {k: b64(v) for k, v in data.items()},
    }


ERRORS_LUA = """
function evaluate()
  if metrics["error-rate"] < 0.05 then
    return {healthy = true, message = "error rate " .. metrics["error-rate"] .. " on " .. obj.metadata.name}
  end
  return {healthy = false, message = "error rate " .. metrics["error-rate"] .. " too high"}
end
"""


def test_lua_sees_the_query_values_by_name_next_to_each_resource() -> None:
    answers = Answers({"rate(errors[5m])": 0.01})
    reader = DictResourceReader([deployment("api")])
    queries = [{"name": "error-rate", "query": "rate(errors[5m])"}]
    good = evaluate(metric_check(metricQueries=queries, script=ERRORS_LUA), reader, run_queries=answers)
    assert good.ok, good.message
    assert good.resources[0].message == "error rate 0.01 on api"
    assert answers.asked == [
        ("http://prometheus.monitoring:9090/api/v1/query", None, [("error-rate", "rate(errors[5m])")])
    ]
    bad = evaluate(
        metric_check(metricQueries=queries, script=ERRORS_LUA),
        reader,
        run_queries=Answers({"rate(errors[5m])": 0.2}),
    )
    assert not bad.ok
    assert bad.message == "health check 'probe': Deployment apps/api is Degraded: error rate 0.2 too high"


def test_the_metrics_table_exists_and_is_empty_without_queries() -> None:
    script = """
    function evaluate()
      local n = 0
      for _ in pairs(metrics) do n = n + 1 end
      return {healthy = type(metrics) == "table" and n == 0, message = "entries: " .. n}
    end
    """
    result = evaluate(check(script=script), DictResourceReader([deployment("api")]))
    assert result.ok, result.message


def test_whole_values_read_as_integers_in_lua_messages() -> None:
    script = 'function evaluate() return {healthy = true, message = "n=" .. metrics.n} end'
    result = evaluate(
        metric_check(metricQueries=[{"name": "n", "query": "count(up)"}], script=script),
        DictResourceReader([deployment("api")]),
        run_queries=Answers({"count(up)": 3.0}),
    )
    assert result.resources[0].message == "n=3"


def test_a_script_cannot_change_the_metrics_the_next_resource_sees() -> None:
    script = """
    function evaluate()
      local seen = metrics.v
      metrics.v = 99
      return {healthy = seen == 1, message = "saw " .. seen}
    end
    """
    result = evaluate(
        metric_check(metricQueries=[{"name": "v", "query": "v"}], script=script),
        DictResourceReader([deployment("a"), deployment("b")]),
        run_queries=Answers({"v": 1.0}),
    )
    assert result.ok, result.message
    assert [v.message for v in result.resources] == ["saw 1", "saw 1"]


def test_cel_rules_read_the_metrics_map_as_doubles() -> None:
    rules = [{"name": "low-latency", "rule": "metrics.p99 < 0.5 && resource.spec.replicas == 3"}]
    queries = [{"name": "p99", "query": "histogram_quantile(0.99, x)"}]
    reader = DictResourceReader([deployment("api")])
    fast = evaluate(
        metric_check(metricQueries=queries, evaluateCEL=rules),
        reader,
        run_queries=Answers({"histogram_quantile(0.99, x)": 0.2}),
    )
    assert fast.ok, fast.message
    slow = evaluate(
        metric_check(metricQueries=queries, evaluateCEL=rules),
        reader,
        run_queries=Answers({"histogram_quantile(0.99, x)": 0.9}),
    )
    assert not slow.ok
    assert "no CEL rule holds ('low-latency' is false)" in slow.message


def test_a_metrics_only_check_runs_once_with_no_object() -> None:
    script = """
    function evaluate()
      if obj ~= nil then return {healthy = false, message = "obj is set"} end
      if metrics.ready >= 1 then return {healthy = true} end
      return {healthy = false, message = "ready is " .. metrics.ready}
    end
    """
    queries = [{"name": "ready", "query": "sum(ready)"}]
    only = {"kind": None, "group": None, "version": None, "metricQueries": queries, "script": script}
    empty = DictResourceReader([])
    passed = evaluate(metric_check(**only), empty, run_queries=Answers({"sum(ready)": 2.0}))
    assert passed.ok, passed.message
    assert passed.message == "health check 'probe': metrics healthy (ready=2)"
    failed = evaluate(metric_check(**only), empty, run_queries=Answers({"sum(ready)": 0.0}))
    assert failed.message == "health check 'probe': metric health check failed: ready is 0"


def test_a_metrics_only_cel_rule_sees_a_null_resource() -> None:
    rules = [{"name": "r", "rule": "resource == null && self == null && metrics.up == 1.0"}]
    only = {"kind": None, "metricQueries": [{"name": "up", "query": "up"}], "evaluateCEL": rules}
    empty = DictResourceReader([])
    assert evaluate(metric_check(**only), empty, run_queries=Answers({"up": 1.0})).ok
    failed = evaluate(metric_check(**only), empty, run_queries=Answers({"up": 0.0}))
    assert failed.message == (
        "health check 'probe': metric health check failed: no CEL rule holds ('r' is false)"
    )


def test_a_failing_query_fails_the_check_before_any_script_runs() -> None:
    answers = Answers({}, fail="metric query 'up' failed: the value is NaN")
    script = "function evaluate() return {healthy = true} end"
    result = evaluate(
        metric_check(metricQueries=[{"name": "up", "query": "up"}], script=script),
        DictResourceReader([deployment("api")]),
        run_queries=answers,
    )
    assert not result.ok
    assert result.message == "health check 'probe': metric query 'up' failed: the value is NaN"
    assert result.resources == ()


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"metricSource": None}, "metricQueries are set but metricSource is not"),
        ({"metricSource": {"url": "ftp://prom"}}, "metricSource.url must start with http:// or https://"),
        ({"metricSource": {"url": "http://a:b@prom"}}, "metricSource.url must not carry credentials"),
        ({"metricQueries": [{"name": "a", "query": "up"}] * 2}, "metric query name 'a' is used twice"),
        ({"metricQueries": [{"name": "a", "query": " "}]}, "metric query 'a' is empty"),
        ({"metricQueries": [{"name": "a", "query": "u" * 5000}]}, "metric query 'a' is longer than 4096"),
        (
            {"metricQueries": [{"name": f"q{i}", "query": "up"} for i in range(17)]},
            "17 metricQueries; a check may have at most 16",
        ),
    ],
)
def test_unusable_metric_settings_fail_the_check_without_querying(
    fields: dict[str, Any], reason: str
) -> None:
    answers = Answers({"up": 1.0})
    base = {"metricQueries": [{"name": "up", "query": "up"}], **fields}
    result = evaluate(check(**{"metricSource": SOURCE, **base}), DictResourceReader([]), run_queries=answers)
    assert not result.ok
    assert result.message.startswith(f"health check 'probe': {reason}")
    assert answers.asked == []


# --- credentials ----------------------------------------------------------------------------------


def test_a_token_key_gives_bearer_auth_and_username_password_give_basic() -> None:
    header, hidden = metrics.authorization_header({"token": b64(TOKEN + "\n")}, "Secret m/s")
    assert header == f"Bearer {TOKEN}"  # the newline `kubectl create secret --from-file` keeps is dropped
    assert TOKEN in hidden
    both = {"token": b64(TOKEN), "username": b64("u"), "password": b64("p")}
    assert metrics.authorization_header(both, "Secret m/s")[0] == f"Bearer {TOKEN}"
    header, hidden = metrics.authorization_header(
        {"username": b64("grafana"), "password": b64("pa:ss wörd")}, "Secret m/s"
    )
    assert header == "Basic " + base64.b64encode("grafana:pa:ss wörd".encode()).decode()
    assert {"grafana", "pa:ss wörd"} <= set(hidden)


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        ({}, "Secret m/s has neither a 'token' key nor both 'username' and 'password'"),
        ({"username": b64("u")}, "Secret m/s has neither"),
        ({"token": "%%%"}, "key 'token' of Secret m/s is not base64-encoded UTF-8 text"),
        ({"token": b64("abc\r\nX-Injected: 1")}, "the token in Secret m/s has characters"),
        (
            {"username": b64("a:b"), "password": b64("p")},
            "the username or password in Secret m/s cannot be used for Basic authentication",
        ),
    ],
)
def test_unusable_credentials_are_refused_without_showing_them(data: dict[str, str], reason: str) -> None:
    with pytest.raises(metrics.MetricsRefused) as refused:
        metrics.authorization_header(data, "Secret m/s")
    assert str(refused.value).startswith(reason)
    for value in data.values():
        assert value not in str(refused.value)


def test_the_secret_is_read_through_the_reader_and_its_header_sent() -> None:
    answers = Answers({"up": 1.0})
    ref = {**SOURCE, "secretRef": {"name": "prom-auth", "namespace": "monitoring"}}
    reader = DictResourceReader([secret({"token": TOKEN}), deployment("api")])
    result = evaluate(
        check(metricSource=ref, metricQueries=[{"name": "up", "query": "up"}]), reader, run_queries=answers
    )
    assert result.ok, result.message
    assert answers.asked[0][1] == f"Bearer {TOKEN}"


@pytest.mark.parametrize(
    ("ref", "objects", "reason"),
    [
        (
            {"name": "prom-auth"},
            [],
            "metricSource.secretRef needs a namespace (the Secret is read from the member cluster)",
        ),
        (
            {"name": "absent", "namespace": "monitoring"},
            [],
            "Secret monitoring/absent (metricSource.secretRef) does not exist in the cluster",
        ),
    ],
)
def test_a_missing_secret_fails_the_check(ref: dict[str, str], objects: list[Any], reason: str) -> None:
    answers = Answers({"up": 1.0})
    result = evaluate(
        check(metricSource={**SOURCE, "secretRef": ref}, metricQueries=[{"name": "up", "query": "up"}]),
        DictResourceReader(objects),
        run_queries=answers,
    )
    assert result.message == f"health check 'probe': {reason}"
    assert answers.asked == []


def test_a_server_or_error_that_echoes_the_credentials_is_redacted() -> None:
    basic = base64.b64encode(b"grafana:hunter22").decode()
    echoed = f"Prometheus answered bad_data: got Authorization Basic {basic} for user grafana/hunter22"
    ref = {**SOURCE, "secretRef": {"name": "prom-auth", "namespace": "monitoring"}}
    reader = DictResourceReader([secret({"username": "grafana", "password": "hunter22"})])
    result = evaluate(
        check(metricSource=ref, metricQueries=[{"name": "up", "query": "up"}]),
        reader,
        run_queries=Answers({}, fail=echoed),
    )
    assert not result.ok
    for hidden in (basic, "grafana", "hunter22"):
        assert hidden not in result.message
    assert "[redacted]" in result.message


def test_redaction_replaces_the_longest_secret_first() -> None:
    assert metrics.redact("Bearer abc and abc", ["abc", "Bearer abc"]) == "[redacted] and [redacted]"
    assert metrics.redact("nothing here", ["", "x" * 3]) == "nothing here"
