"""The shell side of webhook gates (ADR 0080): the headers Secret's trust boundary, and a verdict that
stands for the webhook's interval."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx2
import pytest

from fleetwave.api.webhooks import WebhookGate
from fleetwave.controllers.gates import webhook_gates as wg
from fleetwave.promapi import guards
from fleetwave.runtime import webhook

T0 = datetime(2026, 11, 25, 10, 0, tzinfo=UTC)
VALUE = "s3cret-value"


@dataclass
class _Cache:
    secrets: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)

    def has(self, kind: str) -> bool:
        return False  # no Cluster API clusters here

    def obj(self, kind: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        assert kind == "Secret"
        return self.secrets.get((namespace or "", name))

    def memo(self, _name: str, _kind: str, build: Callable[[], Any], *, everywhere: bool = False) -> Any:
        return build()

    def members_everywhere(self) -> list[Any]:
        return []


@dataclass
class _Ctx:
    cache: _Cache
    webhooks: webhook.WebhookCalls
    namespace: str = "fleetwave-system"
    watched: frozenset[str] | None = None
    local_content_kinds: frozenset[str] | None = None


def _secret(**values: str) -> dict[str, Any]:
    return {
        "type": wg.HEADERS_SECRET_TYPE,
        "data": {k: base64.b64encode(v.encode()).decode() for k, v in values.items()},
    }


def _hook(namespace: str | None = None, **kw: Any) -> WebhookGate:
    ref = {"name": "headers", **({"namespace": namespace} if namespace else {})}
    return WebhookGate.model_validate(
        {"name": "ready", "url": "http://127.0.0.1:9/h", "headersFrom": {"secretRef": ref}, **kw}
    )


@pytest.fixture(autouse=True)
def _loopback_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The webhooks here are on 127.0.0.1 (a mock transport answers): the operator's opt-in (ADR 0096)."""
    monkeypatch.setenv(guards.ALLOW_LOOPBACK_ENV, "1")


CLUSTER_OWNER = wg.Owner("ClusterPromotion", "p", None, "h1")
RUN_OWNER = wg.Owner("StagedUpdateRun", "r", "team-a", "h1")


def _ctx(watched: frozenset[str] | None = None, transport: httpx2.AsyncBaseTransport | None = None) -> Any:
    cache = _Cache(
        {
            ("team-a", "headers"): _secret(**{"X-Api-Key": VALUE}),
            ("team-b", "headers"): _secret(**{"X-Api-Key": VALUE}),
            ("fleetwave-system", "headers"): _secret(**{"X-Api-Key": VALUE}),
            ("bad", "headers"): _secret(**{"Host": VALUE}),
        }
    )
    return _Ctx(cache, webhook.WebhookCalls(transport=transport), watched=watched)


def test_a_namespaced_run_sends_only_a_secret_typed_for_webhook_headers() -> None:
    # A namespaced run's author could otherwise send any Secret of the namespace (a service
    # account token, another app's password) to a URL of their choice.
    untyped = _secret(**{"X-Api-Key": VALUE})
    del untyped["type"]
    ctx = _ctx()
    ctx.cache.secrets[("team-a", "headers")] = untyped
    for owner, namespace in ((RUN_OWNER, None), (CLUSTER_OWNER, "team-a")):
        with pytest.raises(
            wg.SecretProblem, match=r"only a Secret of type fleetwave\.io/webhook-headers"
        ) as raised:
            wg.secret_headers(ctx, owner, _hook(namespace))
        assert VALUE not in str(raised.value)


def test_a_namespaced_run_never_sends_a_member_kubeconfig_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    ctx = _ctx()
    real = wg.content_boundary

    def with_kubeconfig(c: Any) -> Any:
        return dataclasses.replace(real(c), kubeconfig_secrets=frozenset({("team-a", "headers")}))

    monkeypatch.setattr(wg, "content_boundary", with_kubeconfig)
    with pytest.raises(wg.SecretProblem, match="kubeconfig Secret is never sent anywhere"):
        wg.secret_headers(ctx, RUN_OWNER, _hook())


