"""A guarded, capped download of one file whose URL a user (or a server they point at) chose.

Used for Flux source artifacts (ADR 0103). The URL is http(s) without credentials; the host is
resolved once and every address checked (`guards`: never link-local or cloud metadata, loopback
only with the operator's opt-in) and the connection goes to that very address; no redirect is
followed, no proxy is read from the environment; the size is bounded before reading (a declared
Content-Length over the cap is refused) and while reading (the stream stops at the cap); the
whole exchange has a deadline. Messages name the host, never the path or query.
"""

from __future__ import annotations

import asyncio
import functools
import ssl
import urllib.parse
from dataclasses import dataclass

import httpx2

from fleetwave.promapi import guards

_DEFAULT_PORTS = {"http": 80, "https": 443}
_CHUNK = 256 * 1024


class Unavailable(RuntimeError):
    """Nothing could be read just now (no answer, a timeout, a 5xx, 404 or 429): try again later."""


class Refused(ValueError):
    """The URL may not be fetched, or what it serves may not be taken (too large, an error answer)."""


@functools.cache
def _tls() -> ssl.SSLContext:
    """The system's trust store (SSL_CERT_FILE/SSL_CERT_DIR through OpenSSL), built once."""
    return ssl.create_default_context()


@dataclass(frozen=True, slots=True)
class _Target:
    scheme: str
    host: str
    port: int
    path: str

    def url_to(self, address: str) -> str:
        return f"{self.scheme}://{guards.bracketed(address)}:{self.port}{self.path}"

    @property
    def host_header(self) -> str:
        shown = guards.bracketed(self.host)
        return shown if _DEFAULT_PORTS[self.scheme] == self.port else f"{shown}:{self.port}"

    @property
    def display(self) -> str:
        return f"{self.scheme}://{guards.bracketed(self.host)}:{self.port}"


def _target(url: str, field: str) -> _Target:
    try:
        parts = urllib.parse.urlsplit(url.strip())
        port = parts.port
    except ValueError:
        raise Refused(f"{field} is not a valid URL") from None
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or len(url) > guards.MAX_URL_CHARS:
        raise Refused(f"{field} must be an http(s) URL of at most {guards.MAX_URL_CHARS} characters")
    if "@" in parts.netloc or not parts.hostname:
        raise Refused(f"{field} must name a host and carry no credentials")
    literal = guards.ip_literal(parts.hostname)
    problem = guards.address_problem(literal) if literal is not None else ""
    if problem:
        raise Refused(f"{field}: {problem}")
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return _Target(scheme, parts.hostname, port or _DEFAULT_PORTS[scheme], path)


async def get_capped(
    url: str,
    *,
    max_bytes: int,
    seconds: float,
    field: str = "url",
    transport: httpx2.AsyncBaseTransport | None = None,
) -> bytes:
    """The body `url` serves, of at most `max_bytes`; Refused or Unavailable (see the module)."""
    target = _target(url, field)
    try:
        addresses = await asyncio.to_thread(guards.resolve_host, target.host, target.port, timeout=10.0)
    except guards.Unresolved as e:
        raise Unavailable(str(e)) from None
    except guards.Refused as e:
        raise Refused(f"{field}: {e}") from None
    # The trust store is read once, in a worker thread: reading it costs some 50 ms, and an
    # AsyncClient built without one would read it on the event loop at every download.
    tls = await asyncio.to_thread(_tls)
    try:
        async with asyncio.timeout(seconds):
            return await _get(target, addresses[0], max_bytes, tls, transport)
    except TimeoutError:
        raise Unavailable(f"{target.display} did not answer in full within {seconds:g}s") from None
    except httpx2.HTTPError as e:
        raise Unavailable(f"{target.display} could not be reached ({type(e).__name__})") from None


async def _get(
    target: _Target,
    address: str,
    max_bytes: int,
    tls: ssl.SSLContext,
    transport: httpx2.AsyncBaseTransport | None,
) -> bytes:
    """One GET to the checked `address`, the Host header and SNI naming the URL's host."""
    extensions = {"sni_hostname": target.host} if target.scheme == "https" else {}
    async with httpx2.AsyncClient(
        follow_redirects=False, trust_env=False, verify=tls, transport=transport
    ) as client:
        request = client.build_request(
            "GET", target.url_to(address), headers={"Host": target.host_header}, extensions=extensions
        )
        response = await client.send(request, stream=True)
        try:
            return await _body(response, target, max_bytes)
        finally:
            await response.aclose()


async def _body(response: httpx2.Response, target: _Target, max_bytes: int) -> bytes:
    code = response.status_code
    if code >= 500 or code in (404, 429):
        raise Unavailable(f"{target.display} answered {code}")
    if code != 200:
        raise Refused(f"{target.display} answered {code}")
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > max_bytes:
        raise Refused(f"{target.display} serves more than {max_bytes} bytes")
    body = bytearray()
    async for chunk in response.aiter_raw(_CHUNK):
        if len(body) + len(chunk) > max_bytes:
            raise Refused(f"{target.display} serves more than {max_bytes} bytes")
        body += chunk
    return bytes(body)
