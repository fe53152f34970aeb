"""An unhealthy judgement's changing message is held back a few seconds; every transition is not."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from fleetwave.controllers.shared.context import Context
from fleetwave.controllers.shared.status_writer import PROGRESS_EVERY, StatusWriter, Whose
from fleetwave.controllers.sveltos import summary
from fleetwave.controllers.sveltos import summary_status as ss
from fleetwave.kube.status import Versioned


def _status(status: str, reason: str, message: str, **extra: Any) -> dict[str, Any]:
    ready = {
        "type": "Ready",
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": "2026-11-25T10:00:00Z",
        "observedGeneration": 1,
    }
    return {"observedContentHash": "h1", "conditions": [ready], "failureMessage": None, **extra}


WAITING = _status("False", "Unhealthy", "Deployment web/web: 0 of 1 updated replicas available")
LATER = _status("False", "Unhealthy", "Deployment web/web: 1 updated replica, 0 available")


def test_only_a_changed_unhealthy_message_is_progress() -> None:
    assert ss.progress_only(WAITING, LATER)
    assert not ss.progress_only(WAITING, WAITING)  # nothing changed: nothing to hold back
    assert not ss.progress_only(WAITING, _status("True", "Provisioned", "deployed and healthy"))
    assert not ss.progress_only(WAITING, _status("False", "Failed", "apply refused"))
    assert not ss.progress_only(_status("False", "Failed", "a"), _status("False", "Failed", "b"))
    # Anything else changing with it (a new revision) is written at once.
    assert not ss.progress_only(WAITING, {**LATER, "observedContentHash": "h2"})
    moved = _status("False", "Unhealthy", LATER["conditions"][0]["message"])
    moved["conditions"][0]["lastTransitionTime"] = "2026-11-25T10:00:05Z"
    assert not ss.progress_only(WAITING, moved)


def test_nulls_the_api_server_drops_do_not_hide_progress() -> None:
    stored = {k: v for k, v in WAITING.items() if v is not None}
    assert ss.progress_only(stored, LATER)


class _Resource:
    Status = "status-subresource"


class _Client:
    async def patch(self, resource: Any, name: str, body: dict[str, Any], **_: Any) -> Any:
        meta = SimpleNamespace(name=name, namespace="ns", resourceVersion="2")
        return SimpleNamespace(metadata=meta, status=body["status"])


def _ctx(written_ago: float | None) -> Any:
    """A context whose status writer last wrote ns/s `written_ago` seconds ago (None: never)."""
    elapsed = [0.0]
    statuses = StatusWriter(clock=lambda: elapsed[0])
    if written_ago is not None:
        current = Versioned("s", "ns", "1", {})
        asyncio.run(statuses.write(_Client(), _Resource, Whose("ClusterSummary", "ns/s"), current, {"a": 1}))  # type: ignore[arg-type]
        elapsed[0] = written_ago
    ctx = SimpleNamespace(statuses=statuses)
    ctx.progress_due_in = lambda kind, key: Context.progress_due_in(ctx, kind, key)  # type: ignore[arg-type]
    return ctx


def test_progress_waits_for_the_interval_after_this_process_last_wrote() -> None:
    held = summary._progress_held_back(_ctx(1.0), "ns/s", WAITING, LATER)
    assert held is not None
    assert PROGRESS_EVERY - 1.5 < held <= PROGRESS_EVERY - 1.0
    assert summary._progress_held_back(_ctx(PROGRESS_EVERY + 0.1), "ns/s", WAITING, LATER) is None
    assert summary._progress_held_back(_ctx(None), "ns/s", WAITING, LATER) is None  # e.g. after a restart
    ready = _status("True", "Provisioned", "deployed and healthy")
    assert summary._progress_held_back(_ctx(0.1), "ns/s", WAITING, ready) is None
