"""The background queue behind Events and notifications: in order, bounded, and a failing item
never stops the ones after it."""

from __future__ import annotations

import asyncio

import pytest

from fleetwave.runtime.background import BackgroundQueue


async def test_items_are_handled_in_order_and_a_failing_one_does_not_stop_the_rest(
    caplog: pytest.LogCaptureFixture,
) -> None:
    done: list[int] = []

    async def handle(item: int) -> None:
        await asyncio.sleep(0)
        if item == 2:
            raise RuntimeError("boom")
        done.append(item)

    queue: BackgroundQueue[int] = BackgroundQueue(handle, what="things")
    for i in range(5):
        assert queue.put(i)
    await queue.flush()
    assert done == [0, 1, 3, 4]
    assert "things: sending one failed" in caplog.text
    await queue.close()


async def test_past_its_bound_an_item_is_dropped_and_counted() -> None:
    gate = asyncio.Event()

    async def handle(_item: int) -> None:
        await gate.wait()

    queue: BackgroundQueue[int] = BackgroundQueue(handle, what="things", max_pending=2)
    accepted = [queue.put(i) for i in range(5)]
    assert accepted == [True, True, False, False, False]
    assert queue.dropped == 3
    gate.set()
    await queue.close(within=5.0)
    assert queue.left == 0
