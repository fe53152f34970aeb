"""Metric health checks against a real Prometheus (Debian's binaries) scraping a real Pushgateway,
with credentials read from a real member cluster (ADR 0079). A value is pushed, the test waits until
Prometheus has scraped it, then the check is judged: by the evaluator, and once through the running
controller, where a promotion holds on the check until a good value arrives."""

from __future__ import annotations

import base64
import json
import threading
import time
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml
from lightkube import Client, codecs
from lightkube.resources.core_v1 import ConfigMap
from promotion_support import (
    ControllerThread,
    deleted_after,
    registered,
    running_controller,
    stage_phases,
    status,
    wait_for,
)
from typer.testing import CliRunner

from fleetwave.api.sveltos import ValidateHealth
from fleetwave.cli import app
from fleetwave.health.checks import evaluate
from fleetwave.health.reader import DictResourceReader, KubeResourceReader
from fleetwave.local import binaries, fleet, processes
from fleetwave.local import prometheus as local_prometheus
from fleetwave.mgmt import manifests
from fleetwave.promapi import client


def scraped(prometheus: local_prometheus.Prometheus, promql: str) -> list[dict[str, Any]]:
    query = urllib.parse.urlencode({"query": promql})
    with urllib.request.urlopen(f"{prometheus.url}/api/v1/query?{query}", timeout=5) as response:
        result: list[dict[str, Any]] = json.loads(response.read())["data"]["result"]
    return result


def push(prometheus: local_prometheus.Prometheus, job: str, text: str, *, until: tuple[str, float]) -> None:
    """Push `text` for `job`, then wait until Prometheus answers `until[0]` with `until[1]`."""
    local_prometheus.push(prometheus.pushgateway_url, job, text)
    promql, value = until
    wait_for(
        lambda: [s for s in scraped(prometheus, promql) if float(s["value"][1]) == value],
        timeout=30,
        what=f"Prometheus to scrape {promql} = {value}",
    )


def health_check(**fields: Any) -> ValidateHealth:
    return ValidateHealth.model_validate({"name": "error-budget", **fields})


@pytest.fixture
def job() -> str:
    return f"app-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def member(members: dict[str, Client]) -> Client:
    return members["member-1"]


ERROR_RATIO_LUA = """
function evaluate()
  local ratio = metrics["error-ratio"]
  if obj ~= nil and obj.data.mode ~= "live" then
    return {healthy = false, message = "not live"}
  end
  if ratio < 0.05 then
    return {healthy = true, message = "error ratio " .. ratio}
  end
  return {healthy = false, message = "error ratio " .. ratio .. " is over 0.05"}
end
"""


def test_a_lua_check_passes_on_a_good_pushed_value_and_fails_on_a_bad_one(
    prometheus: local_prometheus.Prometheus, member: Client, namespace: str, job: str
) -> None:
    member.apply(
        codecs.from_dict(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "app", "namespace": namespace},
                "data": {"mode": "live"},
            }
        ),
        force=True,
    )
    reader = KubeResourceReader(member)
    ratio = f'fleetwave_error_ratio{{job="{job}"}}'
    common = {
        "metricSource": {"url": prometheus.url},
        "metricQueries": [{"name": "error-ratio", "query": ratio}],
        "script": ERROR_RATIO_LUA,
    }
    on_resource = health_check(
        group="", version="v1", kind="ConfigMap", namespace=namespace, resourceName="app", **common
    )
    metrics_only = health_check(**common)

    push(prometheus, job, "fleetwave_error_ratio 0.01", until=(ratio, 0.01))
    good = evaluate(on_resource, reader)
    assert good.ok, good.message
    assert [(v.name, v.message) for v in good.resources] == [("app", "error ratio 0.01")]
    assert (
        evaluate(metrics_only, reader).message
        == "health check 'error-budget': metrics healthy (error-ratio=0.01)"
    )

    push(prometheus, job, "fleetwave_error_ratio 0.2", until=(ratio, 0.2))
    bad = evaluate(on_resource, reader)
    assert not bad.ok
    assert bad.message == (
        f"health check 'error-budget': ConfigMap {namespace}/app is Degraded: error ratio 0.2 is over 0.05"
    )
    assert evaluate(metrics_only, reader).message == (
        "health check 'error-budget': metric health check failed: error ratio 0.2 is over 0.05"
    )


