"""helm's egress proxy (ADR 0125): every destination resolved once, checked by the outbound rules
and connected to by the proxy itself; one request per forwarded connection; bounded heads and
connections. The live tests run the proxy on its thread against servers on loopback."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pytest

from fleetwave.delivery import egress
from fleetwave.promapi import guards


def _head(text: str) -> egress.Head:
    return egress.parse_head(text.replace("\n", "\r\n").encode())


def test_a_connect_names_one_host_and_port_and_an_absolute_http_url_its_host_and_path() -> None:
    assert egress.destination(
        _head("CONNECT charts.example.com:443 HTTP/1.1\nHost: x")
    ) == egress.Destination("charts.example.com", 443)
    assert egress.destination(_head("CONNECT [2001:db8::1]:8443 HTTP/1.1")) == egress.Destination(
        "2001:db8::1", 8443
    )
    where = egress.destination(_head("GET http://charts.example.com/index.yaml?x=1 HTTP/1.1"))
    assert where == egress.Destination("charts.example.com", 80, "/index.yaml?x=1")


@pytest.mark.parametrize(
    "request_head",
    [
        "CONNECT charts.example.com HTTP/1.1",  # no port
        "CONNECT a.example:99999 HTTP/1.1",
        "CONNECT user@a.example:443 HTTP/1.1",
        "CONNECT a.example:443/x HTTP/1.1",
        "GET /index.yaml HTTP/1.1",  # origin-form: not meant for a proxy
        "GET https://a.example/ HTTP/1.1",  # https goes through CONNECT, never in clear
        "GET http://u:p@a.example/ HTTP/1.1",
        "GET http:///x HTTP/1.1",
        "GET http://a.example/",  # not a request line
        "GET http://a.example/ SPDY/3",
        "GET http://a/ HTTP/1.1\nno colon",
        "GET http://a/ HTTP/1.1\n folded: line",
    ],
)
def test_a_request_that_names_no_single_destination_is_refused(request_head: str) -> None:
    with pytest.raises(egress.Refusal) as refused:
        egress.destination(_head(request_head))
    assert refused.value.status == 400


def test_the_forwarded_head_is_origin_form_without_proxy_fields_and_asks_to_close() -> None:
    head = _head(
        "GET http://a.example/c.tgz HTTP/1.1\nHost: a.example\nProxy-Authorization: Basic eA==\n"
        "Proxy-Connection: keep-alive\nConnection: keep-alive\nAuthorization: Basic dTpw\n"
        "Expect: 100-continue"
    )
    sent = egress.upstream_head(head, "/c.tgz").decode()
    assert sent == (
        "GET /c.tgz HTTP/1.1\r\nHost: a.example\r\nAuthorization: Basic dTpw\r\nConnection: close\r\n\r\n"
    )


def test_the_answer_tells_the_client_not_to_reuse_the_connection() -> None:
    answer = b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: keep-alive\r\nKeep-Alive: timeout=5"
    assert (
        egress.response_head(answer) == b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\n"
    )


def test_a_body_is_forwarded_only_when_its_length_is_known_and_small() -> None:
    assert egress.body_length(_head("POST http://a/t HTTP/1.1\nContent-Length: 12")) == 12
    assert egress.body_length(_head("GET http://a/t HTTP/1.1")) == 0
    for bad, status in (
        ("Transfer-Encoding: chunked", 501),
        ("Content-Length: 9999999", 413),
        ("Content-Length: -1", 413),
    ):
        with pytest.raises(egress.Refusal) as refused:
            egress.body_length(_head(f"POST http://a/t HTTP/1.1\n{bad}"))
        assert refused.value.status == status


def test_a_refusal_is_one_printable_status_line_helm_shows() -> None:
    line = egress.Refusal(403, "a.example resolves to 169.254.169.254, link-local\r\nX: y").response()
    assert line.startswith(
        b"HTTP/1.1 403 fleetwave egress: a.example resolves to 169.254.169.254, link-local??X"
    )
    assert line.count(b"\r\n") == 4


@dataclass
class _Upstream:
    """A server on loopback that records what reaches it and answers with a keep-alive 200."""

    received: list[bytes] = field(default_factory=list)
    port: int = 0


@pytest.fixture
def upstream() -> Iterator[_Upstream]:
    seen = _Upstream()
    listener = socket.create_server(("127.0.0.1", 0))
    seen.port = listener.getsockname()[1]

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                data = conn.recv(65536)
                seen.received.append(data)
                if data.startswith(b"ECHO"):
                    conn.sendall(data)
                else:
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: keep-alive\r\n\r\nok")

    threading.Thread(target=serve, daemon=True).start()
    yield seen
    listener.close()


@pytest.fixture
def proxy() -> Iterator[egress.EgressProxy]:
    running = egress.EgressProxy().start()
    yield running
    running.stop()


async def _exchange(proxy: egress.EgressProxy, request: bytes, *, then: bytes = b"") -> bytes:
    host, port = proxy.url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(request)
    await writer.drain()
    if then:
        await asyncio.sleep(0.1)
        writer.write(then)
        await writer.drain()
    try:
        return await asyncio.wait_for(reader.read(), 5)
    finally:
        writer.close()


async def test_a_request_to_an_allowed_address_is_forwarded_once_and_closed(
    proxy: egress.EgressProxy, upstream: _Upstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(guards.ALLOW_LOOPBACK_ENV, "1")
    request = (
        f"GET http://127.0.0.1:{upstream.port}/index.yaml HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        "Proxy-Connection: keep-alive\r\n\r\n"
    ).encode()
    second = f"GET http://127.0.0.1:{upstream.port}/second HTTP/1.1\r\nHost: other\r\n\r\n".encode()

    answer = await _exchange(proxy, request, then=second)

    assert answer == b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"
    assert upstream.received == [b"GET /index.yaml HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"]


async def test_loopback_is_refused_without_the_operator_s_opt_in_by_address_and_by_name(
    proxy: egress.EgressProxy, upstream: _Upstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(guards.ALLOW_LOOPBACK_ENV, raising=False)
    by_address = await _exchange(proxy, f"CONNECT 127.0.0.1:{upstream.port} HTTP/1.1\r\n\r\n".encode())
    # A name that resolves to loopback when helm asks (what a rebinding name does) is refused too.
    by_name = await _exchange(proxy, f"GET http://localhost:{upstream.port}/ HTTP/1.1\r\n\r\n".encode())

    assert by_address.startswith(
        b"HTTP/1.1 403 fleetwave egress: 127.0.0.1 is a loopback address, contacted only with"
    )
    assert by_name.startswith(b"HTTP/1.1 403 fleetwave egress: localhost resolves to ")
    assert upstream.received == []


async def test_metadata_and_link_local_addresses_are_never_reached(
    proxy: egress.EgressProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(guards.ALLOW_LOOPBACK_ENV, "1")
    for target in ("169.254.169.254:80", "[::ffff:169.254.169.254]:443", "100.100.100.200:80", "0.0.0.0:80"):
        answer = await _exchange(proxy, f"CONNECT {target} HTTP/1.1\r\n\r\n".encode())
        assert answer.startswith(b"HTTP/1.1 403 fleetwave egress: "), answer


async def test_a_tunnel_carries_bytes_both_ways_to_a_checked_address(
    proxy: egress.EgressProxy, upstream: _Upstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(guards.ALLOW_LOOPBACK_ENV, "1")
    answer = await _exchange(
        proxy, f"CONNECT 127.0.0.1:{upstream.port} HTTP/1.1\r\n\r\n".encode(), then=b"ECHO tls bytes"
    )
    assert answer == b"HTTP/1.1 200 Connection established\r\n\r\nECHO tls bytes"


async def _until(condition: Callable[[], bool]) -> None:
    """The proxy's thread moves its counts: look every 10 ms, for at most 5 s."""
    for _ in range(500):
        if condition():
            return
        await asyncio.sleep(0.01)
    pytest.fail("the proxy's connection count did not reach the expected value in 5 s")