def test_a_headers_secret_outside_the_trust_boundary_is_refused_naming_only_the_secret() -> None:
    ctx = _ctx(watched=frozenset({"team-a", "bad"}))
    assert wg.secret_headers(ctx, RUN_OWNER, _hook()) == {"X-Api-Key": VALUE}  # its own namespace
    assert wg.secret_headers(ctx, CLUSTER_OWNER, _hook("team-a")) == {"X-Api-Key": VALUE}
    refusals = {
        (
            RUN_OWNER,
            "team-b",
        ): "a namespaced StagedUpdateRun reads Secrets only in its own namespace (team-a)",
        (CLUSTER_OWNER, None): "a cluster-scoped ClusterPromotion must name its namespace",
        (CLUSTER_OWNER, "fleetwave-system"): "fleetwave's own namespace is never a content source",
        (CLUSTER_OWNER, "team-b"): "namespace team-b is not watched",
        (CLUSTER_OWNER, "bad"): "key Host is not a header fleetwave may send",
    }
    for (owner, namespace), why in refusals.items():
        with pytest.raises(wg.SecretProblem) as raised:
            wg.secret_headers(ctx, owner, _hook(namespace))
        assert why in str(raised.value)
        assert "Secret" in str(raised.value)
        assert VALUE not in str(raised.value)
    with pytest.raises(wg.SecretProblem, match="headersFrom Secret team-a/missing: not found"):
        wg.secret_headers(
            ctx,
            RUN_OWNER,
            WebhookGate.model_validate(
                {"name": "x", "url": "http://127.0.0.1:9/", "headersFrom": {"secretRef": {"name": "missing"}}}
            ),
        )


def test_a_verdict_stands_for_the_interval_then_the_webhook_is_called_again() -> None:
    answers = iter([503, 200])
    seen: list[httpx2.Request] = []

    def answer(request: httpx2.Request) -> httpx2.Response:
        seen.append(request)
        return httpx2.Response(next(answers))

    ctx = _ctx(transport=httpx2.MockTransport(answer))
    hook = _hook(retries=0, interval="30s")

    def verdicts(at: datetime) -> Any:
        return asyncio.run(wg.verdicts(ctx, RUN_OWNER, "dev", ["team-a/m1"], [hook], at))[("dev", "ready")]

    first = verdicts(T0)
    assert (first.ok, first.message) == (False, "answered HTTP 503")
    assert not verdicts(T0 + timedelta(seconds=29)).ok
    assert len(seen) == 1  # within the interval: not called again
    assert verdicts(T0 + timedelta(seconds=30)).ok
    assert len(seen) == 2
    assert seen[0].headers["X-Api-Key"] == VALUE


def test_a_per_cluster_webhook_calls_each_cluster_and_names_the_failing_one() -> None:
    seen: list[str] = []

    def answer(request: httpx2.Request) -> httpx2.Response:
        seen.append(request.url.path)
        return httpx2.Response(500 if request.url.path.endswith("m2") else 200)

    ctx = _ctx(transport=httpx2.MockTransport(answer))
    hook = WebhookGate.model_validate(
        {
            "name": "per",
            "url": "http://127.0.0.1:9/c/${MEMBER-CLUSTER-NAME}",
            "method": "GET",
            "perCluster": True,
            "retries": 0,
        }
    )
    verdict = asyncio.run(wg.verdicts(ctx, RUN_OWNER, "dev", ["m1", "m2"], [hook], T0))[("dev", "per")]
    assert sorted(seen) == ["/c/m1", "/c/m2"]
    assert (verdict.ok, verdict.cluster, verdict.failing) == (False, "m2", (("m2", "answered HTTP 500"),))


def test_the_webhooks_timeout_bounds_each_attempt() -> None:
    async def slow(request: httpx2.Request) -> httpx2.Response:
        await asyncio.sleep(5)
        return httpx2.Response(200)

    ctx = _ctx(transport=httpx2.MockTransport(slow))
    hook = _hook(timeout="1s", retries=0)
    verdict = asyncio.run(wg.verdicts(ctx, RUN_OWNER, "dev", ["team-a/m1"], [hook], T0))[("dev", "ready")]
    assert not verdict.ok
    assert "did not answer within 1s" in verdict.message
