"""Webhook gates on the real local fleet (ADR 0080): a real HTTP server on loopback that first answers
503 then 200 {"ready": true} holds a promotion's stage, then lets it move on; a header comes from a
Secret and its value reaches the server but no status, Event or log; a false successCondition holds
the stage with its message."""

from __future__ import annotations

import base64
import http.server
import json
import logging
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from lightkube import ApiError, Client
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Event, Secret
from promotion_support import (
    ControllerThread,
    deleted_after,
    registered,
    running_controller,
    stage_phases,
    status,
    wait_for,
)

from fleetwave.kube import kinds, ops
from fleetwave.local import binaries, fleet
from fleetwave.mgmt import manifests

TOKEN = f"tok-{uuid.uuid4().hex}"
SECRET_NS = "default"  # a watched namespace, not the controller's own (ADR 0080)


class Hooks:
    """What the server got, and how it answers: /flaky/<id> 503 twice then 200 {"ready": true};
    /notready/<id> 200 {"ready": false}."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, dict[str, str], dict[str, Any]]] = []
        self.lock = threading.Lock()

    def of(self, path: str) -> list[tuple[str, str, dict[str, str], dict[str, Any]]]:
        with self.lock:
            return [c for c in self.calls if c[1] == path]


@pytest.fixture(scope="module")
def hooks() -> Iterator[tuple[str, Hooks]]:
    seen = Hooks()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            body = json.loads(self.rfile.read(length) or b"{}")
            with seen.lock:
                seen.calls.append(("POST", self.path, dict(self.headers.items()), body))
                earlier = sum(1 for c in seen.calls if c[1] == self.path)
            if self.path.startswith("/flaky/") and earlier <= 2:
                self._answer(503, {"ready": False})
            else:
                self._answer(200, {"ready": not self.path.startswith("/notready/")})

        def _answer(self, code: int, body: dict[str, Any]) -> None:
            raw = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def log_message(self, *_args: Any) -> None:  # quiet
            return

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def controller(
    local_fleet: fleet.FleetState, management: Client, bins: binaries.Binaries
) -> Iterator[ControllerThread]:
    with (
        registered(management, local_fleet),
        running_controller(local_fleet, bins.path("helm"), "hooks") as t,
    ):
        yield t
    assert t.error is None, t.error


@pytest.fixture
def secret(management: Client) -> Iterator[str]:
    name = f"hook-headers-{uuid.uuid4().hex[:6]}"
    data = {"X-Api-Key": base64.b64encode(TOKEN.encode()).decode()}
    headers_type = "fleetwave.io/webhook-headers"
    management.create(
        Secret(metadata=ObjectMeta(name=name, namespace=SECRET_NS), data=data, type=headers_type)
    )
    yield name
    management.delete(Secret, name, namespace=SECRET_NS)


def _promotion(management: Client, name: str, webhook: dict[str, Any]) -> None:
    page = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default"}}
    manifests.apply(
        management,
        [
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": "default"},
                "data": {"content.yaml": yaml.safe_dump({**page, "data": {"v": "1"}})},
            },
            {
                "apiVersion": f"{kinds.GROUP}/{kinds.VERSION}",
                "kind": "ClusterPromotion",
                "metadata": {"name": name},
                "spec": {
                    "profileSpec": {
                        "policyRefs": [{"kind": "ConfigMap", "name": name, "namespace": "default"}]
                    },
                    "stages": [
                        {
                            "name": "dev",
                            "clusterSelector": {"matchLabels": {"env": "dev"}},
                            "webhooks": [webhook],
                        },
                        {"name": "prod", "clusterSelector": {"matchLabels": {"env": "prod"}}},
                    ],
                },
            },
        ],
    )


def _said(management: Client, name: str, text: str) -> bool:
    return text in json.dumps(status(management, name))


def test_a_promotion_stage_waits_on_its_webhook_then_moves_on_with_the_secrets_header(
    controller: ControllerThread,
    management: Client,
    hooks: tuple[str, Hooks],
    secret: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    url, seen = hooks
    name = f"hooked-{uuid.uuid4().hex[:6]}"
    caplog.set_level(logging.DEBUG)  # every logger the process has, the HTTP libraries' included
    webhook = {
        "name": "ready",
        "url": f"{url}/flaky/{name}?token=query-{TOKEN}",
        "retries": 0,
        "interval": "1s",
        "successCondition": "body.ready == true",
        "headersFrom": {"secretRef": {"name": secret, "namespace": SECRET_NS}},
    }
    _promotion(management, name, webhook)
    with deleted_after(management, name):
        wait_for(
            lambda: _said(management, name, "webhook ready not passing: answered HTTP 503"),
            what="dev held by the webhook's 503",
        )
        assert stage_phases(management, name).get("prod") in (None, "", "Pending")
        wait_for(lambda: stage_phases(management, name).get("prod") == "Succeeded", what="prod done")
        final = json.dumps(status(management, name))
        events = json.dumps(
            [e.message for e in management.list(Event, namespace="*") if name in (e.message or "")]
        )
    calls = seen.of(f"/flaky/{name}?token=query-{TOKEN}")
    assert len(calls) >= 3  # 503, 503, then 200
    method, _, headers, body = calls[-1]
    assert method == "POST"
    assert headers["X-Api-Key"] == TOKEN
    assert body["rollout"] == {"kind": "ClusterPromotion", "name": name, "namespace": None}
    assert body["stage"] == "dev"
    assert body["clusters"] == ["fleetwave-system/member-1"]
    # Neither the header's value nor the URL's query reach status, Events or logs.
    for text in (final, events, caplog.text):
        assert TOKEN not in text


def test_a_false_success_condition_holds_the_stage_with_its_message(
    controller: ControllerThread, management: Client, hooks: tuple[str, Hooks]
) -> None:
    url, seen = hooks
    name = f"notready-{uuid.uuid4().hex[:6]}"
    webhook = {
        "name": "ready",
        "url": f"{url}/notready/{name}",
        "interval": "1s",
        "successCondition": "body.ready",
    }
    _promotion(management, name, webhook)
    with deleted_after(management, name):
        wait_for(
            lambda: _said(
                management, name, "webhook ready not passing: answered HTTP 200 but successCondition is false"
            ),
            what="dev held by the false condition",
        )
        wait_for(lambda: len(seen.of(f"/notready/{name}")) >= 2, what="called again after its interval")
        assert stage_phases(management, name).get("dev") != "Succeeded"
        assert stage_phases(management, name).get("prod") in (None, "", "Pending")


def test_the_api_server_refuses_a_webhook_out_of_bounds(
    controller: ControllerThread, management: Client
) -> None:
    bad = {
        "scheme": ({"url": "ftp://127.0.0.1/x"}, "url"),
        "timeout": ({"url": "http://127.0.0.1/x", "timeout": "31s"}, "must be more than 0s and at most 30s"),
        "retries": ({"url": "http://127.0.0.1/x", "retries": 6}, "retries"),
        "perCluster GET": (
            {"url": "http://127.0.0.1/x", "method": "GET", "perCluster": True},
            "must name the cluster in its url",
        ),
    }
    for what, (fields, said) in bad.items():
        doc = {
            "apiVersion": f"{kinds.GROUP}/{kinds.VERSION}",
            "kind": "ClusterPromotion",
            "metadata": {"name": f"refused-{uuid.uuid4().hex[:6]}"},
            "spec": {"stages": [{"name": "dev", "webhooks": [{"name": "w", **fields}]}]},
        }
        with pytest.raises(ApiError) as refused:  # straight to the API server: its schema refuses it
            management.create(ops.to_resource(doc))
        assert refused.value.status.code == 422, what
        assert said in str(refused.value.status.message), what
