"""API requests counted and timed by verb, resource, code and target, with bounded labels."""

from __future__ import annotations

import asyncio
import logging
import re

import httpx2
import pytest
from prometheus_client import generate_latest

from fleetwave.kube import request_metrics as rq
from fleetwave.runtime.metrics import Metrics


@pytest.mark.parametrize(
    ("method", "path", "verb", "resource"),
    [
        ("GET", "/api/v1/namespaces/default/configmaps", "list", "configmaps"),
        ("GET", "/api/v1/namespaces/default/configmaps/settings", "get", "configmaps"),
        (
            "PATCH",
            "/apis/fleetwave.io/v1alpha1/clusterpromotions/p1/status",
            "patch",
            "clusterpromotions/status",
        ),
        ("POST", "/apis/coordination.k8s.io/v1/namespaces/fw/leases", "create", "leases"),
        ("GET", "/api/v1/namespaces", "list", "namespaces"),
        ("GET", "/api/v1/namespaces/team-a", "get", "namespaces"),
        ("GET", "/readyz", "get", "other"),
    ],
)
def test_verb_and_resource_never_carry_a_name(method: str, path: str, verb: str, resource: str) -> None:
    request = httpx2.Request(method, f"https://h{path}")
    assert (rq.verb_of(request), rq.resource_of(path)) == (verb, resource)


def test_a_watch_is_counted_and_not_timed() -> None:
    request = httpx2.Request("GET", "https://h/api/v1/pods?watch=true")
    assert rq.verb_of(request) == "watch"


def test_requests_through_the_transport_reach_the_controllers_metrics() -> None:
    answers = iter([200, 404, 418])

    def answer(_: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(next(answers))

    measured = rq.Measured(httpx2.MockTransport(answer), "management")

    async def three() -> None:
        for name in ("a", "b", "c"):
            request = httpx2.Request("GET", f"https://h/apis/fleetwave.io/v1alpha1/clusterprofiles/{name}")
            await measured.handle_async_request(request)

    before = rq.REQUESTS.labels("get", "clusterprofiles", "404", "management")._value.get()
    asyncio.run(three())
    assert rq.REQUESTS.labels("get", "clusterprofiles", "404", "management")._value.get() == before + 1
    text = generate_latest(Metrics().registry).decode()
    assert (
        'fleetwave_api_requests_total{code="4xx",resource="clusterprofiles",target="management",verb="get"}'
        in text
    )
    assert "fleetwave_api_request_duration_seconds_bucket" in text


def test_at_debug_each_request_is_logged_with_its_path_code_and_time_never_its_query(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def answer(request: httpx2.Request) -> httpx2.Response:
        if request.url.path.endswith("/gone"):
            raise httpx2.ConnectError("refused")
        return httpx2.Response(201)

    measured = rq.Measured(httpx2.MockTransport(answer), "member")
    path = "/api/v1/namespaces/team-a/configmaps"

    async def two() -> None:
        await measured.handle_async_request(httpx2.Request("POST", f"https://h{path}?labelSelector=a%3Db"))
        with pytest.raises(httpx2.ConnectError):
            await measured.handle_async_request(httpx2.Request("GET", f"https://h{path}/gone"))

    with caplog.at_level(logging.DEBUG, logger=rq.__name__):
        asyncio.run(two())
    lines = [r.getMessage() for r in caplog.records if r.name == rq.__name__]
    assert len(lines) == 2
    assert re.fullmatch(rf"POST member {path}: 201 in \d+\.\d ms", lines[0])
    assert re.fullmatch(rf"GET member {path}/gone: ConnectError in \d+\.\d ms", lines[1])
    assert "labelSelector" not in " ".join(lines)


def test_above_debug_nothing_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    measured = rq.Measured(httpx2.MockTransport(lambda _: httpx2.Response(200)), "member")
    with caplog.at_level(logging.INFO, logger=rq.__name__):
        asyncio.run(measured.handle_async_request(httpx2.Request("GET", "https://h/api/v1/namespaces")))
    assert [r for r in caplog.records if r.name == rq.__name__] == []
