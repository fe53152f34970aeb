"""A client keeps its idle connections to a real API server past httpx's 5 s default, and beyond its
20: a member delivered to, probed or judged every few seconds, or a burst of writes after a burst,
pays no new TCP and TLS handshake each time."""

from __future__ import annotations

import asyncio
from typing import Any

from lightkube.resources.core_v1 import Namespace

from fleetwave.kube import client as kubeclient
from fleetwave.local import fleet


def _connections(client: kubeclient.AsyncClient) -> list[Any]:
    # lightkube's client -> its httpx client -> our lanes -> measured -> fenced -> httpcore's pool
    return list(client._client._client._transport.inner.inner.inner._pool.connections)


async def test_an_idle_connection_is_used_again_after_six_seconds(local_fleet: fleet.FleetState) -> None:
    config = kubeclient.config_from_file(local_fleet.cluster(fleet.MANAGEMENT).kubeconfig)
    client = kubeclient.async_client(config)
    try:
        await client.get(Namespace, "default")
        first = _connections(client)
        assert len(first) == 1
        await asyncio.sleep(6)
        await client.get(Namespace, "default")
        assert _connections(client) == first  # the same connection: no handshake
    finally:
        await client.close()


async def test_a_burst_of_requests_keeps_every_connection_it_opened(local_fleet: fleet.FleetState) -> None:
    """40 requests at once (a pass writing a stage's summaries, 16 workers writing status) open 40
    connections; the next burst finds them all, and pays no handshake."""
    config = kubeclient.config_from_file(local_fleet.cluster(fleet.MANAGEMENT).kubeconfig)
    client = kubeclient.async_client(config)
    try:
        await asyncio.gather(*(client.get(Namespace, "default") for _ in range(40)))
        first = {id(c) for c in _connections(client)}
        assert len(first) > 20  # httpx's default keeps 20 and closes the rest
        await asyncio.gather(*(client.get(Namespace, "default") for _ in range(40)))
        assert {id(c) for c in _connections(client)} == first
    finally:
        await client.close()
