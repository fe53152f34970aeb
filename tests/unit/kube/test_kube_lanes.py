"""The bulk lane: requests made in bulk wait for one of a bounded number of slots, others go past them,
and a controller's reconciles run in the lane it was made for."""

from __future__ import annotations

import asyncio

import httpx2
import pytest

from fleetwave.kube import client as kubeclient
from fleetwave.kube import lanes
from fleetwave.runtime import controller, queueing


class Held(httpx2.AsyncBaseTransport):
    """Answers every request once `release` is set; counts what is in flight."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.in_flight: list[str] = []
        self.most = 0

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        self.in_flight.append(request.url.path)
        self.most = max(self.most, len(self.in_flight))
        await self.release.wait()
        self.in_flight.remove(request.url.path)
        return httpx2.Response(200, text="ok")


async def _settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


async def _bulk_get(client: httpx2.AsyncClient, path: str) -> int:
    with lanes.bulk():
        return (await client.get(path)).status_code


async def test_bulk_requests_wait_for_a_slot_and_others_go_past_them() -> None:
    held = Held()
    async with httpx2.AsyncClient(
        transport=lanes.Laned(held, lanes.Width(3, 3, 1.0)), base_url="http://api"
    ) as client:
        bulk = [asyncio.create_task(_bulk_get(client, f"/bulk/{i}")) for i in range(8)]
        await _settle()
        assert len(held.in_flight) == 3  # five wait for a slot
        decision = asyncio.create_task(client.get("/decision"))
        await _settle()
        assert "/decision" in held.in_flight
        assert len(held.in_flight) == 4
        held.release.set()
        assert (await decision).status_code == 200
        assert await asyncio.gather(*bulk) == [200] * 8
    assert held.most == 4


async def test_a_task_started_in_bulk_stays_in_bulk() -> None:
    held = Held()
    async with httpx2.AsyncClient(
        transport=lanes.Laned(held, lanes.Width(1, 1, 1.0)), base_url="http://api"
    ) as client:
        with lanes.bulk():
            first = asyncio.create_task(client.get("/a"))
            second = asyncio.create_task(client.get("/b"))
        assert not lanes.in_bulk()
        await _settle()
        assert len(held.in_flight) == 1
        held.release.set()
        await asyncio.gather(first, second)


def test_a_lane_needs_a_slot_and_no_fewer_at_least_than_at_most() -> None:
    with pytest.raises(ValueError, match="at least one slot"):
        lanes.Width(0, 4, 1.0)
    with pytest.raises(ValueError, match="no fewer at least than at most"):
        lanes.Width(8, 4, 1.0)


def test_the_width_narrows_while_answers_are_slow_and_widens_once_they_are_quick_again() -> None:
    width = lanes.Width(least=8, most=32, target=0.3, weight=0.5)
    assert width.slots == 32
    width.answered(0.2)  # the average (0.1) is under half the target: already at its widest
    assert width.slots == 32
    for _ in range(40):
        width.answered(1.0)
    assert width.slots == 8  # never under `least`
    width.answered(0.0)  # average ~0.5: still above the target
    assert width.slots == 8
    width.answered(0.0)  # ~0.25: between half the target and the target, the width holds
    assert width.slots == 8
    width.answered(0.0)  # ~0.125: under half
    assert width.slots == 9
    for _ in range(40):
        width.answered(0.0)
    assert width.slots == 32  # never over `most`


class Clocked(Held):
    """`Held`, whose answers take `seconds` on the lane's clock."""

    def __init__(self, clock: list[float], seconds: float) -> None:
        super().__init__()
        self.clock, self.seconds = clock, seconds

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        self.clock[0] += self.seconds
        return await super().handle_async_request(request)


async def test_slow_answers_narrow_the_lane_for_the_requests_that_wait() -> None:
    now = [0.0]
    held = Clocked(now, seconds=1.0)
    lane = lanes.Laned(held, lanes.Width(least=2, most=4, target=0.25, weight=1.0), clock=lambda: now[0])
    async with httpx2.AsyncClient(transport=lane, base_url="http://api") as client:
        bulk = [asyncio.create_task(_bulk_get(client, f"/bulk/{i}")) for i in range(10)]
        await _settle()
        assert len(held.in_flight) == 4  # as wide as it goes until an answer says otherwise
        held.release.set()
        assert await asyncio.gather(*bulk) == [200] * 10
    assert lane.width.slots == 2
    assert lane.in_flight == 0


async def test_a_failed_request_gives_its_slot_back() -> None:
    class Failing(httpx2.AsyncBaseTransport):
        async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
            raise httpx2.ConnectError("refused")

    lane = lanes.Laned(Failing(), lanes.Width(1, 1, 1.0))
    async with httpx2.AsyncClient(transport=lane, base_url="http://api") as client:
        for _ in range(3):
            with pytest.raises(httpx2.ConnectError):
                await _bulk_get(client, "/bulk")
    assert lane.in_flight == 0


async def test_a_request_cancelled_while_it_waits_leaves_the_slot_to_the_next() -> None:
    held = Held()
    lane = lanes.Laned(held, lanes.Width(1, 1, 1.0))
    async with httpx2.AsyncClient(transport=lane, base_url="http://api") as client:
        first = asyncio.create_task(_bulk_get(client, "/first"))
        await _settle()
        cancelled = asyncio.create_task(_bulk_get(client, "/cancelled"))
        last = asyncio.create_task(_bulk_get(client, "/last"))
        await _settle()
        cancelled.cancel()
        held.release.set()
        assert await first == 200
        assert await last == 200
        await asyncio.gather(cancelled, return_exceptions=True)
    assert lane.in_flight == 0
    assert held.most == 1


async def test_every_async_client_has_a_bulk_lane_below_its_connections() -> None:
    config = kubeclient.config_from_bytes(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1', insecure-skip-tls-verify: true}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\n"
    )
    client = kubeclient.async_client(config)
    try:
        transport = client._client._client._transport  # type: ignore[attr-defined]
        assert isinstance(transport, lanes.Laned)
        assert transport.width.slots == kubeclient.BULK_SLOTS < kubeclient.CONNECTIONS
        assert transport.width.least == kubeclient.BULK_SLOTS_LEAST < kubeclient.BULK_SLOTS
    finally:
        await client.close()


async def _lane_of_reconcile(bulk: bool) -> bool:
    seen: list[bool] = []

    async def reconcile(_key: str) -> controller.Result:
        seen.append(lanes.in_bulk())
        return controller.Result()

    q: queueing.WorkQueue[str] = queueing.WorkQueue()
    ctl = controller.Controller("c", reconcile, queue=q, bulk=bulk)
    ctl.enqueue("k")
    task = asyncio.create_task(ctl.run())
    while not seen:  # noqa: ASYNC110 - yields until the worker has reconciled
        await asyncio.sleep(0)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    return seen[0]


async def test_a_bulk_controllers_reconciles_run_in_the_bulk_lane_and_others_do_not() -> None:
    assert await _lane_of_reconcile(True) is True
    assert await _lane_of_reconcile(False) is False
    assert not lanes.in_bulk()  # the worker's lane does not leak out
