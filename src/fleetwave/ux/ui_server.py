"""Start and stop the `fleetwave ui` server: the board feed on the user's kubeconfig, the aiohttp app,
a listening socket (port 0 picks a free one). Used by the CLI and by the browser tests."""

from __future__ import annotations

import ipaddress
import secrets
import socket
from dataclasses import dataclass

from aiohttp import web

from fleetwave.kube import client as kubeclient
from fleetwave.kube.client import AsyncClient, KubeConfig
from fleetwave.ux import approving, webapp
from fleetwave.ux.board_feed import BoardFeed


def is_loopback(address: str) -> bool:
    if address == "localhost":
        return True
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


def server_of(config: KubeConfig) -> str:
    """The API server the kubeconfig's current context points at (shown on the page)."""
    try:
        single = config.get()
    except Exception:  # an odd kubeconfig only loses the header line
        return ""
    return str(single.cluster.server) if single is not None else ""


def approver(config: KubeConfig) -> webapp.Approver:
    """Approvals through a fresh synchronous client on the user's kubeconfig: the same requests as
    `fleetwave approve`, so the API server judges the user exactly as it would there."""

    def approve(kind: str, namespace: str | None, name: str, stage: str) -> str:
        with kubeclient.client(config) as client:
            if kind == "ClusterPromotion":
                return approving.approve_promotion(client, name, stage)
            return approving.approve_run(client, name, namespace, stage)

    return approve


@dataclass
class Running:
    url: str
    feed: BoardFeed
    runner: web.AppRunner
    client: AsyncClient

    async def stop(self) -> None:
        await self.runner.cleanup()
        await self.feed.stop()
        await self.client.close()


def _listen(address: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((address, port))
        sock.listen(128)
    except BaseException:
        sock.close()
        raise
    return sock


async def start(config: KubeConfig, *, address: str = "127.0.0.1", port: int = 0) -> Running:
    """Serve on `address`:`port`; OSError when it cannot listen there."""
    sock = _listen(address, port)  # bound first: the app's Host check names the real port
    bound = int(sock.getsockname()[1])
    client = kubeclient.async_client(config)
    feed = BoardFeed(client, server=server_of(config))
    try:
        await feed.start()
        token = secrets.token_urlsafe(32)
        app = webapp.make_app(feed, approver(config), token=token, hosts=webapp.allowed_hosts(address, bound))
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await runner.setup()
        await web.SockSite(runner, sock).start()
    except BaseException:
        sock.close()
        await feed.stop()
        await client.close()
        raise
    host = f"[{address}]" if ":" in address else address
    return Running(f"http://{host}:{bound}/", feed, runner, client)
