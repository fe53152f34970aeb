"""Webhook gates' I/O (ADR 0080): where a call may go, the call itself, and how its answer is judged.

Where: an `http` or `https` URL without credentials. The host is resolved once, every address it
resolves to is checked, and the call connects to a checked address (the name kept for the Host
header, TLS SNI and certificate verification), so a second lookup cannot lead elsewhere. Refused:
link-local, cloud-metadata and unspecified addresses, loopback without the operator's opt-in, also
embedded in IPv6 (the rules and the resolver are the metric sources', `promapi.guards`). The
notification sink (`runtime.notify`) is called through the same checks.

The call: `timeout` per attempt, `retries` more attempts on a transport error, 5xx or 429 (backoff
0.5 s, 1 s, 2 s...), redirects never followed, at most 64 KiB of answer read, JSON nested at most 32
deep. Judging: 2xx here; the optional CEL `successCondition` over `status` and `body` is user code and
runs in the sandbox worker (`health/webhook_condition.py`, ADR 0041).

What a message may show: the URL's scheme, host and port (never its path or query: a Slack-style
URL carries its token in the path), the HTTP status and the condition's outcome; never a header
value and never the answer's body (a server may echo the request's headers back). httpx logs every
request's full URL at INFO: the controller keeps the HTTP libraries' loggers at WARNING
(`cli/controller.py`).
"""

from __future__ import annotations

import asyncio
import collections
import json
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import httpx2

from fleetwave.promapi import guards

MAX_BODY = 64 * 1024
MAX_CONCURRENT = 16
MAX_DEPTH = 32
MAX_URL_CHARS = 2048
_DEFAULT_PORTS = {"http": 80, "https": 443}


# The URL may not be called; the message says why (it never holds the query or credentials).
Refused = guards.Refused


@dataclass(frozen=True, slots=True)
class Endpoint:
    scheme: str
    host: str  # a DNS name or an IP literal (without brackets)
    port: int
    path_and_query: str

    @property
    def display(self) -> str:
        """The endpoint for messages and logs: no path or query (either may hold a token)."""
        return f"{self.scheme}://{guards.bracketed(self.host)}:{self.port}"

    def url_to(self, address: str) -> str:
        return f"{self.scheme}://{guards.bracketed(address)}:{self.port}{self.path_and_query}"

    @property
    def host_header(self) -> str:
        default = _DEFAULT_PORTS[self.scheme] == self.port
        return guards.bracketed(self.host) if default else f"{guards.bracketed(self.host)}:{self.port}"


def endpoint(url: str, *, field: str = "url", headers: str = "headersFrom") -> Endpoint:
    """The endpoint of `url`, or Refused naming `field` (and `headers`, where credentials belong)."""
    if len(url) > MAX_URL_CHARS:
        raise Refused(f"{field} is longer than {MAX_URL_CHARS} characters")
    try:
        parts = urllib.parse.urlsplit(url.strip())
        port = parts.port
    except ValueError:
        raise Refused(f"{field} is not a valid URL") from None
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS:
        raise Refused(f"{field} must start with http:// or https://")
    if "@" in parts.netloc:
        raise Refused(f"{field} must not carry credentials: use {headers}")
    host = parts.hostname or ""
    if not host:
        raise Refused(f"{field} has no host")
    literal = guards.ip_literal(host)
    problem = guards.address_problem(literal) if literal is not None else ""
    if problem:
        raise Refused(f"{field}: {problem}")
    path = parts.path or "/"
    if any(c in path for c in " \r\n\t"):
        raise Refused(f"{field}'s path has whitespace")
    query = f"?{parts.query}" if parts.query else ""
    return Endpoint(scheme, host, port or _DEFAULT_PORTS[scheme], path + query)


def resolve(target: Endpoint, *, timeout: float) -> list[str]:
    """Every address `target.host` resolves to, each checked (the metric sources' resolver)."""
    return guards.resolve_host(target.host, target.port, timeout=timeout)


# --- the answer and its judgement ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Answer:
    """What one call came to: an HTTP status and the parsed body (None: no JSON), or a problem."""

    status: int | None = None
    body: Any = None
    problem: str = ""


