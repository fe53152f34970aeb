"""Notifications: the sink Secret is checked without echoing its values, bodies come in the three
formats, the approve command rides along, and a failing sink is retried then given up on quietly."""

from __future__ import annotations

import base64
import datetime as dt
import json
import logging

import httpx2
import pytest

from fleetwave.promapi import guards
from fleetwave.runtime import notify

AT = dt.datetime(2026, 11, 25, 8, 0, tzinfo=dt.UTC)
TOKEN = "T000-secret-path-token"


@pytest.fixture(autouse=True)
def _dns(monkeypatch: pytest.MonkeyPatch) -> None:
    """Names resolve to a documentation address, never through the network; the addresses are
    checked as ever (the sink's rules: test_runtime_outbound_addresses)."""
    monkeypatch.setattr(guards, "_getaddrinfo", lambda _host, _port, _timeout: ["192.0.2.10"])


def _data(**values: str) -> dict[str, str]:
    return {k: base64.b64encode(v.encode()).decode() for k, v in values.items()}


def _waiting() -> notify.Notification:
    message = "stage staging waits for manual approval"
    hint = notify.hint_for("ClusterPromotion", "kyverno", None, "ApprovalRequired", message)
    return notify.Notification(
        "WaitingForApproval", "ClusterPromotion", "kyverno", None, "ApprovalRequired", message, AT, hint
    )


def test_a_sink_reads_url_format_and_headers() -> None:
    sink = notify.sink_from_secret(
        _data(url=f"https://hooks.example.com/services/{TOKEN}", format="slack", headers="X-Team: platform\n")
    )
    assert (sink.format, dict(sink.headers)) == ("slack", {"X-Team": "platform"})
    assert sink.where == "https://hooks.example.com:443"  # what may be logged: no path, no token


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ({}, "key url: missing"),
        ({"url": "file:///etc/passwd"}, "key url: must be an http(s) URL"),
        ({"url": "https://x.example/" + "a" * 3000}, "key url: must be an http(s) URL"),
        (
            {"url": "https://x.example", "format": "xml"},
            "key format: must be one of json, slack, cloudevents",
        ),
        ({"url": "https://x.example", "headers": "[1, 2]"}, "key headers: must be a map"),
        ({"url": "https://x.example", "headers": "'Bad Name': x"}, "not a valid HTTP token"),
        ({"url": "https://x.example", "headers": f'Authorization: "Bearer {TOKEN}\\r\\nX: y"'}, "line break"),
    ],
)
def test_an_unusable_sink_names_the_key_and_never_a_value(values: dict[str, str], expected: str) -> None:
    with pytest.raises(notify.SinkError) as refused:
        notify.sink_from_secret(_data(**values))
    assert expected in str(refused.value)
    assert TOKEN not in str(refused.value)


def test_waiting_for_approval_carries_the_approve_command_in_every_format() -> None:
    n = _waiting()
    assert n.hint == "fleetwave approve promotion kyverno --stage staging"
    plain, kind = notify.body(n, "json", "fleetwave/test")
    assert kind == "application/json"
    assert plain["hint"] == n.hint
    assert plain["rollout"] == {"kind": "ClusterPromotion", "name": "kyverno", "namespace": None}
    slack, _ = notify.body(n, "slack", "fleetwave/test")
    assert set(slack) == {"text"}
    assert n.hint in slack["text"]
    event, kind = notify.body(n, "cloudevents", "fleetwave/test")
    assert kind == "application/cloudevents+json"
    assert event["specversion"] == "1.0"
    assert event["type"] == "io.fleetwave.rollout.waitingForApproval"
    assert event["subject"] == "ClusterPromotion/kyverno"
    assert event["data"]["hint"] == n.hint
    run_hint = notify.hint_for(
        "StagedUpdateRun", "r", "team-a", "ApprovalRequired", "stage canary waits for approval (x)"
    )
    assert run_hint == "fleetwave approve run r --stage canary -n team-a"


async def test_a_failing_sink_is_retried_then_counted_and_logged_without_its_path(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("fleetwave.runtime.notify.asyncio.sleep", _no_wait)
    calls: list[httpx2.Request] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        calls.append(request)
        return httpx2.Response(503 if len(calls) < 5 else 200)

    sink = notify.Sink(f"https://hooks.example.com/{TOKEN}", "json", {"Authorization": "Bearer x"})
    notifier = notify.Notifier(lambda: sink, transport=httpx2.MockTransport(handler))
    with caplog.at_level(logging.WARNING, logger="fleetwave.runtime.notify"):
        notifier.notify(_waiting())
        notifier.notify(_waiting())
        await notifier.flush()
    assert (notifier.failed, notifier.sent) == (1, 1)  # 3 tries for the first, the second on try 2
    assert len(calls) == 5
    assert calls[0].headers["Authorization"] == "Bearer x"
    assert json.loads(calls[0].content)["kind"] == "WaitingForApproval"
    # Sent to the address checked, with the name for Host and TLS.
    assert (calls[0].url.host, calls[0].headers["Host"]) == ("192.0.2.10", "hooks.example.com")
    assert calls[0].extensions["sni_hostname"] == "hooks.example.com"
    assert "https://hooks.example.com:443 not delivered" in caplog.text
    assert TOKEN not in caplog.text
    await notifier.close()


async def test_a_refusing_sink_is_not_retried_and_no_sink_sends_nothing() -> None:
    calls: list[httpx2.Request] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        calls.append(request)
        return httpx2.Response(400)

    refusing = notify.Notifier(
        lambda: notify.Sink("https://x.example/h"), transport=httpx2.MockTransport(handler)
    )
    refusing.notify(_waiting())
    await refusing.flush()
    assert (len(calls), refusing.failed) == (1, 1)
    await refusing.close()
    silent = notify.Notifier(lambda: None, transport=httpx2.MockTransport(handler))
    silent.notify(_waiting())
    await silent.flush()
    assert (len(calls), silent.sent, silent.failed) == (1, 0, 0)
    await silent.close()


async def _no_wait(_seconds: float) -> None:
    return None


def test_a_rollout_is_notified_once_per_revision_of_each_thing_it_says() -> None:
    n = notify.Notifier(lambda: None)
    args = ("ClusterPromotion", None, "kyverno")
    assert not n.seen(*args, "ApprovalRequired", "stage staging waits for manual approval")
    assert n.seen(*args, "ApprovalRequired", "stage staging waits for manual approval")  # every pass says it
    assert n.seen(*args, "StageEntered", "stage staging: 1 clusters")  # not a notified reason
    assert not n.seen(
        "ClusterPromotion", None, "other", "ApprovalRequired", "stage staging waits for manual approval"
    )
    n.seen(*args, "Restarted", "content changed; restarting from the first stage")
    assert not n.seen(*args, "ApprovalRequired", "stage staging waits for manual approval")  # a new revision
