"""The shell side of analysis gates (ADR 0081): one measurement per interval per series, none once
the series passed or failed for good, the cluster's name in a per-cluster query; and the measurement
itself (query, then CEL over `result`), where an unanswerable query is a failed measurement."""

from __future__ import annotations

import asyncio
import http.server
import json
import socket
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from fleetwave.api.analyses import AnalysisGate
from fleetwave.controllers.gates import analysis_gates as ag
from fleetwave.controllers.gates import webhook_gates as wg
from fleetwave.health import analysis
from fleetwave.health.model import Limits
from fleetwave.promapi import client, guards
from fleetwave.runtime.analysis import Series

T0 = datetime(2026, 11, 25, 10, 0, tzinfo=UTC)
OWNER = wg.Owner("ClusterPromotion", "p", None, "h1")


@dataclass
class _Health:
    answers: list[tuple[bool, str]]
    queries: list[str] = field(default_factory=list)

    async def analysis_measurement(
        self, url: str, path: str, query: str, rule: str, *, owner: str
    ) -> tuple[bool, str]:
        assert (url, path, rule) == ("http://127.0.0.1:9", "api/v1/query", "result < 1.0")
        assert owner == "ClusterPromotion//p"  # its share of the sandbox is the promotion's (ADR 0097)
        self.queries.append(query)
        return self.answers.pop(0)


@dataclass
class _Ctx:
    health: _Health
    analyses: Series = field(default_factory=Series)


def _gate(**kw: Any) -> AnalysisGate:
    return AnalysisGate.model_validate(
        {
            "name": "errors",
            "prometheus": {"url": "http://127.0.0.1:9"},
            "query": "sum(errors)",
            "successCondition": "result < 1.0",
            "interval": "10s",
            "count": 3,
            "failureLimit": 1,
            **kw,
        }
    )


def _measure(ctx: _Ctx, gate: AnalysisGate, at: datetime, clusters: tuple[str, ...] = ("m1",)) -> Any:
    facts = asyncio.run(ag.measurements(ctx, OWNER, "dev", clusters, [gate], at))  # type: ignore[arg-type]
    return facts[("dev", gate.name)]


def test_one_measurement_per_interval_until_count_then_none() -> None:
    health = _Health([(True, "ok"), (False, "result 2: successCondition is false"), (True, "ok")])
    ctx = _Ctx(health)
    gate = _gate()
    first = _measure(ctx, gate, T0)[""]
    assert (first.taken, first.failed, first.next_at) == (1, 0, T0 + timedelta(seconds=10))
    again = _measure(ctx, gate, T0 + timedelta(seconds=9))[""]
    assert again == first  # not due yet: no query
    assert len(health.queries) == 1
    second = _measure(ctx, gate, T0 + timedelta(seconds=10))[""]
    assert (second.taken, second.failed, second.last_failure) == (2, 1, "result 2: successCondition is false")
    third = _measure(ctx, gate, T0 + timedelta(seconds=20))[""]
    assert (third.taken, third.failed, third.next_at) == (3, 1, None)  # passed: nothing more due
    _measure(ctx, gate, T0 + timedelta(minutes=5))
    assert health.queries == ["sum(errors)"] * 3


def test_a_series_past_its_failure_limit_takes_no_more_measurements() -> None:
    health = _Health([(False, "query failed: a"), (False, "query failed: b")])
    ctx = _Ctx(health)
    gate = _gate()
    _measure(ctx, gate, T0)
    failed = _measure(ctx, gate, T0 + timedelta(seconds=10))[""]
    assert (failed.taken, failed.failed, failed.last_failure, failed.next_at) == (
        2,
        2,
        "query failed: b",
        None,
    )
    _measure(ctx, gate, T0 + timedelta(seconds=20))
    assert len(health.queries) == 2