def parse_body(raw: bytes, truncated: bool) -> Any:
    """The answer as JSON, or None when it is not JSON, too long or nested too deep."""
    if truncated or not raw:
        return None
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    return value if _depth(value) <= MAX_DEPTH else None


def _depth(value: Any) -> int:
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        deepest = max(deepest, depth)
        if deepest > MAX_DEPTH:
            return deepest
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
    return deepest


def judge_status(answer: Answer) -> tuple[bool, str]:
    """(passes, why) before any successCondition: a 2xx answer. The body is never quoted."""
    if answer.problem:
        return False, answer.problem
    assert answer.status is not None
    if not 200 <= answer.status < 300:
        return False, f"answered HTTP {answer.status}"
    return True, f"answered HTTP {answer.status}"


# --- the call ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Request:
    url: str
    method: str  # GET | POST
    headers: Mapping[str, str]
    payload: Mapping[str, Any]
    timeout: float
    retries: int


async def call(request: Request, *, transport: httpx2.AsyncBaseTransport | None = None) -> Answer:
    """One webhook call with its retries; never raises for what the far end does."""
    try:
        target = endpoint(request.url)
        addresses = await asyncio.to_thread(resolve, target, timeout=request.timeout)
    except Refused as e:
        return Answer(problem=f"refused: {e}")
    problem = ""
    async with httpx2.AsyncClient(
        timeout=httpx2.Timeout(request.timeout), follow_redirects=False, transport=transport
    ) as client:
        for attempt in range(request.retries + 1):
            if attempt:
                await asyncio.sleep(min(0.5 * 2 ** (attempt - 1), 2.0))
            answer = await _attempt(client, request, target, addresses[attempt % len(addresses)])
            if answer.problem:
                problem = answer.problem
                continue
            assert answer.status is not None
            if (answer.status >= 500 or answer.status == 429) and attempt < request.retries:
                continue
            return answer
    return Answer(problem=problem)


async def _attempt(client: httpx2.AsyncClient, request: Request, target: Endpoint, address: str) -> Answer:
    headers = {**request.headers, "Host": target.host_header, "Accept": "application/json"}
    content: bytes | None = None
    if request.method == "POST":
        content = json.dumps(request.payload).encode()
        headers["Content-Type"] = "application/json"
    extensions = {"sni_hostname": target.host} if target.scheme == "https" else {}
    try:
        async with asyncio.timeout(request.timeout):
            req = client.build_request(
                request.method,
                target.url_to(address),
                headers=headers,
                content=content,
                extensions=extensions,
            )
            response = await client.send(req, stream=True)
            try:
                raw, truncated = await _read_capped(response)
            finally:
                await response.aclose()
    except TimeoutError:
        return Answer(problem=f"{target.display} did not answer within {request.timeout:g}s")
    except httpx2.HTTPError as e:
        return Answer(problem=f"{target.display} could not be reached ({type(e).__name__})")
    return Answer(response.status_code, parse_body(raw, truncated))


async def _read_capped(response: httpx2.Response) -> tuple[bytes, bool]:
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        chunks.append(chunk)
        size += len(chunk)
        if size > MAX_BODY:
            return b"", True
    return b"".join(chunks), False


@dataclass(frozen=True, slots=True)
class Memo:
    ok: bool
    message: str
    until: datetime


class WebhookCalls:
    """Remembers each call's verdict for its interval; bounds concurrent calls."""

    def __init__(
        self, *, max_concurrent: int = MAX_CONCURRENT, transport: httpx2.AsyncBaseTransport | None = None
    ) -> None:
        self._memo: collections.OrderedDict[tuple[str, ...], Memo] = collections.OrderedDict()
        self._limit = asyncio.Semaphore(max_concurrent)
        self._transport = transport
        self.calls = 0

    def recall(self, key: tuple[str, ...], now: datetime) -> Memo | None:
        memo = self._memo.get(key)
        return memo if memo is not None and now < memo.until else None

    def remember(self, key: tuple[str, ...], memo: Memo) -> None:
        self._memo[key] = memo
        self._memo.move_to_end(key)
        while len(self._memo) > 4096:
            self._memo.popitem(last=False)

    async def call(self, request: Request) -> Answer:
        async with self._limit:
            self.calls += 1
            return await call(request, transport=self._transport)