async def test_heads_and_connections_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(egress, "_HEAD_SECONDS", 0.3)
    proxy = egress.EgressProxy(max_connections=1).start()
    try:
        oversized = await _exchange(
            proxy, b"GET http://a.example/ HTTP/1.1\r\nX: " + b"a" * 20000 + b"\r\n\r\n"
        )
        assert oversized.startswith(b"HTTP/1.1 431 fleetwave egress: a head over 16 KiB")
        await _until(lambda: proxy.open_connections == 0)
        host, port = proxy.url.removeprefix("http://").split(":")
        _, silent = await asyncio.open_connection(host, int(port))  # holds the one slot, says nothing
        await _until(lambda: proxy.open_connections == 1)
        busy = await _exchange(proxy, b"GET http://a.example/ HTTP/1.1\r\n\r\n")
        assert busy.startswith(b"HTTP/1.1 503 fleetwave egress: too many connections at once")
        # The silent one's head did not come within the bound: it is answered and let go.
        await _until(lambda: proxy.open_connections == 0)
        after = await _exchange(proxy, b"GET https://a.example/ HTTP/1.1\r\n\r\n")
        assert after.startswith(b"HTTP/1.1 400 ")
        silent.close()
    finally:
        proxy.stop()


def test_helm_is_sent_through_this_process_s_proxy_except_to_its_member() -> None:
    environment = egress.helm_environment("10.0.0.7")
    assert environment == {
        "HTTPS_PROXY": egress.shared().url,
        "HTTP_PROXY": egress.shared().url,
        "NO_PROXY": "10.0.0.7",
    }
    assert egress.shared().url.startswith("http://127.0.0.1:")
