"""API requests counted and timed by verb, resource, code and target, with bounded labels."""

from __future__ import annotations

import asyncio

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
