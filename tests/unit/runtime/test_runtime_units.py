"""Controller result switch, merge-patch diff, lease decision and the probe server, without a cluster."""

from __future__ import annotations

import asyncio
import logging
from types import SimpleNamespace
from typing import Any

import httpx2
import pytest

from fleetwave.kube import fence, ops, status
from fleetwave.runtime import controller, events, leader, metrics, probes, queueing


class Recorder:
    """A reconcile that returns scripted outcomes and records calls."""

    def __init__(self, outcomes: list[controller.Result | Exception]) -> None:
        self.outcomes = outcomes
        self.calls: list[str] = []
        self.called = asyncio.Event()

    async def wait_calls(self, n: int) -> None:
        while len(self.calls) < n:
            self.called.clear()
            await self.called.wait()

    async def __call__(self, key: str) -> controller.Result:
        self.calls.append(key)
        self.called.set()
        outcome = self.outcomes.pop(0) if self.outcomes else controller.Result()
        if isinstance(outcome, Exception):
            raise outcome
        return outcome


async def run_once(
    result: controller.Result | Exception,
) -> tuple[queueing.WorkQueue[str], metrics.Metrics, float | None]:
    """Reconcile one key once; returns the queue, metrics and the key's pending timer at that point."""
    q: queueing.WorkQueue[str] = queueing.WorkQueue()
    m = metrics.Metrics()
    rec = Recorder([result])
    ctl = controller.Controller("c", rec, queue=q, metrics_=m)
    ctl.enqueue("k")
    task = asyncio.create_task(ctl.run())
    await rec.wait_calls(1)
    while q.in_flight:  # noqa: ASYNC110 - yields until the worker has applied the result
        await asyncio.sleep(0)
    timer = q.pending_timer("k")
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    return q, m, timer


def count(m: metrics.Metrics, result: str) -> float:
    value = m.registry.get_sample_value("fleetwave_reconcile_total", {"controller": "c", "result": result})
    return value or 0.0


async def test_requeue_after_schedules_a_timer_and_forgets_the_backoff() -> None:
    q, m, timer = await run_once(controller.Result(requeue_after=30.0))
    assert q.num_requeues("k") == 0
    assert timer is not None
    assert count(m, "requeue_after") == 1


async def test_an_exception_is_retried_with_backoff_and_counted() -> None:
    q, m, timer = await run_once(RuntimeError("boom"))
    assert q.num_requeues("k") == 1
    assert timer is not None
    assert count(m, "error") == 1
    errors = m.registry.get_sample_value("fleetwave_reconcile_errors_total", {"controller": "c"})
    assert errors == 1


_STALE = (
    'Operation cannot be fulfilled on clusterpromotions.fleetwave.io "p": the object has been '
    "modified; please apply your changes to the latest version and try again"
)


def _refused(code: int, text: str) -> ops.StatusError:
    request = httpx2.Request("PATCH", "https://127.0.0.1/apis/fleetwave.io/v1alpha1/clusterpromotions/p")
    response = httpx2.Response(code, text=text, request=request)
    return ops.StatusError("refused", request=request, response=response)


@pytest.mark.parametrize(
    ("refused", "said"),
    [
        # Deleted while it was reconciled.
        (_refused(404, "404 page not found"), "404 page not found"),
        # Changed since it was read.
        (_refused(409, _STALE), "the object has been modified"),
        # Met the fence while the lease is unconfirmed: every reconcile in flight does, and the
        # fence logs the spell once.
        (fence.FencedWrite("PATCH request refused: this replica's lease is not confirmed"), "lease is not"),
    ],
)
async def test_an_object_gone_or_changed_or_a_write_fenced_mid_reconcile_is_retried_without_a_traceback(
    caplog: pytest.LogCaptureFixture, refused: Exception, said: str
) -> None:
    with caplog.at_level(logging.DEBUG, logger="fleetwave.runtime.controller"):
        q, m, _timer = await run_once(refused)
    assert q.num_requeues("k") == 1
    assert count(m, "error") == 1
    # The retry's line and the reconcile's timing line, both at DEBUG, neither with a traceback.
    assert [r.levelno for r in caplog.records] == [logging.DEBUG, logging.DEBUG]
    assert "retrying" in caplog.records[0].getMessage()
    assert said in caplog.records[0].getMessage()
    assert all(r.exc_info is None for r in caplog.records)


