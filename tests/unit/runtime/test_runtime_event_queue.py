"""The event recorder queues Events and writes them in the background, in order, bounded."""

from __future__ import annotations

import asyncio
from typing import Any

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
