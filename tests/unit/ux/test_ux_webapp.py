"""The `fleetwave ui` HTTP server (`ux.webapp`) on a real socket, fed by an in-memory board: what a
hostile page in the same browser could send is refused, the page and its assets are served with a
strict CSP, approvals need the page's token and reach the approver exactly, the board streams as
server-sent events on every change."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx2
import pytest
from aiohttp import web

from fleetwave.ux import approving, ui_server, webapp
from fleetwave.ux.changes import Changes

TOKEN = "t0ken-for-tests"


class FakeBoard(Changes):
    def __init__(self) -> None:
        super().__init__()
        self.content: dict[str, Any] = {"rollouts": [], "n": 1}

    def board(self) -> dict[str, Any]:
        return dict(self.content)

    def change(self, n: int) -> None:
        self.content = {"rollouts": [], "n": n}
        self.bump()


@dataclass
class Served:
    url: str
    host: str
    board: FakeBoard
    calls: list[tuple[str, str | None, str, str]] = field(default_factory=list)
    refuse: approving.Refused | None = None


@pytest.fixture
async def served() -> AsyncIterator[Served]:
    sock = ui_server._listen("127.0.0.1", 0)
    port = sock.getsockname()[1]
    state = Served(f"http://127.0.0.1:{port}", f"127.0.0.1:{port}", FakeBoard())

    def approve(kind: str, namespace: str | None, name: str, stage: str) -> str:
        state.calls.append((kind, namespace, name, stage))
        if state.refuse is not None:
            raise state.refuse
        return f"{kind.lower()}/{name} stage {stage} approved"

    app = webapp.make_app(state.board, approve, token=TOKEN, hosts=webapp.allowed_hosts("127.0.0.1", port))
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.1)
    await runner.setup()
    await web.SockSite(runner, sock).start()
    try:
        yield state
    finally:
        await runner.cleanup()


def _http() -> httpx2.AsyncClient:
    return httpx2.AsyncClient(timeout=10, trust_env=False)


async def test_the_page_carries_its_token_and_a_strict_policy(served: Served) -> None:
    async with _http() as http:
        page = await http.get(served.url + "/")
        assert page.status_code == 200
        assert f'<meta name="fleetwave-token" content="{TOKEN}">' in page.text
        assert "{{TOKEN}}" not in page.text
        assert page.headers["content-security-policy"] == webapp.CSP
        assert "script-src 'self'" in page.headers["content-security-policy"]
        assert page.headers["x-content-type-options"] == "nosniff"
        assert page.headers["cache-control"] == "no-store"
        script = await http.get(served.url + "/static/app.js")
        assert script.status_code == 200
        assert script.headers["content-type"].startswith("text/javascript")
        assert (await http.get(served.url + "/static/../webapp.py")).status_code == 404
        assert (await http.get(served.url + "/static/secret.txt")).status_code == 404


async def test_another_host_name_is_refused_dns_rebinding(served: Served) -> None:
    async with _http() as http:
        refused = await http.get(served.url + "/api/board", headers={"Host": "evil.example:80"})
        assert refused.status_code == 421
        assert "Host" in refused.json()["error"]
        port = served.host.rsplit(":", 1)[1]
        assert (
            await http.get(served.url + "/api/board", headers={"Host": f"localhost:{port}"})
        ).status_code == 200


def _approval(kind: str = "ClusterPromotion", **extra: Any) -> dict[str, Any]:
    return {"kind": kind, "name": "kyverno", "stage": "staging", **extra}


async def test_approving_needs_the_page_token_and_the_own_origin(served: Served) -> None:
    async with _http() as http:
        url = served.url + "/api/approve"
        missing = await http.post(url, json=_approval())
        assert missing.status_code == 403
        assert "token" in missing.json()["error"]
        wrong = await http.post(url, json=_approval(), headers={webapp.TOKEN_HEADER: "guess"})
        assert wrong.status_code == 403
        cross = await http.post(
            url, json=_approval(), headers={webapp.TOKEN_HEADER: TOKEN, "Origin": "https://evil.example"}
        )
        assert cross.status_code == 403
        assert "cross-origin" in cross.json()["error"]
        form = await http.post(
            url, content=b"kind=x", headers={webapp.TOKEN_HEADER: TOKEN, "Content-Type": "text/plain"}
        )
        assert form.status_code == 415
        assert served.calls == []  # nothing refused reached the approver


async def test_an_approval_reaches_the_approver_exactly_and_its_answer_comes_back(served: Served) -> None:
    headers = {webapp.TOKEN_HEADER: TOKEN, "Origin": served.url}
    async with _http() as http:
        url = served.url + "/api/approve"
        done = await http.post(url, json=_approval(), headers=headers)
        assert done.status_code == 200
        assert done.json() == {"message": "clusterpromotion/kyverno stage staging approved"}
        run = await http.post(url, json=_approval("StagedUpdateRun", namespace="apps"), headers=headers)
        assert run.status_code == 200
        assert served.calls == [
            ("ClusterPromotion", None, "kyverno", "staging"),
            ("StagedUpdateRun", "apps", "kyverno", "staging"),
        ]
        served.refuse = approving.Refused(approving.not_allowed("patch clusterpromotions"), forbidden=True)
        refused = await http.post(url, json=_approval(), headers=headers)
        assert refused.status_code == 403
        assert refused.json()["error"].startswith("you are not allowed to approve: approving needs patch")


@pytest.mark.parametrize(
    "body",
    [
        {"kind": "Secret", "name": "x", "stage": "s"},
        {"kind": "ClusterPromotion", "name": "../x", "stage": "s"},
        {"kind": "ClusterPromotion", "name": "x", "stage": "a b"},
        {"kind": "StagedUpdateRun", "name": "x", "stage": "s"},  # a namespaced run needs its namespace
        ["not", "an", "object"],
    ],
)
async def test_malformed_approvals_are_refused(served: Served, body: Any) -> None:
    async with _http() as http:
        refused = await http.post(
            served.url + "/api/approve", json=body, headers={webapp.TOKEN_HEADER: TOKEN}
        )
        assert refused.status_code == 400
        assert "error" in refused.json()
    assert served.calls == []


async def _events(response: httpx2.Response) -> AsyncIterator[dict[str, Any]]:
    event = ""
    async for line in response.aiter_lines():
        if line.startswith("event: "):
            event = line[7:]
        elif line.startswith("data: ") and event == "board":
            yield json.loads(line[6:])


async def test_the_board_streams_on_connect_and_on_every_change(served: Served) -> None:
    async with _http() as http, http.stream("GET", served.url + "/events") as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        boards = _events(response)
        first = await asyncio.wait_for(anext(boards), 5)
        assert first["n"] == 1
        served.board.change(2)
        second = await asyncio.wait_for(anext(boards), 5)
        assert second["n"] == 2
        served.board.change(3)
        assert (await asyncio.wait_for(anext(boards), 5))["n"] == 3


def test_only_loopback_names_its_other_loopback_names() -> None:
    assert webapp.allowed_hosts("127.0.0.1", 8080) == {"127.0.0.1:8080", "localhost:8080", "[::1]:8080"}
    assert webapp.allowed_hosts("10.0.0.5", 80) == {"10.0.0.5:80"}
    assert ui_server.is_loopback("::1")
    assert not ui_server.is_loopback("0.0.0.0")
