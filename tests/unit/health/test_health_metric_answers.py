"""Metric sources without a network: what a Prometheus answer must be to give a value, which URLs and
addresses a metric source may use, and how a capped read stops (ADR 0079)."""

from __future__ import annotations

import ipaddress
import json
import math
from typing import Any

import pytest

from fleetwave.promapi import guards
from fleetwave.promapi.results import MAX_DEPTH, QueryFailed, read_capped, value_of


def _answer(kind: str, result: Any) -> bytes:
    return json.dumps({"status": "success", "data": {"resultType": kind, "result": result}}).encode()


def _sample(value: str, **labels: str) -> dict[str, Any]:
    return {"metric": labels, "value": [1700000000.5, value]}


def test_a_scalar_and_a_one_sample_vector_give_their_value() -> None:
    assert value_of(200, _answer("scalar", [1700000000.5, "0.25"])) == 0.25
    assert value_of(200, _answer("vector", [_sample("42", job="app")])) == 42.0
    assert value_of(200, _answer("vector", [_sample("+Inf")])) == math.inf
    assert value_of(200, _answer("scalar", [1, "-1e3"])) == -1000.0


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (_answer("vector", []), "the result has no series; a metric check needs exactly one"),
        (
            _answer("vector", [_sample("1", pod="a"), _sample("2", pod="b")]),
            "the result has 2 series; a metric check needs exactly one",
        ),
        (_answer("vector", [_sample("NaN")]), "the value is NaN"),
        (_answer("scalar", [1, "NaN"]), "the value is NaN"),
        (_answer("scalar", [1, "1_000"]), "the value '1_000' is not a number"),
        (_answer("scalar", [1, "high"]), "the value 'high' is not a number"),
        (_answer("scalar", [1, 3]), "the sample is not a [timestamp, value] pair"),
        (_answer("matrix", [{"metric": {}, "values": [[1, "1"]]}]), "the result type is matrix"),
        (_answer("string", [1, "x"]), "the result type is string"),
        (b'{"status": "success"}', "the response has no data"),
        (b"<html>hello</html>", "the response is not JSON"),
        (b'{"status": "pending"}', "the response is not a Prometheus query answer"),
    ],
)
def test_anything_but_one_number_fails_the_query_naming_why(body: bytes, reason: str) -> None:
    with pytest.raises(QueryFailed) as failed:
        value_of(200, body)
    assert str(failed.value).startswith(reason)


def test_a_prometheus_error_body_is_reported_with_its_type_and_text_whatever_the_code() -> None:
    body = json.dumps(
        {"status": "error", "errorType": "bad_data", "error": 'parse error: unexpected "("\n' + "x" * 500}
    ).encode()
    with pytest.raises(QueryFailed) as failed:
        value_of(400, body)
    message = str(failed.value)
    assert message.startswith('Prometheus answered bad_data: parse error: unexpected "(" x')
    assert len(message) < 260  # the server's text is shortened
    assert "\n" not in message


@pytest.mark.parametrize(
    ("code", "reason"), [(500, "HTTP 500"), (401, "HTTP 401"), (302, "HTTP 302 (redirects are not followed)")]
)
def test_http_errors_without_a_prometheus_body_name_the_status(code: int, reason: str) -> None:
    with pytest.raises(QueryFailed) as failed:
        value_of(code, b"nope")
    assert str(failed.value) == reason


def test_a_success_body_with_a_non_200_code_is_still_a_failure() -> None:
    with pytest.raises(QueryFailed, match=r"^HTTP 503$"):
        value_of(503, _answer("scalar", [1, "1"]))


def test_deep_json_is_refused_before_anything_reads_it() -> None:
    nested: Any = "1"
    for _ in range(MAX_DEPTH):
        nested = [nested]
    deep = json.dumps({"status": "success", "data": {"resultType": "scalar", "result": nested}}).encode()
    with pytest.raises(QueryFailed, match="nests deeper than 32 levels"):
        value_of(200, deep)
    with pytest.raises(QueryFailed, match="nests deeper"):
        value_of(200, b"[" * 100_000 + b"]" * 100_000)


