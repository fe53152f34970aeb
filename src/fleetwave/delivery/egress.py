"""The forward proxy every helm process fetches through (ADR 0125).

helm resolves a repository's name itself, follows the chart URLs an `index.yaml` lists and the
redirects its getter meets, so a check made before helm runs cannot see where it finally connects
(ADR 0096). helm honours `HTTPS_PROXY`/`HTTP_PROXY` for every such request, so it is given this
proxy, which resolves each destination once, checks every address with the rules of
`promapi.guards` (link-local, cloud metadata and unspecified addresses never, loopback only with the
operator's opt-in) and connects to a checked address itself: a name that changes its answer
between two lookups cannot lead helm anywhere the rules forbid.

Two request forms, as Go's HTTP client sends them through a proxy:
- `CONNECT host:port` (https, and registries): a tunnel to one destination, TLS end to end;
- an absolute-form request (`GET http://host/path`): forwarded as one request with
  `Connection: close` both ways, so a connection never carries a second request to another host.

The proxy runs on its own thread and event loop, one per process that runs helm, listening on
127.0.0.1 only: a slow repository never holds the controller's loop. Heads are read within a bound
(16 KiB, 10 s), connections are bounded in number and closed when idle.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections.abc import Awaitable
from dataclasses import dataclass
from urllib.parse import SplitResult, urlsplit

from fleetwave.promapi import guards

_HEAD_LIMIT = 16 * 1024  # a request head helm sends is a few hundred bytes
_RESPONSE_HEAD_LIMIT = 64 * 1024
_HEAD_SECONDS = 10.0
_RESOLVE_SECONDS = 10.0
_CONNECT_SECONDS = 10.0
_IDLE_SECONDS = 120.0  # no byte either way for this long: the connection is closed
_MAX_CONNECTIONS = 128
_CHUNK = 64 * 1024
# Headers that concern one hop only: never passed on (the proxy sets its own Connection).
_HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-connection",
        "proxy-authorization",
        "proxy-authenticate",
        "te",
        "trailer",
        "upgrade",
        "expect",
    }
)


class Refusal(Exception):
    """A request the proxy answers itself with `status` and a one-line reason helm shows."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status, self.reason = status, reason

    def response(self) -> bytes:
        # Go reports a refused CONNECT by its reason phrase alone, so the reason is the whole message.
        text = "".join(c if 32 <= ord(c) < 127 else "?" for c in f"fleetwave egress: {self.reason}")
        return f"HTTP/1.1 {self.status} {text}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".encode()


@dataclass(frozen=True, slots=True)
class Head:
    """A request head: its line's three parts and its header fields, in order."""

    method: str
    target: str
    version: str
    fields: tuple[tuple[str, str], ...]

    def field(self, name: str) -> str | None:
        return next((v for k, v in self.fields if k.lower() == name), None)


_Streams = tuple[asyncio.StreamReader, asyncio.StreamWriter]


@dataclass(frozen=True, slots=True)
class Destination:
    host: str
    port: int
    path: str = ""  # the origin-form target of a forwarded request; "" for a tunnel


def parse_head(data: bytes) -> Head:
    """The request head (without its blank line); Refusal(400) when it is not one."""
    lines = data.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise Refusal(400, "not an HTTP/1.x request line")
    fields = []
    for line in lines[1:]:
        name, colon, value = line.partition(":")
        if not colon or not name or name != name.strip() or line[:1] in (" ", "\t"):
            raise Refusal(400, "a malformed header field")
        fields.append((name, value.strip()))
    return Head(parts[0], parts[1], parts[2], tuple(fields))


def destination(head: Head) -> Destination:
    """Where the request goes: a CONNECT's authority, or an absolute http:// URL's host and path."""
    if head.method == "CONNECT":
        where = urlsplit(f"//{head.target}")
        if where.path or where.query or where.username:
            raise Refusal(400, "CONNECT names host:port only")
        return Destination(_host(where.hostname), _port(where, None))
    where = urlsplit(head.target)
    if where.scheme != "http" or where.username or where.password:
        raise Refusal(400, "only absolute http:// URLs without credentials are forwarded")
    path = (where.path or "/") + (f"?{where.query}" if where.query else "")
    return Destination(_host(where.hostname), _port(where, 80), path)


def _host(host: str | None) -> str:
    if not host or any(c.isspace() or c in "/\\@" for c in host):
        raise Refusal(400, "no valid host")
    return host