def test_a_per_cluster_analysis_measures_each_cluster_with_its_name_in_the_query() -> None:
    health = _Health([(True, "ok"), (False, "result 4: successCondition is false")])
    ctx = _Ctx(health)
    gate = _gate(query='errors{cluster="${MEMBER-CLUSTER-NAME}"}', perCluster=True)
    series = _measure(ctx, gate, T0, ("m1", "m2"))
    assert sorted(health.queries) == ['errors{cluster="m1"}', 'errors{cluster="m2"}']
    assert sorted(series) == ["m1", "m2"]
    assert sorted(s.failed for s in series.values()) == [0, 1]


def test_the_api_refuses_a_cluster_placeholder_without_per_cluster_and_a_limit_not_below_count() -> None:
    with pytest.raises(ValueError, match="only a perCluster analysis"):
        _gate(query="x{c='${MEMBER-CLUSTER-NAME}'}")
    with pytest.raises(ValueError, match="failureLimit must be less than count"):
        _gate(count=2, failureLimit=2)
    with pytest.raises(ValueError, match="interval must be at least 1s"):
        _gate(interval="500ms")


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_an_unreachable_or_refused_source_is_a_failed_measurement(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(guards.ALLOW_LOOPBACK_ENV, "1")  # the closed port is on 127.0.0.1
    ok, why = analysis.measure(f"http://127.0.0.1:{_closed_port()}", "api/v1/query", "up", "true", Limits())
    assert not ok
    assert why.startswith("query failed: cannot connect to http://127.0.0.1:")
    ok, why = analysis.measure("http://169.254.169.254", "api/v1/query", "up", "true", Limits())
    assert not ok
    assert why.startswith("query failed: ")
    assert "169.254.169.254" in why


def test_the_condition_is_cel_over_result(monkeypatch: pytest.MonkeyPatch) -> None:
    values = iter([0.5, 2.0, 0.5, 0.5])
    monkeypatch.setattr(client.Session, "query", lambda _self, _text: next(values))
    monkeypatch.setenv(guards.ALLOW_LOOPBACK_ENV, "1")
    url = "http://127.0.0.1:9"
    assert analysis.measure(url, "api/v1/query", "q", "result < 1.0", Limits()) == (
        True,
        "result 0.5: successCondition holds",
    )
    assert analysis.measure(url, "api/v1/query", "q", "result < 1.0", Limits()) == (
        False,
        "result 2: successCondition is false",
    )
    ok, why = analysis.measure(url, "api/v1/query", "q", "result", Limits())
    assert (ok, why) == (False, "result 0.5: successCondition returned double, not bool")
    ok, why = analysis.measure(url, "api/v1/query", "q", "result <", Limits())
    assert not ok
    assert why.startswith("result 0.5: successCondition ")


@dataclass
class _PathsSeen:
    paths: list[str] = field(default_factory=list)

    async def analysis_measurement(
        self, url: str, path: str, query: str, rule: str, *, owner: str
    ) -> tuple[bool, str]:
        self.paths.append(path)
        return analysis.measure(url, path, query, rule, Limits())


def test_prometheus_path_is_where_the_query_is_sent(monkeypatch: pytest.MonkeyPatch) -> None:
    """`prometheus.path`: a Prometheus behind a prefix answers only there; the default path fails."""
    answer = json.dumps({"status": "success", "data": {"resultType": "scalar", "result": [0, "0.5"]}})

    class Prefixed(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            found = self.path.startswith("/prom/api/v1/query?")
            body = answer.encode() if found else b"not here"
            self.send_response(200 if found else 404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Prefixed)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv(guards.ALLOW_LOOPBACK_ENV, "1")
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        seen = _PathsSeen()
        prefixed = _gate(prometheus={"url": url, "path": "prom/api/v1/query"}, count=2)
        passed = _measure(_Ctx(seen), prefixed, T0)[""]  # type: ignore[arg-type]
        assert (passed.taken, passed.failed) == (1, 0)
        default = _gate(prometheus={"url": url}, count=2)
        failed = _measure(_Ctx(seen), default, T0)[""]  # type: ignore[arg-type]
        assert (failed.taken, failed.failed) == (1, 1)
        assert failed.last_failure.startswith("query failed: ")
        assert seen.paths == ["prom/api/v1/query", "api/v1/query"]
    finally:
        server.shutdown()
        server.server_close()
