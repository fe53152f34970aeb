"""Rollout notifications on the real local fleet: the controller, told `--notify-secret`, posts a
promotion's stage started / waiting for approval (with the approve command) / stage succeeded to a
real HTTP server, in CloudEvents form with the Secret's header, and never logs the Secret's values."""

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
from lightkube import Client
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Secret
from lightkube.types import PatchType
from promotion_support import deleted_after, registered, running_controller, stage_phases, wait_for

from fleetwave.kube import kinds
from fleetwave.local import binaries, fleet
from fleetwave.mgmt import manifests

NS = "fleetwave-system"
TOKEN = f"tok-{uuid.uuid4().hex}"


class Received:
    """What the sink got: (path, headers, body) per POST."""

    def __init__(self) -> None:
        self.posts: list[tuple[str, dict[str, str], dict[str, Any]]] = []
        self.lock = threading.Lock()

    def kinds(self, name: str) -> list[tuple[str, str]]:
        with self.lock:
            return [
                (b["type"], (b["data"]["message"]))
                for _, _, b in self.posts
                if b.get("data", {}).get("rollout", {}).get("name") == name
            ]


@pytest.fixture(scope="module")
def sink() -> Iterator[tuple[str, Received]]:
    received = Received()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            body = json.loads(self.rfile.read(length))
            with received.lock:
                received.posts.append((self.path, dict(self.headers.items()), body))
            self.send_response(202)
            self.end_headers()

        def log_message(self, *_args: Any) -> None:  # quiet
            return

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", received
    finally:
        server.shutdown()
        server.server_close()


def _secret_data(url: str) -> dict[str, str]:
    values = {
        "url": f"{url}/hooks/{TOKEN}",
        "format": "cloudevents",
        "headers": f"Authorization: Bearer {TOKEN}\n",
    }
    return {k: base64.b64encode(v.encode()).decode() for k, v in values.items()}


def test_a_promotion_notifies_its_stages_and_the_approval_it_waits_for(
    local_fleet: fleet.FleetState,
    management: Client,
    bins: binaries.Binaries,
    sink: tuple[str, Received],
    caplog: pytest.LogCaptureFixture,
) -> None:
    url, received = sink
    secret = f"notify-{uuid.uuid4().hex[:6]}"
    name = f"notified-{uuid.uuid4().hex[:6]}"
    caplog.set_level(logging.DEBUG, logger="fleetwave")
    with registered(management, local_fleet):
        management.create(Secret(metadata=ObjectMeta(name=secret, namespace=NS), data=_secret_data(url)))
        try:
            with running_controller(local_fleet, bins.path("helm"), "notify", notify_secret=secret):
                page = {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"name": name, "namespace": "default"},
                }
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
                                    "policyRefs": [
                                        {"kind": "ConfigMap", "name": name, "namespace": "default"}
                                    ]
                                },
                                "stages": [
                                    {"name": "dev", "clusterSelector": {"matchLabels": {"env": "dev"}}},
                                    {
                                        "name": "staging",
                                        "clusterSelector": {"matchLabels": {"env": "staging"}},
                                        "trigger": {"manual": {"approved": False}},
                                    },
                                    {"name": "prod", "clusterSelector": {"matchLabels": {"env": "prod"}}},
                                ],
                            },
                        },
                    ],
                )
                with deleted_after(management, name):
                    waiting = wait_for(
                        lambda: [m for t, m in received.kinds(name) if t.endswith("waitingForApproval")],
                        what="the waiting-for-approval notification",
                    )
                    assert waiting == ["stage staging waits for manual approval"]
                    approve = [
                        {"op": "replace", "path": "/spec/stages/1/trigger/manual/approved", "value": True}
                    ]
                    management.patch(
                        kinds.resource("ClusterPromotion"), name, approve, patch_type=PatchType.JSON
                    )
                    wait_for(
                        lambda: stage_phases(management, name).get("prod") == "Succeeded", what="prod done"
                    )
                    wait_for(
                        lambda: (
                            ("io.fleetwave.rollout.stageSucceeded", "stage prod succeeded")
                            in received.kinds(name)
                        ),
                        what="prod's success notified",
                    )
        finally:
            management.delete(Secret, secret, namespace=NS)
    types = [t for t, _ in received.kinds(name)]
    for stage in ("dev", "staging", "prod"):
        assert (
            "io.fleetwave.rollout.stageStarted",
            f"stage {stage}: delivering to 1 clusters",
        ) in received.kinds(name), types
    assert types.count("io.fleetwave.rollout.waitingForApproval") == 1  # once, not at every pass
    messages = [m for _, m in received.kinds(name)]
    assert messages.index("stage staging waits for manual approval") < messages.index(
        "stage prod: delivering to 1 clusters"
    )
    with received.lock:
        path, headers, body = next(p for p in received.posts if p[2]["type"].endswith("waitingForApproval"))
    assert path == f"/hooks/{TOKEN}"
    assert headers["Authorization"] == f"Bearer {TOKEN}"
    assert headers["Content-Type"] == "application/cloudevents+json"
    assert body["data"]["hint"] == f"fleetwave approve promotion {name} --stage staging"
    assert body["source"] == f"fleetwave/{NS}"
    assert TOKEN not in caplog.text  # neither the URL's path nor the header reach a log