def test_cel_rules_read_the_metrics_map_and_bad_answers_fail_naming_the_query(
    prometheus: local_prometheus.Prometheus, job: str
) -> None:
    reader = DictResourceReader([])
    push(
        prometheus,
        job,
        'fleetwave_ready_replicas{pod="a"} 2\nfleetwave_ready_replicas{pod="b"} 1',
        until=(f'sum(fleetwave_ready_replicas{{job="{job}"}})', 3.0),
    )
    source = {"url": prometheus.url}

    def judged(query: str, rule: str = "metrics.ready >= 3.0") -> str:
        check = health_check(
            metricSource=source,
            metricQueries=[{"name": "ready", "query": query}],
            evaluateCEL=[{"name": "enough", "rule": rule}],
        )
        return evaluate(check, reader).message

    total = f'sum(fleetwave_ready_replicas{{job="{job}"}})'
    assert judged(total) == "health check 'error-budget': metrics healthy (ready=3)"
    assert judged(total, "metrics.ready > 3.0") == (
        "health check 'error-budget': metric health check failed: no CEL rule holds ('enough' is false)"
    )
    prefix = "health check 'error-budget': metric query 'ready' failed: "
    assert judged(f'fleetwave_ready_replicas{{job="{job}"}}') == (
        prefix + "the result has 2 series; a metric check needs exactly one"
    )
    assert judged(f'fleetwave_ready_replicas{{job="{job}", pod="none"}}') == (
        prefix + "the result has no series; a metric check needs exactly one"
    )
    assert judged("0 / 0") == prefix + "the value is NaN"
    assert judged(f'fleetwave_ready_replicas{{job="{job}"}}[1m]') == (
        prefix + "the result type is matrix; a scalar or a one-sample vector is needed"
    )
    assert judged("sum(").startswith(prefix + "Prometheus answered bad_data: invalid parameter")


def test_an_unreachable_prometheus_fails_the_check_at_once_naming_the_query() -> None:
    port = processes.free_port()  # nothing listens there
    check = health_check(
        metricSource={"url": f"http://127.0.0.1:{port}"},
        metricQueries=[{"name": "up", "query": "up"}],
        script="function evaluate() return {healthy = true} end",
    )
    started = time.monotonic()
    result = evaluate(check, DictResourceReader([]))
    assert not result.ok
    assert result.message.startswith(
        f"health check 'error-budget': metric query 'up' failed: cannot connect to "
        f"http://127.0.0.1:{port}/api/v1/query: "
    )
    assert "Connection refused" in result.message
    assert time.monotonic() - started < 2


