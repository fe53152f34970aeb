"""A client keeps an idle connection to a real API server past httpx's 5 s default: a member
delivered to, probed or judged every few seconds pays no new TCP and TLS handshake each time."""

from __future__ import annotations

import asyncio
from typing import Any

from lightkube.resources.core_v1 import Namespace

from fleetwave.kube import client as kubeclient
from fleetwave.kube import internals
from fleetwave.local import fleet


def _connections(client: kubeclient.AsyncClient) -> list[Any]:
    # lightkube's client -> its httpx client -> our transport -> httpcore's pool
    return list(client._client._client._transport._pool.connections)


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


async def test_the_controllers_request_client_speaks_http2(local_fleet: fleet.FleetState) -> None:
    config = kubeclient.config_from_file(local_fleet.cluster(fleet.MANAGEMENT).kubeconfig)
    client = kubeclient.async_client(config, http2=True)
    try:
        answer = await internals.raw_http(client).get("/version")
        assert answer.http_version == "HTTP/2"  # every request on one connection, no pool to walk
        await client.get(Namespace, "default")
        assert len(_connections(client)) == 1
    finally:
        await client.close()