def _port(where: SplitResult, default: int | None) -> int:
    try:
        port = where.port or default
    except ValueError:
        port = None
    if port is None or not 0 < port < 65536:
        raise Refusal(400, "no valid port")
    return int(port)


def body_length(head: Head) -> int:
    """How many body bytes follow the head; Refusal for a body the proxy does not frame."""
    if head.field("transfer-encoding") is not None:
        raise Refusal(501, "a chunked request body is not forwarded")
    length = head.field("content-length")
    if length is None:
        return 0
    if not length.isdigit() or int(length) > 1024 * 1024:
        raise Refusal(413, "a request body over 1 MiB is not forwarded")
    return int(length)


def upstream_head(head: Head, path: str) -> bytes:
    """The forwarded request's head: origin-form, its hop-by-hop fields dropped, one request only."""
    kept = [f"{k}: {v}" for k, v in head.fields if k.lower() not in _HOP_BY_HOP]
    return "\r\n".join([f"{head.method} {path} {head.version}", *kept, "Connection: close", "", ""]).encode(
        "latin-1"
    )


def response_head(data: bytes) -> bytes:
    """The upstream's response head with `Connection: close`, so the client never reuses the
    connection (it would be carried to this upstream whatever host it next asks for)."""
    lines = data.decode("latin-1").split("\r\n")
    kept = [lines[0], *(x for x in lines[1:] if x.partition(":")[0].strip().lower() not in _HOP_BY_HOP)]
    return "\r\n".join([*kept, "Connection: close", "", ""]).encode("latin-1")


async def checked_addresses(host: str, port: int) -> list[str]:
    """Every address `host` resolves to, each allowed by the rules; Refusal(403) when one is not
    (not raced: the proxy connects to one of exactly these), Refusal(502) when it does not resolve."""
    literal = guards.ip_literal(host)
    if literal is not None:
        problem = guards.address_problem(literal)
        if problem:
            raise Refusal(403, problem)
        return [str(literal)]
    try:
        return await asyncio.to_thread(guards.resolve_host, host, port, timeout=_RESOLVE_SECONDS)
    except guards.Refused as e:
        raise Refusal(403, str(e)) from None
    except guards.Unresolved as e:
        raise Refusal(502, str(e)) from None


