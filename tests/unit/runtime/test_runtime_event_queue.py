"""The event recorder queues Events and writes them in the background, in order, bounded."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import httpx2
import pytest

from fleetwave.kube import fence, lanes, ops
from fleetwave.runtime import events

REF = events.ObjectRef("fleetwave.io/v1alpha1", "ClusterPromotion", "web", None, "uid-1")


class _Api:
    """Records the Events created; `gate` holds every write until it is set."""

    def __init__(self) -> None:
        self.created: list[str] = []
        self.gate = asyncio.Event()

    async def create(self, event: Any) -> Any:
        await self.gate.wait()
        self.created.append(event.reason)
        return event


async def test_record_returns_before_the_write_and_flush_waits_for_it_in_order() -> None:
    api = _Api()
    recorder = events.EventRecorder(api)  # type: ignore[arg-type]
    for reason in ("StageStarted", "StageDelivered", "StageSucceeded"):
        await recorder.record(REF, events.EventType.NORMAL, reason, "m")
    await asyncio.sleep(0)
    assert api.created == []  # nothing written yet: the reconcile did not wait for the API server
    api.gate.set()
    await recorder.flush()
    assert api.created == ["StageStarted", "StageDelivered", "StageSucceeded"]
    await recorder.close()


async def test_past_the_bound_events_are_dropped_and_counted() -> None:
    api = _Api()
    recorder = events.EventRecorder(api, max_pending=2)  # type: ignore[arg-type]
    for i in range(5):
        await recorder.record(REF, events.EventType.NORMAL, f"R{i}", "m")
    assert recorder.dropped == 3  # R0 and R1 wait in the queue
    await asyncio.sleep(0)  # the writer takes R0 and waits on the gate: a place is free again
    await recorder.record(REF, events.EventType.NORMAL, "R5", "m")
    assert recorder.dropped == 3
    api.gate.set()
    await recorder.close()
    assert api.created == ["R0", "R1", "R5"]


async def test_close_gives_up_within_its_limit_on_a_write_that_hangs() -> None:
    api = _Api()  # the gate is never set
    recorder = events.EventRecorder(api)  # type: ignore[arg-type]
    await recorder.record(REF, events.EventType.WARNING, "Stuck", "m")
    await asyncio.wait_for(recorder.close(within=0.05), 5)
    assert api.created == []


class _Counting:
    """Creates and count bumps, as the API server would keep them; `gone` Events answer 404."""

    def __init__(self) -> None:
        self.creates: list[tuple[str, int]] = []  # (reason, count)
        self.bumps: list[tuple[str, int]] = []  # (event name, count)
        self.gone: set[str] = set()

    async def create(self, event: Any) -> Any:
        self.creates.append((event.reason, event.count))
        return event

    async def patch(self, _resource: Any, name: str, body: dict[str, Any], **_: Any) -> Any:
        if name in self.gone:
            request = httpx2.Request("PATCH", f"https://127.0.0.1/api/v1/namespaces/default/events/{name}")
            raise ops.StatusError("gone", request=request, response=httpx2.Response(404, request=request))
        self.bumps.append((name, body["count"]))
        return body


async def _record(recorder: events.EventRecorder, reason: str, times: int = 1) -> None:
    for _ in range(times):
        await recorder.record(REF, events.EventType.NORMAL, reason, "stage dev started")


async def test_repeats_are_held_back_and_written_as_one_count_bump() -> None:
    api = _Counting()
    recorder = events.EventRecorder(api, bump_after=0.05)  # type: ignore[arg-type]
    await _record(recorder, "StageStarted", 4)
    await _settle()
    assert api.creates == [("StageStarted", 1)]  # the first occurrence at once
    assert api.bumps == []  # the three repeats wait for their bump
    await asyncio.sleep(0.1)
    await _settle()
    [(name, count)] = api.bumps
    assert name.startswith("web.")
    assert count == 4
    await _record(recorder, "StageStarted")
    await recorder.close()  # what is held back is written at shutdown
    assert api.bumps[-1] == (name, 5)


async def test_flush_writes_the_repeats_held_back() -> None:
    api = _Counting()
    recorder = events.EventRecorder(api, bump_after=3600)  # type: ignore[arg-type]
    await _record(recorder, "StageStarted", 3)
    await recorder.flush()
    assert [c for _, c in api.bumps] == [3]
    await recorder.close()
    assert len(api.bumps) == 1  # nothing left to write


async def test_an_expired_event_is_created_again_with_the_repeats_it_missed() -> None:
    api = _Counting()
    recorder = events.EventRecorder(api, bump_after=3600)  # type: ignore[arg-type]
    await _record(recorder, "StageStarted")
    await _settle()
    api.gone = _Everything()  # the Event expired: every bump below answers 404
    await _record(recorder, "StageStarted", 2)
    await recorder.flush()
    assert api.creates == [("StageStarted", 1), ("StageStarted", 2)]


async def test_an_event_evicted_from_memory_still_has_its_repeats_written() -> None:
    api = _Counting()
    recorder = events.EventRecorder(api, bump_after=3600, cache_size=1)  # type: ignore[arg-type]
    await _record(recorder, "StageStarted", 2)
    await _record(recorder, "StageSucceeded")  # evicts StageStarted, which has a repeat held back
    await _settle()
    assert [c for _, c in api.bumps] == [2]
    await recorder.close()


class _Everything(set[str]):
    def __contains__(self, _item: object) -> bool:
        return True


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


class _Fenced:
    """Every create refused by the fence, as for a replica whose lease is not confirmed."""

    async def create(self, event: Any) -> Any:
        raise fence.FencedWrite("POST request refused: this replica's lease is not confirmed")


async def test_an_event_the_fence_refused_is_not_warned_about_again(caplog: pytest.LogCaptureFixture) -> None:
    recorder = events.EventRecorder(_Fenced())  # type: ignore[arg-type]
    caplog.set_level("DEBUG", logger=events.__name__)
    for reason in ("StageDelivered", "StageSucceeded"):
        await recorder.record(REF, events.EventType.NORMAL, reason, "m")
    await recorder.close()
    lines = [r for r in caplog.records if "not recorded" in r.getMessage()]
    assert [r.levelname for r in lines] == ["DEBUG", "DEBUG"]  # the fence warned, once


class _Lanes:
    """Records, for each Event created and each count bumped, whether it was sent in the bulk lane."""

    def __init__(self) -> None:
        self.in_bulk: list[bool] = []

    async def create(self, event: Any) -> Any:
        self.in_bulk.append(lanes.in_bulk())
        return event

    async def patch(self, _resource: Any, _name: str, _body: dict[str, Any], **_: Any) -> Any:
        self.in_bulk.append(lanes.in_bulk())
        return None


@pytest.mark.parametrize("recorded_in_bulk", [False, True])
async def test_event_writes_take_the_bulk_lane_whoever_recorded_the_first(recorded_in_bulk: bool) -> None:
    """The writer task is started by the first `record` and inherits its caller's lane: a promotion
    (outside the bulk lane) recording first must not put every later Event past the bulk work."""
    api = _Lanes()
    recorder = events.EventRecorder(api)  # type: ignore[arg-type]
    with lanes.bulk() if recorded_in_bulk else contextlib.nullcontext():
        await recorder.record(REF, events.EventType.NORMAL, "StageStarted", "m")
    await recorder.record(REF, events.EventType.NORMAL, "StageStarted", "m")  # a repeat: a count bump
    await recorder.flush()
    await recorder.close()
    assert api.in_bulk == [True, True]