def test_an_https_source_is_verified_by_its_name_while_connecting_to_the_checked_address(
    local_fleet: fleet.FleetState, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A member API server stands in for an HTTPS metric source: its certificate names localhost."""
    server = local_fleet.cluster("member-1")
    check = health_check(
        metricSource={"url": f"https://localhost:{server.port}"},
        metricQueries=[{"name": "up", "query": "up"}],
    )
    prefix = "health check 'error-budget': metric query 'up' failed: "
    untrusted = evaluate(check, DictResourceReader([]))
    assert untrusted.message.startswith(prefix + f"cannot connect to https://localhost:{server.port}/")
    assert "CERTIFICATE_VERIFY_FAILED" in untrusted.message
    monkeypatch.setenv("SSL_CERT_FILE", local_fleet.ca_cert)  # the system trust store, plus the fleet's CA
    client._tls.cache_clear()
    try:
        trusted = evaluate(check, DictResourceReader([]))
    finally:
        client._tls.cache_clear()  # built again from the restored environment by the next user
    # TLS held (the name was checked against the certificate): now the API server itself answers.
    assert trusted.message == prefix + "HTTP 403"  # anonymous, refused by RBAC


@dataclass
class Recorder:
    """A loopback HTTP listener standing in for a metric source: records each request and answers
    with `reply` (status, headers, body)."""

    reply: tuple[int, dict[str, str], bytes] = (200, {}, b"")
    requests: list[tuple[str, dict[str, str]]] = field(default_factory=list)


@contextmanager
def recording_listener(recorder: Recorder) -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            recorder.requests.append((self.path, dict(self.headers.items())))
            code, headers, body = recorder.reply
            self.send_response(code)
            for name, value in {"Content-Length": str(len(body)), **headers}.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def _secret(namespace: str, name: str, **data: str) -> Any:
    encoded = {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}
    return codecs.from_dict(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": name, "namespace": namespace},
            "data": encoded,
        }
    )


def test_a_bearer_token_from_a_member_secret_reaches_the_metric_source_path(
    member: Client, namespace: str
) -> None:
    token = f"tok-{uuid.uuid4().hex}"
    member.apply(_secret(namespace, "prom-token", token=token), force=True)
    member.apply(_secret(namespace, "prom-basic", username="grafana", password="hunter22"), force=True)
    reader = KubeResourceReader(member)
    scalar = json.dumps({"status": "success", "data": {"resultType": "scalar", "result": [1, "1"]}})
    recorder = Recorder(reply=(200, {"Content-Type": "application/json"}, scalar.encode()))
    with recording_listener(recorder) as url:

        def judged(secret: str) -> str:
            check = health_check(
                metricSource={
                    "url": f"{url}/prom",
                    "path": "api/v1/query",
                    "secretRef": {"name": secret, "namespace": namespace},
                },
                metricQueries=[{"name": "up", "query": 'up{job="app"}'}],
            )
            return evaluate(check, reader).message

        assert judged("prom-token") == "health check 'error-budget': metrics healthy (up=1)"
        path, headers = recorder.requests[-1]
        assert path == "/prom/api/v1/query?" + urllib.parse.urlencode({"query": 'up{job="app"}'})
        assert headers["Authorization"] == f"Bearer {token}"

        assert judged("prom-basic").endswith("metrics healthy (up=1)")
        basic = base64.b64encode(b"grafana:hunter22").decode()
        assert recorder.requests[-1][1]["Authorization"] == f"Basic {basic}"

        # A source that echoes the credentials back in its error: the check fails without showing them.
        echo = json.dumps({"status": "error", "errorType": "auth", "error": f"rejected Bearer {token}"})
        recorder.reply = (401, {}, echo.encode())
        refused = judged("prom-token")
        assert refused == (
            "health check 'error-budget': metric query 'up' failed: "
            "Prometheus answered auth: rejected [redacted]"
        )

        recorder.reply = (302, {"Location": "http://169.254.169.254/latest/meta-data"}, b"")
        redirected = judged("prom-token")
        assert redirected.endswith("metric query 'up' failed: HTTP 302 (redirects are not followed)")
        assert not [p for p, _ in recorder.requests if "meta-data" in p]

        missing = judged("absent")
        assert missing == (
            f"health check 'error-budget': Secret {namespace}/absent (metricSource.secretRef) "
            "does not exist in the cluster"
        )


# --- through the controller -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def controller(
    local_fleet: fleet.FleetState, management: Client, bins: binaries.Binaries
) -> Iterator[ControllerThread]:
    with (
        registered(management, local_fleet),
        running_controller(local_fleet, bins.path("helm"), "metrics") as thread,
    ):
        yield thread


ZERO_ERRORS_LUA = """
function evaluate()
  if metrics.errors == 0 then return {healthy = true} end
  return {healthy = false, message = metrics.errors .. " errors in the last minute"}
end
"""


def test_a_promotion_holds_on_a_failing_metric_check_and_goes_on_after_a_good_value(
    controller: ControllerThread,
    management: Client,
    prometheus: local_prometheus.Prometheus,
    namespace: str,
    job: str,
) -> None:
    name = f"metric-gate-{job}"
    errors = f'fleetwave_errors{{job="{job}"}}'
    push(prometheus, job, "fleetwave_errors 3", until=(errors, 3.0))
    content = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "app", "namespace": namespace}}
    manifests.apply(
        management,
        [
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": "default"},
                "data": {"content.yaml": yaml.safe_dump(content)},
            }
        ],
    )
    gate = {
        "name": "no-errors",
        "metricSource": {"url": prometheus.url},
        "metricQueries": [{"name": "errors", "query": errors}],
        "script": ZERO_ERRORS_LUA,
    }
    promotion = {
        "apiVersion": "config.projectsveltos.io/v1beta1",
        "kind": "ClusterPromotion",
        "metadata": {"name": name},
        "spec": {
            "profileSpec": {"policyRefs": [{"kind": "ConfigMap", "name": name, "namespace": "default"}]},
            "stages": [
                {
                    "name": "dev",
                    "clusterSelector": {"matchLabels": {"env": "dev"}},
                    "trigger": {"auto": {"delay": "1s", "postDelayHealthChecks": [gate]}},
                },
                {"name": "staging", "clusterSelector": {"matchLabels": {"env": "staging"}}},
            ],
        },
    }
    manifests.apply(management, [promotion])
    with deleted_after(management, name):

        def holding() -> str | None:
            stages = {s["name"]: s for s in status(management, name).get("stages") or []}
            text = str(stages.get("dev", {}).get("currentStatusDescription", ""))
            return text if "no-errors" in text else None

        message = wait_for(holding, what="dev held by its metric check")
        assert "metric health check failed: 3 errors in the last minute" in message
        assert stage_phases(management, name)["staging"] == "Pending"

        push(prometheus, job, "fleetwave_errors 0", until=(errors, 0.0))
        wait_for(
            lambda: stage_phases(management, name).get("staging") == "Succeeded", what="staging promoted"
        )
    management.delete(ConfigMap, name, namespace="default")


# --- fleetwave local up --with-prometheus ------------------------------------------------------------


def test_local_up_with_prometheus_scrapes_the_member_api_server_and_down_stops_it(tmp_path: Path) -> None:
    runner = CliRunner()
    state_dir = ["--state-dir", str(tmp_path / "fleet")]
    up = runner.invoke(
        app, ["local", "up", "--members", "1", "--full-members", "0", "--with-prometheus", *state_dir]
    )
    state = fleet.load(tmp_path / "fleet")
    try:
        assert up.exit_code == 0, up.output
        assert state is not None
        found = local_prometheus.attached(state)
        assert found is not None
        assert f"prometheus: {found.url}  pushgateway: {found.pushgateway_url}" in up.output
        assert {p.name for p in state.processes} >= {"prometheus", "pushgateway"}

        served = 'up{job="apiserver-member-1", cluster="member-1"}'
        wait_for(lambda: [s for s in scraped(found, served) if s["value"][1] == "1"], timeout=60, what=served)
        check = health_check(
            metricSource={"url": found.url},
            metricQueries=[
                {"name": "up", "query": served},
                {"name": "requests", "query": 'sum(apiserver_request_total{cluster="member-1"})'},
            ],
            evaluateCEL=[{"name": "serving", "rule": "metrics.up == 1.0 && metrics.requests > 0.0"}],
        )
        result = evaluate(check, DictResourceReader([]))
        assert result.ok, result.message

        shown = runner.invoke(app, ["local", "status", *state_dir])
        assert shown.exit_code == 0, shown.output
        assert found.url in shown.output
        again = runner.invoke(
            app, ["local", "up", "--members", "1", "--full-members", "0", "--with-prometheus", *state_dir]
        )
        assert again.exit_code == 0, again.output
        assert local_prometheus.attached(state) == found  # the running one is kept

        down = runner.invoke(app, ["local", "down", *state_dir])
        assert down.exit_code == 0, down.output
        assert not any(processes.is_ours(p) for p in found.processes)
    finally:
        if state is not None:
            fleet.down(Path(state.state_dir))
