"""Webhook gates' I/O (ADR 0080): where a call may go, retries, caps, and how an answer is judged."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

import httpx2
import pytest

from fleetwave.health import webhook_condition
from fleetwave.promapi import guards
from fleetwave.runtime import webhook as w
from fleetwave.sandbox import worker


@pytest.fixture(autouse=True)
def _loopback_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The calls here go to 127.0.0.1 (through a mock transport): the operator's opt-in (ADR 0096)
    that the local fleet sets; what it still refuses is tested in test_runtime_outbound_addresses."""
    monkeypatch.setenv(guards.ALLOW_LOOPBACK_ENV, "1")


def test_link_local_and_metadata_addresses_are_refused_however_written() -> None:
    for url in (
        "http://169.254.169.254/latest/meta-data",
        "http://[fe80::1]/",
        "http://[::ffff:169.254.169.254]/",
        "http://[fd00:ec2::254]/",
    ):
        with pytest.raises(w.Refused, match="link-local or cloud-metadata"):
            w.endpoint(url)
    # A numeric host form only the resolver decodes is caught after resolution.
    target = w.endpoint("http://2852039166/")
    with pytest.raises(w.Refused, match=r"resolves to 169\.254\.169\.254"):
        w.resolve(target, timeout=5)


def test_only_http_urls_without_credentials_are_accepted_and_the_display_drops_the_query() -> None:
    with pytest.raises(w.Refused, match="http:// or https://"):
        w.endpoint("file:///etc/passwd")
    with pytest.raises(w.Refused, match="credentials"):
        w.endpoint("http://user:pw@example.com/")
    target = w.endpoint("https://example.com/hook?token=s3cret")
    assert target.display == "https://example.com:443"  # a path may hold a token too
    assert target.url_to("192.0.2.1") == "https://192.0.2.1:443/hook?token=s3cret"
    assert w.resolve(w.endpoint("http://127.0.0.1:8080/x"), timeout=5) == ["127.0.0.1"]


def test_a_2xx_passes_unless_the_condition_is_false_and_the_body_is_never_quoted() -> None:
    assert w.judge_status(w.Answer(204)) == (True, "answered HTTP 204")
    assert w.judge_status(w.Answer(503, {"secret": "x"})) == (False, "answered HTTP 503")
    assert w.judge_status(w.Answer(problem="refused: nope")) == (False, "refused: nope")
    assert webhook_condition.judge("body.ready == true", 200, {"ready": True})[0]
    ok, why = webhook_condition.judge("body.ready == true", 200, {"ready": False, "token": "s3cret"})
    assert (ok, why) == (False, "answered HTTP 200 but successCondition is false")
    ok, why = webhook_condition.judge("body.token + 1 == 2", 200, {"token": "s3cret"})
    assert not ok
    assert "s3cret" not in why
    assert "could not be evaluated" in why
    assert webhook_condition.judge("status == 201", 201, None)[0]
    ok, why = webhook_condition.judge("body.ready ==", 200, {})
    assert not ok
    assert why.startswith("successCondition does not compile")


def test_the_condition_runs_in_the_sandbox_worker_protocol() -> None:
    job = {"kind": "webhookCondition", "rule": "body.ready", "status": 200, "body": {"ready": True}}
    assert worker.answer(job) == {"ok": True, "message": "answered HTTP 200 and successCondition holds"}
    reply = worker.answer({**job, "rule": "[1].map(x, [x].map(y, y)).size() > 0 && " * 200 + "true"})
    assert reply["ok"] is False


def test_bodies_that_are_too_large_or_too_deep_are_not_parsed() -> None:
    assert w.parse_body(b'{"a": 1}', False) == {"a": 1}
    assert w.parse_body(b'{"a": 1}', True) is None
    assert w.parse_body(b"not json", False) is None
    deep = b"[" * (w.MAX_DEPTH + 1) + b"]" * (w.MAX_DEPTH + 1)
    assert w.parse_body(deep, False) is None
    assert w.parse_body(b"[" * 100_000 + b"]" * 100_000, False) is None  # no RecursionError escapes