async def test_a_field_manager_conflict_is_still_logged_with_its_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    conflict = _refused(409, 'Apply failed with 1 conflict: conflict with "kubectl-edit": .spec.tier')
    with caplog.at_level(logging.DEBUG, logger="fleetwave.runtime.controller"):
        await run_once(conflict)
    assert [r.levelno for r in caplog.records] == [logging.ERROR, logging.DEBUG]
    assert caplog.records[0].exc_info is not None


async def test_requeue_without_delay_uses_the_rate_limiter() -> None:
    q, m, timer = await run_once(controller.Result(requeue=True))
    assert q.num_requeues("k") == 1
    assert timer is not None
    assert count(m, "requeue") == 1


async def test_plain_success_leaves_no_timer_and_observes_latency() -> None:
    _, m, timer = await run_once(controller.Result())
    assert timer is None
    assert count(m, "success") == 1
    observed = m.registry.get_sample_value("fleetwave_event_to_reconcile_seconds_count", {"controller": "c"})
    assert observed == 1


async def test_retries_after_errors_until_success_then_stop() -> None:
    rec = Recorder([RuntimeError("1"), RuntimeError("2"), controller.Result()])
    q: queueing.WorkQueue[str] = queueing.WorkQueue(backoff=queueing.Backoff(base=0.001, cap=0.01))
    ctl = controller.Controller("c", rec, queue=q)
    ctl.enqueue("k")
    task = asyncio.create_task(ctl.run())
    await rec.wait_calls(3)
    while q.in_flight:  # noqa: ASYNC110 - yields until the worker has applied the result
        await asyncio.sleep(0)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert rec.calls == ["k", "k", "k"]
    assert q.num_requeues("k") == 0


def test_merge_patch_nulls_removed_keys_and_recurses_into_maps() -> None:
    old = {"phase": "Running", "stages": [{"n": 1}], "obs": {"a": 1, "b": 2}, "gone": 1}
    new = {"phase": "Running", "stages": [{"n": 2}], "obs": {"a": 1, "c": 3}}
    assert status.merge_patch(old, new) == {"stages": [{"n": 2}], "obs": {"b": None, "c": 3}, "gone": None}


def test_merge_patch_of_equal_documents_is_none() -> None:
    doc = {"a": {"b": [1, 2]}, "c": "x"}
    assert status.merge_patch(doc, status.normalized(doc)) is None


def test_may_acquire_only_free_own_or_unchanged_for_a_full_duration() -> None:
    seen = leader.Observation("7", seen_at=100.0)
    kw = {"identity": "me", "observed": seen, "duration": 15.0}
    assert leader.may_acquire(holder=None, now=100.0, **kw)  # type: ignore[arg-type]
    assert leader.may_acquire(holder="me", now=100.0, **kw)  # type: ignore[arg-type]
    assert not leader.may_acquire(holder="other", now=114.9, **kw)  # type: ignore[arg-type]
    assert leader.may_acquire(holder="other", now=115.0, **kw)  # type: ignore[arg-type]


def test_elector_rejects_timings_that_could_split_the_brain() -> None:
    with pytest.raises(ValueError, match="renew_deadline"):
        leader.LeaderElector(None, "ns", "l", "me", lease_duration=5, renew_deadline=5, retry_period=1)  # type: ignore[arg-type]


