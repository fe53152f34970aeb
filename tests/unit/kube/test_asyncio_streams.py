"""httpcore's asyncio network backend (`kube/asyncio_streams.py`) against a real TLS server on
loopback: requests, connection reuse, a server closing an idle connection, timeouts, refused
connections and certificates, on the default loop and on uvloop (the controller's)."""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx2
import pytest
import uvloop

from fleetwave.kube import client as kubeclient
from fleetwave.kube import internals
from fleetwave.kube.asyncio_streams import AsyncioBackend
from fleetwave.local import pki


@dataclass
class Server:
    """An HTTP/1.1 server over TLS: answers each request with `body`, keeps the connection open
    unless `close_after_response`, never answers when `silent`."""

    port: int = 0
    body: bytes = b"hello"
    close_after_response: bool = False
    silent: bool = False
    connections: int = 0
    requests: list[bytes] = field(default_factory=list)
    done: asyncio.Event = field(default_factory=asyncio.Event)  # set when the test is over

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                self.requests.append(head.split(b"\r\n", 1)[0])
                if self.silent:
                    await self.done.wait()
                    break
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(self.body), self.body))
                await writer.drain()
                if self.close_after_response:
                    break
        except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError):
            pass
        finally:
            writer.close()


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> pki.Pki:
    return pki.generate(tmp_path_factory.mktemp("pki"), now=dt.datetime.now(dt.UTC))


def _server_context(keys: pki.Pki) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(keys.serving_cert, keys.serving_key)
    return context


def _client_context(ca: Path) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(ca))


@asynccontextmanager
async def serving(server: Server, keys: pki.Pki) -> AsyncIterator[Server]:
    listener = await asyncio.start_server(server.handle, "127.0.0.1", 0, ssl=_server_context(keys))
    server.port = listener.sockets[0].getsockname()[1]
    try:
        yield server
    finally:
        server.done.set()
        listener.close()


def _client(ca: Path, *, timeout: float = 5.0) -> httpx2.AsyncClient:
    transport = internals.transport_over(
        AsyncioBackend(),
        ssl_context=_client_context(ca),
        limits=httpx2.Limits(max_connections=10, max_keepalive_connections=5, keepalive_expiry=60),
    )
    return httpx2.AsyncClient(transport=transport, timeout=timeout)


async def test_requests_go_over_tls_and_reuse_one_connection(certs: pki.Pki) -> None:
    async with serving(Server(), certs) as server, _client(certs.ca_cert) as http:
        for _ in range(3):
            response = await http.get(f"https://127.0.0.1:{server.port}/readyz")
            assert (response.status_code, response.content) == (200, b"hello")
            assert response.extensions["network_stream"].get_extra_info("ssl_object") is not None
    assert server.connections == 1
    assert server.requests == [b"GET /readyz HTTP/1.1"] * 3


async def test_a_large_body_arrives_whole(certs: pki.Pki) -> None:
    body = bytes(range(256)) * 8192  # 2 MiB: many TLS records and reads, flow control on the way
    async with serving(Server(body=body), certs) as server, _client(certs.ca_cert) as http:
        response = await http.get(f"https://127.0.0.1:{server.port}/big")
    assert response.content == body


async def test_a_connection_the_server_closed_while_idle_is_not_reused(certs: pki.Pki) -> None:
    async with serving(Server(close_after_response=True), certs) as server, _client(certs.ca_cert) as http:
        first = await http.get(f"https://127.0.0.1:{server.port}/a")
        await asyncio.sleep(0.2)  # the server's close reaches the idle connection
        second = await http.get(f"https://127.0.0.1:{server.port}/b")
    assert (first.status_code, second.status_code) == (200, 200)
    assert server.connections == 2


async def test_a_server_that_never_answers_is_a_read_timeout(certs: pki.Pki) -> None:
    async with serving(Server(silent=True), certs) as server, _client(certs.ca_cert, timeout=0.3) as http:
        with pytest.raises(httpx2.ReadTimeout):
            await http.get(f"https://127.0.0.1:{server.port}/slow")


