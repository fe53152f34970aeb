"""A tiny HTTP/1.1 server on the event loop for /metrics and the health probes.

Only GET of a fixed set of paths is needed, so a few lines over asyncio streams replace a web
framework; it runs on the same loop as the controllers, so a wedged loop also fails /healthz.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal

log = logging.getLogger(__name__)

Page = tuple[int, str, bytes]
_REASONS = {200: "OK", 404: "Not Found", 405: "Method Not Allowed", 503: "Service Unavailable"}
_READ_TIMEOUT = 5.0


@dataclass(frozen=True, slots=True)
class Endpoint:
    render: Callable[[], Page]
    port: Literal["metrics", "health"]


class ProbeServer:
    """Serves each endpoint on its port; equal metrics and health ports share one listener."""

    def __init__(
        self, host: str, metrics_port: int, health_port: int, endpoints: dict[str, Endpoint]
    ) -> None:
        self.host = host
        self._wanted = {"metrics": metrics_port, "health": health_port}
        self._endpoints = endpoints
        self._servers: list[asyncio.Server] = []
        self.ports: dict[str, int] = {}

    def url(self, path: str) -> str:
        return f"http://{self.host}:{self.ports[self._endpoints[path].port]}{path}"

    async def start(self) -> None:
        roles = ("metrics", "health") if self._wanted["metrics"] != self._wanted["health"] else ("metrics",)
        for role in roles:
            served = frozenset(p for p, e in self._endpoints.items() if e.port == role or len(roles) == 1)
            server = await asyncio.start_server(self._handler(served), self.host, self._wanted[role])
            self._servers.append(server)
            self.ports[role] = server.sockets[0].getsockname()[1]
        if len(roles) == 1:
            self.ports["health"] = self.ports["metrics"]

    async def stop(self) -> None:
        for server in self._servers:
            server.close()
            await server.wait_closed()
        self._servers.clear()

    def _handler(
        self, served: frozenset[str]
    ) -> Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]:
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await self._handle(reader, writer, served)

        return handle

    async def _handle(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, served: frozenset[str]
    ) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), _READ_TIMEOUT)
            method, target, *_ = head.split(b"\r\n", 1)[0].decode("latin-1").split(" ")
            status, ctype, body = self._route(method, target.split("?", 1)[0], served)
            writer.write(
                f"HTTP/1.1 {status} {_REASONS.get(status, '')}\r\nContent-Type: {ctype}\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode("latin-1")
                + body
            )
            await writer.drain()
        except (TimeoutError, ValueError, ConnectionError, asyncio.IncompleteReadError) as exc:
            log.debug("probe request dropped: %s", exc)
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    def _route(self, method: str, path: str, served: frozenset[str]) -> Page:
        if path not in served:
            return 404, "text/plain", b"not found"
        if method not in ("GET", "HEAD"):
            return 405, "text/plain", b"method not allowed"
        return self._endpoints[path].render()
