"""The HTTP side of `fleetwave ui` (aiohttp): the page, its assets, the board as server-sent events
fed by watches, and the Approve action.

The server acts with the user's own kubeconfig, so whoever can make it act can act as the user. It
listens on loopback by default and refuses what a hostile web page in the same browser could send:
- a Host header other than the address it listens on (DNS rebinding: another site's name resolving
  to 127.0.0.1) is refused with 421;
- the Approve action needs the per-process token the page carries in a meta tag, sent in a custom
  header (a cross-site form or `fetch` cannot set it without a CORS preflight, which is never
  granted) and, when the browser sends an Origin, the server's own origin;
- a strict Content-Security-Policy (own scripts and styles only, no framing) and no caching.
Assets ship in the package (works offline); the page never loads anything from elsewhere.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import re
from collections.abc import Awaitable, Callable
from importlib import resources
from typing import Any, Protocol

from aiohttp import web
from aiohttp.typedefs import Middleware

from fleetwave.ux.approving import Refused

CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
ASSETS = {"app.js": "text/javascript", "app.css": "text/css"}
KINDS = ("ClusterPromotion", "ClusterStagedUpdateRun", "StagedUpdateRun")
TOKEN_HEADER = "X-Fleetwave-Token"
KEEPALIVE = 15.0  # seconds between SSE comments on a quiet board (proxies drop idle streams)
COALESCE = 0.1  # a burst of watch events becomes one board
MAX_BODY = 16 * 1024
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")


class BoardSource(Protocol):
    version: int

    def board(self) -> dict[str, Any]: ...

    async def wait_change(self, seen: int) -> int: ...


# (kind, namespace, name, stage) -> what was done; raises Refused. Called in a worker thread.
Approver = Callable[[str, str | None, str, str], str]


def _asset(name: str) -> str:
    return resources.files("fleetwave.ux").joinpath("web", name).read_text(encoding="utf-8")


def page(token: str) -> str:
    return _asset("index.html").replace("{{TOKEN}}", token)


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _guard(allowed_hosts: frozenset[str]) -> Middleware:
    @web.middleware
    async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.headers.get("Host", "").lower() not in allowed_hosts:
            return web.json_response(
                {"error": "unexpected Host header: open the address fleetwave ui printed"}, status=421
            )
        response = await handler(request)
        response.headers["Content-Security-Policy"] = CSP
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Referrer-Policy"] = "no-referrer"
        response.headers["Cache-Control"] = "no-store"
        return response

    return guard


def _field(body: dict[str, Any], key: str) -> str:
    value = body.get(key)
    if not isinstance(value, str) or not _NAME.match(value):
        raise web.HTTPBadRequest(
            text=json.dumps({"error": f"{key}: a Kubernetes object name is required"}),
            content_type="application/json",
        )
    return value


def make_app(
    source: BoardSource, approver: Approver, *, token: str, hosts: frozenset[str]
) -> web.Application:
    """`hosts`: the Host header values the server answers to (host:port, lower case)."""
    origins = frozenset(f"http://{h}" for h in hosts)

    async def index(_request: web.Request) -> web.Response:
        return web.Response(text=page(token), content_type="text/html", charset="utf-8")

    async def board_json(_request: web.Request) -> web.Response:
        return web.json_response(source.board())

    async def events(request: web.Request) -> web.StreamResponse:
        return await _board_events(request, source)

    async def approve(request: web.Request) -> web.Response:
        return await _approve(request, approver, token=token, origins=origins)

    app = web.Application(middlewares=[_guard(hosts)], client_max_size=MAX_BODY)
    app.router.add_get("/", index)
    app.router.add_get("/static/{name}", _static)
    app.router.add_get("/favicon.ico", _no_content)  # the page draws its own icon
    app.router.add_get("/api/board", board_json)
    app.router.add_get("/events", events)
    app.router.add_post("/api/approve", approve)
    return app


async def _static(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    if name not in ASSETS:
        raise web.HTTPNotFound()
    return web.Response(text=_asset(name), content_type=ASSETS[name], charset="utf-8")


async def _board_events(request: web.Request, source: BoardSource) -> web.StreamResponse:
    """The board as server-sent events: again after each change, a comment while nothing changes."""
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "X-Accel-Buffering": "no"})
    response.headers["Cache-Control"] = "no-store"
    await response.prepare(request)
    seen = -1
    try:
        while True:
            if source.version != seen:
                seen = source.version
                data = json.dumps(source.board(), separators=(",", ":"))
                await response.write(f"event: board\ndata: {data}\n\n".encode())
            try:
                await asyncio.wait_for(source.wait_change(seen), KEEPALIVE)
                await asyncio.sleep(COALESCE)
            except TimeoutError:
                await response.write(b": keep-alive\n\n")
    except (ConnectionResetError, ConnectionError):
        pass  # the page went away
    return response


async def _approve(
    request: web.Request, approver: Approver, *, token: str, origins: frozenset[str]
) -> web.Response:
    given = request.headers.get(TOKEN_HEADER, "")
    if not hmac.compare_digest(given.encode(), token.encode()):
        return web.json_response({"error": "missing or wrong page token: reload the page"}, status=403)
    origin = request.headers.get("Origin")
    if origin is not None and origin.lower() not in origins:
        return web.json_response({"error": f"cross-origin request from {origin[:100]} refused"}, status=403)
    if request.content_type != "application/json":
        return web.json_response({"error": "send JSON (Content-Type: application/json)"}, status=415)
    try:
        body = json.loads(await request.text())
    except ValueError:
        return web.json_response({"error": "the body is not JSON"}, status=400)
    if not isinstance(body, dict) or body.get("kind") not in KINDS:
        return web.json_response({"error": f"kind must be one of {', '.join(KINDS)}"}, status=400)
    kind = str(body["kind"])
    name, stage = _field(body, "name"), _field(body, "stage")
    namespace = _field(body, "namespace") if kind == "StagedUpdateRun" else None
    try:
        said = await asyncio.to_thread(approver, kind, namespace, name, stage)
    except Refused as e:
        status = 403 if e.forbidden else 404 if e.missing else 409
        return web.json_response({"error": e.message}, status=status)
    return web.json_response({"message": said})


async def _no_content(_request: web.Request) -> web.Response:
    return web.Response(status=204)


def allowed_hosts(address: str, port: int) -> frozenset[str]:
    """Host header values naming this server: the address it listens on, and loopback's names."""
    host = f"[{address}]" if ":" in address else address
    names = {f"{host}:{port}"}
    if address in ("127.0.0.1", "::1", "localhost"):
        names |= {f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}"}
    return frozenset(n.lower() for n in names)