async def _open(host: str, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A connection to a checked address of `host`, the first that answers."""
    failed = ""
    for address in await checked_addresses(host, port):
        try:
            return await asyncio.wait_for(
                asyncio.open_connection(address, port, limit=_RESPONSE_HEAD_LIMIT), _CONNECT_SECONDS
            )
        except (OSError, TimeoutError) as e:
            failed = f"{host}:{port} ({address}): {type(e).__name__} {e}".strip()
    raise Refusal(502, f"cannot connect to {failed}")


async def _read_head(reader: asyncio.StreamReader, limit: int) -> bytes:
    """The bytes up to the blank line that ends a head (without it), within `limit` and the time
    bound; Refusal when the head is longer, slower or cut short."""
    try:
        data = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), _HEAD_SECONDS)
    except asyncio.LimitOverrunError:
        raise Refusal(431, f"a head over {limit // 1024} KiB") from None
    except (asyncio.IncompleteReadError, TimeoutError, ConnectionError):
        raise Refusal(400, "the head did not arrive") from None
    if len(data) > limit:
        raise Refusal(431, f"a head over {limit // 1024} KiB")
    return data[:-4]


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Copy until end of stream or `_IDLE_SECONDS` without a byte."""
    with contextlib.suppress(ConnectionError, TimeoutError):
        while chunk := await asyncio.wait_for(reader.read(_CHUNK), _IDLE_SECONDS):
            writer.write(chunk)
            await writer.drain()


async def _until_either_ends(*flows: Awaitable[None]) -> None:
    tasks = [asyncio.ensure_future(f) for f in flows]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def _tunnel(client: _Streams, where: Destination) -> None:
    reader, writer = await _open(where.host, where.port)
    try:
        client[1].write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        await client[1].drain()
        await _until_either_ends(_pipe(client[0], writer), _pipe(reader, client[1]))
    finally:
        writer.close()


async def _forward(client: _Streams, head: Head, where: Destination) -> None:
    body = await asyncio.wait_for(client[0].readexactly(body_length(head)), _HEAD_SECONDS)
    reader, writer = await _open(where.host, where.port)
    try:
        writer.write(upstream_head(head, where.path) + body)
        await writer.drain()
        answer = await _read_head(reader, _RESPONSE_HEAD_LIMIT)
        client[1].write(response_head(answer))
        # Bytes the client sends now would be a second request: it ends the exchange instead.
        await _until_either_ends(_pipe(reader, client[1]), _wait_for_eof(client[0]))
    finally:
        writer.close()


async def _wait_for_eof(reader: asyncio.StreamReader) -> None:
    with contextlib.suppress(ConnectionError):
        await reader.read(1)


async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """One client connection: its one request tunnelled or forwarded, or answered with the refusal."""
    try:
        head = parse_head(await _read_head(reader, _HEAD_LIMIT))
        where = destination(head)
        if head.method == "CONNECT":
            await _tunnel((reader, writer), where)
        else:
            await _forward((reader, writer), head, where)
    except Refusal as refusal:
        await refuse(reader, writer, refusal)
    except (ConnectionError, TimeoutError, asyncio.IncompleteReadError):
        pass  # either side went away: nothing to answer
    finally:
        writer.close()


async def refuse(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, refusal: Refusal) -> None:
    """Answer with the refusal. What the client is still sending is then read and dropped for a
    moment (at most 256 KiB, 1 s): closing with unread bytes would reset the connection before the
    client reads why."""
    with contextlib.suppress(ConnectionError, TimeoutError):
        writer.write(refusal.response())
        await writer.drain()
        writer.write_eof()
        async with asyncio.timeout(1.0):
            dropped = 0
            while dropped < 256 * 1024 and (chunk := await reader.read(_CHUNK)):
                dropped += len(chunk)


class EgressProxy:
    """The proxy on a thread and event loop of its own, listening on 127.0.0.1 (an ephemeral
    port); `url` is what helm's HTTPS_PROXY and HTTP_PROXY are set to."""

    def __init__(self, max_connections: int = _MAX_CONNECTIONS) -> None:
        self._loop = asyncio.new_event_loop()
        self._slots, self.max_connections = max_connections, max_connections
        self._ready = threading.Event()
        self._server: asyncio.Server | None = None
        self.handled = 0  # connections served, refused ones included
        self._thread = threading.Thread(target=self._run, name="helm-egress-proxy", daemon=True)
        self.url = ""

    @property
    def open_connections(self) -> int:
        return self.max_connections - self._slots

    def start(self) -> EgressProxy:
        self._thread.start()
        self._ready.wait()
        if self._server is None:
            raise RuntimeError("the egress proxy did not start")
        return self

    def stop(self) -> None:
        """Stop listening, end every connection and close the loop (tests; a process's shared
        proxy lives as long as the process)."""
        asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(timeout=5)
        self._thread.join(timeout=5)
        self._loop.close()

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        current = asyncio.current_task()
        pending = [t for t in asyncio.all_tasks() if t is not current]
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        self._loop.call_soon(self._loop.stop)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._server = self._loop.run_until_complete(
                asyncio.start_server(self._admit, "127.0.0.1", 0, limit=_HEAD_LIMIT)
            )
            port = self._server.sockets[0].getsockname()[1]
            self.url = f"http://127.0.0.1:{port}"
        finally:
            self._ready.set()
        self._loop.run_forever()

    async def _admit(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._slots <= 0:
            await refuse(reader, writer, Refusal(503, "too many connections at once"))
            writer.close()
            return
        self._slots -= 1
        self.handled += 1
        try:
            await handle(reader, writer)
        finally:
            self._slots += 1


_shared: dict[int, EgressProxy] = {}  # by process id: a forked child starts its own
_shared_lock = threading.Lock()


def shared() -> EgressProxy:
    """This process's proxy, started the first time helm needs it."""
    with _shared_lock:
        proxy = _shared.get(os.getpid())
        if proxy is None:
            proxy = _shared[os.getpid()] = EgressProxy().start()
        return proxy


def helm_environment(member_host: str) -> dict[str, str]:
    """The variables that send helm's fetches through the proxy. The member's API server is left
    out (`NO_PROXY`): helm reaches it with the member's credentials, as the controller itself does.
    Go never sends a loopback literal or `localhost` to a proxy; ADR 0125 says what that leaves."""
    url = shared().url
    environment = {"HTTPS_PROXY": url, "HTTP_PROXY": url}
    if member_host:
        environment["NO_PROXY"] = member_host
    return environment