def _request(url: str, **kw: object) -> w.Request:
    base: dict[str, object] = {
        "url": url,
        "method": "POST",
        "headers": {"X-Token": "s3cret"},
        "payload": {"stage": "dev"},
        "timeout": 2.0,
        "retries": 2,
    }
    return w.Request(**{**base, **kw})  # type: ignore[arg-type]


def _transport(
    handler: Callable[[httpx2.Request], httpx2.Response],
) -> tuple[httpx2.MockTransport, list[httpx2.Request]]:
    seen: list[httpx2.Request] = []

    def record(request: httpx2.Request) -> httpx2.Response:
        seen.append(request)
        return handler(request)

    return httpx2.MockTransport(record), seen


def test_5xx_is_retried_then_the_answer_is_read_and_the_post_carries_headers_and_payload() -> None:
    answers = iter([httpx2.Response(503), httpx2.Response(200, json={"ready": True})])
    transport, seen = _transport(lambda _r: next(answers))
    answer = asyncio.run(w.call(_request("http://127.0.0.1:9/hook?x=1"), transport=transport))
    assert answer == w.Answer(200, {"ready": True})
    assert len(seen) == 2
    assert seen[0].headers["X-Token"] == "s3cret"
    assert seen[0].headers["Host"] == "127.0.0.1:9"
    assert json.loads(seen[0].content) == {"stage": "dev"}
    assert str(seen[0].url) == "http://127.0.0.1:9/hook?x=1"


def test_a_4xx_is_not_retried_and_retries_stop_at_their_bound() -> None:
    transport, seen = _transport(lambda _r: httpx2.Response(404))
    assert asyncio.run(w.call(_request("http://127.0.0.1:9/"), transport=transport)).status == 404
    assert len(seen) == 1
    transport, seen = _transport(lambda _r: httpx2.Response(500))
    assert asyncio.run(w.call(_request("http://127.0.0.1:9/", retries=1), transport=transport)).status == 500
    assert len(seen) == 2


def test_redirects_are_not_followed_and_large_answers_are_dropped() -> None:
    transport, seen = _transport(
        lambda _r: httpx2.Response(302, headers={"Location": "http://169.254.169.254/"})
    )
    answer = asyncio.run(w.call(_request("http://127.0.0.1:9/"), transport=transport))
    assert answer.status == 302
    assert len(seen) == 1
    big = json.dumps({"pad": "x" * (w.MAX_BODY + 10)})
    transport, _ = _transport(lambda _r: httpx2.Response(200, text=big))
    assert asyncio.run(w.call(_request("http://127.0.0.1:9/"), transport=transport)) == w.Answer(200, None)


def test_an_unreachable_endpoint_is_a_problem_naming_it_without_its_query() -> None:
    def refuse(request: httpx2.Request) -> httpx2.Response:
        raise httpx2.ConnectError("refused", request=request)

    transport, seen = _transport(refuse)
    answer = asyncio.run(
        w.call(_request("http://127.0.0.1:9/h?token=s3cret", retries=1), transport=transport)
    )
    assert answer.problem == "http://127.0.0.1:9 could not be reached (ConnectError)"
    assert len(seen) == 2
    refused = asyncio.run(w.call(_request("http://169.254.169.254/"), transport=transport))
    assert refused.problem.startswith("refused: url: 169.254.169.254 is a link-local")
    assert len(seen) == 2  # never called


def test_the_get_form_sends_no_body() -> None:
    transport, seen = _transport(lambda _r: httpx2.Response(200))
    asyncio.run(w.call(_request("http://127.0.0.1:9/", method="GET"), transport=transport))
    assert seen[0].method == "GET"
    assert seen[0].content == b""


def test_an_attempt_longer_than_the_timeout_is_a_problem_saying_so() -> None:
    async def slow(request: httpx2.Request) -> httpx2.Response:
        await asyncio.sleep(2)
        return httpx2.Response(200)

    request = _request("http://127.0.0.1:9/slow", timeout=0.2, retries=0)
    answer = asyncio.run(w.call(request, transport=httpx2.MockTransport(slow)))
    assert answer.problem == "http://127.0.0.1:9 did not answer within 0.2s"