async def test_probe_server_routes_paths_to_their_ports() -> None:
    pages = {
        "/metrics": probes.Endpoint(lambda: (200, "text/plain", b"m 1\n"), port="metrics"),
        "/healthz": probes.Endpoint(lambda: (200, "text/plain", b"ok"), port="health"),
    }
    server = probes.ProbeServer("127.0.0.1", 0, 0, pages)
    await server.start()
    try:
        assert server.ports["metrics"] == server.ports["health"]
        assert await http_get(server.ports["metrics"], "/metrics") == (200, b"m 1\n")
        assert await http_get(server.ports["health"], "/healthz") == (200, b"ok")
        assert (await http_get(server.ports["health"], "/nope"))[0] == 404
    finally:
        await server.stop()


async def http_get(port: int, path: str) -> tuple[int, bytes]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    await writer.drain()
    raw = await reader.read()
    writer.close()
    await writer.wait_closed()
    head, body = raw.split(b"\r\n\r\n", 1)
    return int(head.split()[1]), body


def test_event_spam_filter_allows_a_burst_then_one_per_refill_period() -> None:
    spam = events.SpamFilter(burst=3, refill_seconds=10.0, size=2)
    assert [spam.allow("a", 0.0) for _ in range(4)] == [True, True, True, False]
    assert spam.allow("b", 0.0)  # another key has its own bucket
    assert not spam.allow("a", 5.0)
    assert spam.allow("a", 10.5)  # one token back after the refill period
    assert not spam.allow("a", 10.6)
    spam.allow("c", 11.0)  # beyond `size` keys the least recently used is forgotten: "b" went
    assert len(spam._buckets) == 2


class _PatchRecorder:
    """A client whose status patches are recorded and answered with nothing (no metadata)."""

    def __init__(self) -> None:
        self.bodies: list[Any] = []

    async def patch(self, _resource: Any, _name: str, body: Any, **_kw: Any) -> Any:
        self.bodies.append(body)
        return {}


async def test_fields_computed_but_not_stored_yet_go_out_with_the_next_status_write() -> None:
    client = _PatchRecorder()
    stored = {"phase": "Pending"}
    pending = status.Versioned("run-1", None, "7", {"phase": "Pending", "plan": {"stages": 2}}, stored=stored)
    written, after = await status.write_versioned(
        client,  # type: ignore[arg-type]
        SimpleNamespace(Status=object()),  # type: ignore[arg-type]
        pending,
        {"phase": "Running", "plan": {"stages": 2}},
    )
    assert written is status.StatusWrite.WRITTEN
    assert client.bodies == [
        {"metadata": {"resourceVersion": "7"}, "status": {"phase": "Running", "plan": {"stages": 2}}}
    ]
    assert after.stored is None
    assert after.status == {"phase": "Running", "plan": {"stages": 2}}
    plain = status.Versioned("run-1", None, "7", {"phase": "Pending", "plan": {"stages": 2}})
    resource: Any = SimpleNamespace(Status=object())
    await status.write_versioned(client, resource, plain, {"phase": "Running", "plan": {"stages": 2}})  # type: ignore[arg-type]
    assert client.bodies[-1] == {"metadata": {"resourceVersion": "7"}, "status": {"phase": "Running"}}


def _cached(version: str, phase: str | None) -> Any:
    meta = SimpleNamespace(name="p", namespace=None, uid="uid-p", resourceVersion=version)
    return SimpleNamespace(metadata=meta, status={"phase": phase, "stages": [{"name": "dev", "at": None}]})


def test_a_cached_status_is_normalised_once_per_version() -> None:
    first = status.Versioned.of_cached(_cached("5", "Running"))
    again = status.Versioned.of_cached(_cached("5", "Running"))
    moved = status.Versioned.of_cached(_cached("6", None))
    assert first.status == {"phase": "Running", "stages": [{"name": "dev"}]}  # nulls dropped
    assert again.status is first.status
    assert moved.status == {"stages": [{"name": "dev"}]}
    assert moved.resource_version == "6"
    assert status.Versioned.of_cached(_cached("5", "Running")).status is not first.status  # latest only
