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
    async with httpx2.AsyncClient(transport=lanes.Laned(held, 3), base_url="http://api") as client:
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
    async with httpx2.AsyncClient(transport=lanes.Laned(held, 1), base_url="http://api") as client:
        with lanes.bulk():
            first = asyncio.create_task(client.get("/a"))
            second = asyncio.create_task(client.get("/b"))
        assert not lanes.in_bulk()
        await _settle()
        assert len(held.in_flight) == 1
        held.release.set()
        await asyncio.gather(first, second)


def test_a_lane_needs_a_slot() -> None:
    with pytest.raises(ValueError, match="at least one slot"):
        lanes.Laned(Held(), 0)


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
        assert transport._slots._value == kubeclient.BULK_SLOTS < kubeclient.CONNECTIONS
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