async def test_nothing_listening_is_a_connect_error(certs: pki.Pki) -> None:
    listener = await asyncio.start_server(Server().handle, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    listener.close()
    await listener.wait_closed()
    async with _client(certs.ca_cert) as http:
        with pytest.raises(httpx2.ConnectError):
            await http.get(f"https://127.0.0.1:{port}/")


async def test_a_certificate_from_another_ca_is_refused(certs: pki.Pki, tmp_path: Path) -> None:
    other = pki.generate(tmp_path / "other", now=dt.datetime.now(dt.UTC))
    async with serving(Server(), certs) as server, _client(other.ca_cert) as http:
        with pytest.raises(httpx2.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
            await http.get(f"https://127.0.0.1:{server.port}/")
    assert server.requests == []


def _on_uvloop(run: Callable[[], Awaitable[None]]) -> None:
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(run())  # type: ignore[arg-type]


def test_on_uvloop_too(certs: pki.Pki) -> None:
    body = b"x" * (1 << 20)

    async def run() -> None:
        assert type(asyncio.get_running_loop()).__module__.startswith("uvloop")
        async with serving(Server(body=body), certs) as server, _client(certs.ca_cert) as http:
            for _ in range(2):
                assert (await http.get(f"https://127.0.0.1:{server.port}/")).content == body
        assert server.connections == 1

    _on_uvloop(run)


def test_a_server_closing_an_idle_tls_connection_logs_nothing_on_uvloop(
    certs: pki.Pki, caplog: pytest.LogCaptureFixture
) -> None:
    # uvloop's TLS transport warns when the protocol asks to keep a half-closed connection open.
    async def run() -> None:
        server = Server(close_after_response=True)
        async with serving(server, certs), _client(certs.ca_cert) as http:
            assert (await http.get(f"https://127.0.0.1:{server.port}/a")).status_code == 200
            await asyncio.sleep(0.2)  # the server's close reaches the idle connection
            assert (await http.get(f"https://127.0.0.1:{server.port}/b")).status_code == 200
        assert server.connections == 2

    with caplog.at_level(logging.DEBUG, logger="asyncio"):
        _on_uvloop(run)
    assert [r.getMessage() for r in caplog.records if r.name == "asyncio"] == []


@pytest.mark.parametrize("on_uvloop", [False, True])
def test_a_connection_the_server_closed_is_closed_not_left_half_open(on_uvloop: bool) -> None:
    async def run() -> None:
        async def close_at_once(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            writer.close()

        listener = await asyncio.start_server(close_at_once, "127.0.0.1", 0)
        port = listener.sockets[0].getsockname()[1]
        try:
            stream = await AsyncioBackend().connect_tcp("127.0.0.1", port, timeout=5)
            assert await stream.read(1024, timeout=5) == b""  # the server's end of stream
            await asyncio.sleep(0)  # the transport's close runs as a callback
            assert stream.get_extra_info("is_readable")
            # Closed by the protocol's answer to the EOF (asyncio's own would keep it half open).
            assert stream._writer.transport.is_closing()  # type: ignore[attr-defined]
            await stream.aclose()
        finally:
            listener.close()

    if on_uvloop:
        _on_uvloop(run)
    else:
        asyncio.run(run())


def test_every_kube_client_opens_its_connections_through_asyncio(certs: pki.Pki) -> None:
    """The member sessions', the controller's and the watches' clients all come from here."""
    config = kubeclient.config_from_bytes(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1', insecure-skip-tls-verify: true}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\n"
    )
    pool = kubeclient._transport(config, "member").inner.inner.inner._pool  # Laned > Measured > Fenced
    assert isinstance(pool._network_backend, AsyncioBackend)


@pytest.mark.parametrize("tls", [True, False])
async def test_a_closed_stream_has_closed_its_socket_when_aclose_returns(certs: pki.Pki, tls: bool) -> None:
    """A loop that stops right after a pool closed must find no socket left open to the collector."""
    async with serving(Server(), certs) as server:
        stream = await AsyncioBackend().connect_tcp("127.0.0.1", server.port, timeout=5)
        if tls:
            stream = await stream.start_tls(_client_context(certs.ca_cert), "127.0.0.1", timeout=5)
        sock = stream.get_extra_info("socket")
        assert sock.fileno() != -1
        await stream.aclose()
        assert sock.fileno() == -1
