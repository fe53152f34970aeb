"""The lease loop: work handed over runs on its own thread, answers the caller, is cancelled with
the caller and when the loop stops; a manager with shards refuses one."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from typing import cast

import pytest

from fleetwave.kube.client import AsyncClient
from fleetwave.runtime import manager
from fleetwave.runtime.lease_loop import LeaseLoop


@pytest.fixture
async def lease_loop() -> AsyncIterator[LeaseLoop]:
    started = LeaseLoop(name="test-leases")
    started.start()
    yield started
    await started.stop()


async def _where() -> str:
    await asyncio.sleep(0)
    return threading.current_thread().name


async def test_work_runs_on_the_loops_own_thread_and_answers_the_caller(lease_loop: LeaseLoop) -> None:
    assert await lease_loop.run(_where()) == "test-leases"
    assert threading.current_thread().name != "test-leases"


async def test_an_error_of_the_work_is_the_callers(lease_loop: LeaseLoop) -> None:
    async def fails() -> None:
        raise LookupError("no such lease")

    with pytest.raises(LookupError, match="no such lease"):
        await lease_loop.run(fails())


async def _waits_until_cancelled(started: threading.Event, cancelled: threading.Event) -> None:
    started.set()
    try:
        await asyncio.sleep(3600)
    except asyncio.CancelledError:
        cancelled.set()
        raise


async def test_cancelling_the_caller_cancels_the_work_there(lease_loop: LeaseLoop) -> None:
    started, cancelled = threading.Event(), threading.Event()
    caller = asyncio.create_task(lease_loop.run(_waits_until_cancelled(started, cancelled)))
    assert await asyncio.to_thread(started.wait, 5)
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    assert await asyncio.to_thread(cancelled.wait, 5), "the work went on after its caller was cancelled"


async def test_stopping_cancels_what_still_runs_and_ends_the_thread() -> None:
    lease_loop = LeaseLoop()
    lease_loop.start()
    started, cancelled = threading.Event(), threading.Event()
    caller = asyncio.create_task(lease_loop.run(_waits_until_cancelled(started, cancelled)))
    assert await asyncio.to_thread(started.wait, 5)
    await lease_loop.stop()
    assert cancelled.is_set()
    assert lease_loop.thread is not None
    assert not lease_loop.thread.is_alive()
    with pytest.raises(asyncio.CancelledError):
        await caller


async def test_work_handed_over_after_stop_is_refused_not_lost() -> None:
    lease_loop = LeaseLoop()
    lease_loop.start()
    await lease_loop.stop()
    work = _where()
    with pytest.raises(RuntimeError, match="not running"):
        await lease_loop.run(work)
    assert work.cr_frame is None, "the refused coroutine is closed, not left never awaited"


def test_a_manager_with_shards_refuses_a_lease_loop() -> None:
    with pytest.raises(ValueError, match="shard"):
        manager.Manager(
            cast(AsyncClient, object()),
            namespace="fleetwave-system",
            leader_election=True,
            shard_count=2,
            lease_loop=LeaseLoop(),
        )
