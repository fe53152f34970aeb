"""httpcore's network streams on asyncio's own transports instead of anyio's.

On asyncio, httpcore reads and writes through anyio, and anyio does TLS itself, in Python: an
`ssl.SSLObject` over memory buffers, a Python-level loop around every TLS record. At 100 member
registrations anyio and ssl were a third of the controller's CPU (ADR 0068, addendum bc82adb). An asyncio
transport does TLS inside the event loop — in C under uvloop, which the controller runs on (ADR
0093) — and hands the stream whole reads. httpcore documents its network backend as pluggable;
this is one, with httpcore's exceptions, timeouts and idle-connection probe kept.
"""

# httpcore's interface passes each call its timeout (ASYNC109 would have the caller wrap it).
# ruff: noqa: ASYNC109

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import httpcore2

# httpcore's own type for a socket option: (level, option, value) or (level, option, None, length).
SocketOption = tuple[int, int, int] | tuple[int, int, bytes | bytearray] | tuple[int, int, None, int]


class AsyncioStream(httpcore2.AsyncNetworkStream):
    """One connection: a StreamReader fed by the transport, and its StreamWriter."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        try:
            async with asyncio.timeout(timeout):
                return await self._reader.read(max_bytes)
        except TimeoutError as exc:
            raise httpcore2.ReadTimeout(f"no data within {timeout}s") from exc
        except OSError as exc:  # a reset, a TLS error (ssl.SSLError is an OSError)
            raise httpcore2.ReadError(str(exc) or type(exc).__name__) from exc

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if not buffer:
            return
        # A closing transport drops what is written to it without a word: say so instead.
        if self._writer.transport.is_closing():
            raise httpcore2.WriteError("connection closed")
        try:
            async with asyncio.timeout(timeout):
                self._writer.write(buffer)
                await self._writer.drain()
        except TimeoutError as exc:
            raise httpcore2.WriteTimeout(f"not sent within {timeout}s") from exc
        except OSError as exc:
            raise httpcore2.WriteError(str(exc) or type(exc).__name__) from exc

    async def aclose(self) -> None:
        # At once, without the TLS close_notify exchange (anyio's close, as httpcore uses it, skips
        # it too): a close that waits on the peer outlives a loop that stops right after it, and
        # leaves its socket to the garbage collector (ResourceWarning: unclosed transport).
        self._writer.transport.abort()
        await asyncio.sleep(0)  # the socket is closed by the callback abort() schedules

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        try:
            await self._writer.start_tls(
                ssl_context, server_hostname=server_hostname, ssl_handshake_timeout=timeout
            )
        except TimeoutError as exc:
            await self.aclose()
            raise httpcore2.ConnectTimeout(f"TLS handshake not done within {timeout}s") from exc
        except OSError as exc:
            await self.aclose()
            raise httpcore2.ConnectError(str(exc) or type(exc).__name__) from exc
        return self

    def get_extra_info(self, info: str) -> Any:
        if info == "ssl_object":
            return self._writer.get_extra_info("ssl_object")
        if info == "client_addr":
            return self._writer.get_extra_info("sockname")
        if info == "server_addr":
            return self._writer.get_extra_info("peername")
        if info == "socket":
            return self._writer.get_extra_info("socket")
        if info == "is_readable":
            # httpcore asks whether an idle connection has something to read, which on an idle
            # HTTP/1.1 connection can only be the server closing it. The transport reads as data
            # comes, so the socket itself is always drained: its end shows on the reader.
            return self._reader.at_eof() or self._writer.transport.is_closing()
        return None


class ClosingProtocol(asyncio.StreamReaderProtocol):
    """A stream protocol whose transport closes once the peer has closed its side.

    asyncio's own keeps a plain connection half open on the peer's EOF, and tells a TLS transport
    apart only once `start_tls` has returned: an EOF that comes during the switch (a server closing
    right after the handshake) makes the TLS transport log a warning. An HTTP client has nothing
    to send on a connection the server has closed, so the answer is the same for both."""

    def eof_received(self) -> bool:
        super().eof_received()
        return False


class AsyncioBackend(httpcore2.AsyncNetworkBackend):
    """Connections opened by the running asyncio loop (uvloop's when it runs on uvloop)."""

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[SocketOption] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        local = (local_address, 0) if local_address else None

        def opening(protocol: Callable[[], asyncio.Protocol]) -> Awaitable[Any]:
            return asyncio.get_running_loop().create_connection(protocol, host, port, local_addr=local)

        return await _connected(opening, f"{host}:{port}", timeout, socket_options)

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[SocketOption] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        def opening(protocol: Callable[[], asyncio.Protocol]) -> Awaitable[Any]:
            return asyncio.get_running_loop().create_unix_connection(protocol, path)

        return await _connected(opening, path, timeout, socket_options)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


async def _connected(
    opening: Callable[[Callable[[], asyncio.Protocol]], Awaitable[Any]],
    where: str,
    timeout: float | None,
    options: Iterable[SocketOption] | None,
) -> AsyncioStream:
    """The stream `opening` connects (given the protocol factory; asyncio's `open_connection` with
    our protocol), with httpcore's exceptions for what goes wrong."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(loop=loop)
    protocol = ClosingProtocol(reader, loop=loop)
    try:
        async with asyncio.timeout(timeout):
            transport, _ = await opening(lambda: protocol)
    except TimeoutError as exc:
        raise httpcore2.ConnectTimeout(f"{where} not connected within {timeout}s") from exc
    except OSError as exc:
        raise httpcore2.ConnectError(str(exc) or type(exc).__name__) from exc
    writer = asyncio.StreamWriter(transport, protocol, reader, loop)
    sock = writer.get_extra_info("socket")
    for option in options or ():
        sock.setsockopt(*option)
    return AsyncioStream(reader, writer)