def test_a_capped_read_stops_at_the_size_limit_and_at_the_deadline() -> None:
    assert read_capped([b"ab", b"cd"], max_bytes=4, deadline=10.0, clock=lambda: 0.0) == b"abcd"
    with pytest.raises(QueryFailed, match="larger than 4 bytes"):
        read_capped([b"ab", b"cd", b"e"], max_bytes=4, deadline=10.0, clock=lambda: 0.0)
    times = iter([1.0, 11.0])

    def endless() -> Any:
        while True:
            yield b"x"

    with pytest.raises(QueryFailed, match="took too long"):
        read_capped(endless(), max_bytes=1 << 20, deadline=10.0, clock=lambda: next(times))


# --- guards -------------------------------------------------------------------------------------


def test_a_source_url_and_path_make_the_query_endpoint() -> None:
    plain = guards.endpoint("http://prometheus.monitoring:9090", "api/v1/query")
    assert plain.display == "http://prometheus.monitoring:9090/api/v1/query"
    assert plain.host_header == "prometheus.monitoring:9090"
    behind = guards.endpoint("https://gw.example.com/prom/", "/api/v1/query")
    assert (behind.port, behind.path, behind.host_header) == (443, "/prom/api/v1/query", "gw.example.com")
    six = guards.endpoint("http://[2001:db8::1]:9090", "api/v1/query")
    assert six.url_to("2001:db8::1") == "http://[2001:db8::1]:9090/api/v1/query"


@pytest.mark.parametrize(
    ("url", "path", "reason"),
    [
        ("ftp://prom:21", "api/v1/query", "must start with http:// or https://"),
        ("file:///etc/passwd", "api/v1/query", "must start with http:// or https://"),
        ("http://user:pw@prom:9090", "api/v1/query", "must not carry credentials"),
        ("http://prom:9090/?x=1", "api/v1/query", "must not have a query or a fragment"),
        ("http://prom:9090#frag", "api/v1/query", "must not have a query or a fragment"),
        ("http://prom:99999", "api/v1/query", "not a valid URL"),
        ("http://", "api/v1/query", "has no host"),
        ("http://pr om:9090", "api/v1/query", "not a valid DNS name"),
        ("http://prom:9090", "../admin", "not a plain path"),
        ("http://prom:9090", "api/v1/query?x=1", "not a plain path"),
        ("http://prom:9090", "api/%2e%2e/x", "not a plain path"),
        ("http://169.254.169.254/latest", "meta-data", "169.254.169.254 is a link-local or cloud-metadata"),
        ("http://[fe80::1%25eth0]:9090", "api/v1/query", "link-local or cloud-metadata"),
        ("http://[fd00:ec2::254]", "api/v1/query", "fd00:ec2::254 is a link-local or cloud-metadata"),
        ("http://[::ffff:169.254.169.254]", "api/v1/query", "link-local or cloud-metadata"),
        ("http://prom" + "m" * 2048, "api/v1/query", "longer than 2048"),
    ],
)
def test_unusable_sources_are_refused_before_any_connection(url: str, path: str, reason: str) -> None:
    with pytest.raises(guards.Refused, match=reason.replace("?", r"\?").replace("(", r"\(")):
        guards.endpoint(url, path)


@pytest.mark.parametrize(
    "address", ["169.254.169.254", "169.254.0.1", "fe80::1", "fd00:ec2::254", "::ffff:169.254.169.254"]
)
def test_metadata_and_link_local_addresses_are_refused(address: str) -> None:
    assert guards.address_problem(ipaddress.ip_address(address))


@pytest.mark.parametrize(
    "address",
    ["10.0.0.5", "fd00:ec2::253", "192.168.1.1", "100.64.0.1", "64:ff9b::808:808", "2002:808:808::"],
)
def test_ordinary_addresses_are_allowed(address: str) -> None:
    assert guards.address_problem(ipaddress.ip_address(address)) == ""


@pytest.mark.parametrize("host", ["2852039166", "0xa9fea9fe", "0251.0376.0251.0376"])
def test_numeric_forms_that_only_the_resolver_decodes_are_refused_after_resolution(host: str) -> None:
    # The resolver decodes these numeric forms itself (no DNS query): each is 169.254.169.254.
    target = guards.endpoint(f"http://{host}:80", "latest")
    with pytest.raises(guards.Refused, match=r"resolves to 169\.254\.169\.254, a link-local"):
        guards.resolve(target, timeout=5.0)


def test_loopback_resolves_to_the_addresses_the_client_will_use(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(guards.ALLOW_LOOPBACK_ENV, "1")
    target = guards.endpoint("http://127.0.0.1:9090", "api/v1/query")
    assert guards.resolve(target, timeout=5.0) == ["127.0.0.1"]
