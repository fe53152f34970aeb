"""The page itself in Debian's chromium (headless, Playwright), served by the real `ux.webapp` from a
board that `ux.board` built for a 1,010-cluster promotion: a big stage collapses to counts and opens
from the keyboard, the filter finds one cluster among a thousand, a countdown ticks in the browser,
and hostile names and messages are shown as text, never as markup."""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from playwright.async_api import Page, async_playwright

from fleetwave.core import timestamps
from fleetwave.ux import board, ui_server, webapp

ROOT = Path(__file__).resolve().parents[3]
ARTIFACTS = Path(os.environ.get("FLEETWAVE_TEST_ARTIFACTS") or ROOT / "build" / "test-artifacts") / "ui"
HASH = "c0ffee"
HOSTILE = '<img src=x id=injected onerror="document.title=1">'


def _promotion(now: dt.datetime) -> dict[str, Any]:
    canary = [f"fleet/canary-{i:02d}" for i in range(10)]
    wave = [f"fleet/member-{i:04d}" for i in range(1000)]
    until = timestamps.fmt(now + dt.timedelta(seconds=95))
    return {
        "kind": "ClusterPromotion",
        "metadata": {"name": "big", "generation": 1},
        "spec": {"stages": [{"name": "canary"}, {"name": "wave"}]},
        "status": {
            "observedGeneration": 1,
            "profileSpecHash": HASH,
            "rollout": {
                "contentHash": HASH,
                "phase": "Progressing",
                "current": 1,
                "stages": [
                    {
                        "name": "canary",
                        "phase": "WaitingAfter",
                        "clusters": canary,
                        "started": canary,
                        "failed": [{"cluster": canary[3], "message": HOSTILE}],
                        "gates": [
                            {"kind": "Delay", "state": "Waiting", "message": "soaking", "until": until}
                        ],
                    },
                    {
                        "name": "wave",
                        "phase": "Pending",
                        "clusters": wave,
                        "started": wave[:400],
                        "gates": [],
                    },
                ],
            },
        },
    }


def _summary(cluster: str, profile: str) -> dict[str, Any]:
    namespace, _, name = cluster.partition("/")
    return {
        "metadata": {
            "name": f"{profile}-{name}",
            "namespace": namespace,
            "labels": {"fleetwave.io/cluster-profile": profile},
        },
        "spec": {"clusterNamespace": namespace, "clusterName": name},
        "status": {
            "observedContentHash": HASH,
            "conditions": [{"type": "Ready", "status": "True", "message": "ok"}],
        },
    }


class StaticBoard:
    version = 1

    def __init__(self, content: dict[str, Any]) -> None:
        self.content = content

    def board(self) -> dict[str, Any]:
        return self.content

    async def wait_change(self, seen: int) -> int:
        await asyncio.Event().wait()
        return seen


def _chromium() -> str:
    found = os.environ.get("FLEETWAVE_CHROMIUM") or shutil.which("chromium")
    if not found:
        pytest.fail("no chromium: run scripts/test (it installs Debian's chromium) or set FLEETWAVE_CHROMIUM")
    return found


@pytest.fixture
async def page() -> AsyncIterator[Page]:
    now = dt.datetime.now(dt.UTC).replace(microsecond=0)
    promotion = _promotion(now)
    summaries = [_summary(f"fleet/member-{i:04d}", "big-wave") for i in range(300)]
    summaries += [_summary(f"fleet/canary-{i:02d}", "big-canary") for i in range(10)]
    members = [
        {
            "metadata": {
                "name": f"member-{i:04d}",
                "namespace": "fleet",
                "labels": {"region": ("eu", "us")[i % 2]},
            }
        }
        for i in range(1000)
    ]
    content = board.build([promotion], summaries, [], members, now, server="https://mgmt.invalid:6443")
    sock = ui_server._listen("127.0.0.1", 0)
    port = sock.getsockname()[1]
    app = webapp.make_app(
        StaticBoard(content), lambda *a: "", token="t", hosts=webapp.allowed_hosts("127.0.0.1", port)
    )
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.1)
    await runner.setup()
    await web.SockSite(runner, sock).start()
    try:
        async with async_playwright() as playwright:
            browser = await playwright.chromium.launch(executable_path=_chromium(), args=["--no-sandbox"])
            try:
                opened = await browser.new_page(viewport={"width": 1400, "height": 900})
                await opened.goto(f"http://127.0.0.1:{port}/")
                yield opened
            finally:
                await browser.close()
    finally:
        await runner.cleanup()


WAVE = '.stage[data-stage="wave"]'


async def test_a_thousand_clusters_collapse_to_counts_and_open_from_the_keyboard(page: Page) -> None:
    wave = page.locator(WAVE)
    await wave.wait_for()
    assert await wave.locator(".tile").count() == 0
    counts = {
        await c.get_attribute("data-state"): " ".join((await c.inner_text()).split())
        for c in await wave.locator(".count").all()
    }
    # 300 delivered and ready, 100 started without a summary yet, 600 not started.
    assert counts == {"healthy": "300 healthy", "inflight": "100 inflight", "pending": "600 pending"}
    toggle = wave.locator("button.toggle")
    await toggle.focus()
    await page.keyboard.press("Enter")
    assert await wave.locator(".tile").count() == 1000
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    await page.screenshot(path=str(ARTIFACTS / "5-thousand-clusters.png"))


async def test_the_filter_finds_one_cluster_among_a_thousand(page: Page) -> None:
    await page.locator(WAVE).wait_for()
    await page.fill("#filter", "member-0421")
    tiles = page.locator(f"{WAVE} .tile")
    await tiles.first.wait_for()
    assert [await t.get_attribute("data-cluster") for t in await tiles.all()] == ["fleet/member-0421"]
    await page.fill("#filter", "")
    await page.locator(f"{WAVE} .tile").first.wait_for(state="detached")


async def test_a_countdown_ticks_in_the_browser(page: Page) -> None:
    countdown = page.locator('.stage[data-stage="canary"] .countdown')
    await countdown.wait_for()
    first = await countdown.inner_text()
    assert first.startswith("opens in 1m 3") or first.startswith("opens in 1m 2"), first
    await page.wait_for_function(
        "(t) => document.querySelector('.stage[data-stage=\"canary\"] .countdown').textContent !== t",
        arg=first,
    )


async def test_hostile_text_stays_text(page: Page) -> None:
    tile = page.locator('.tile[data-cluster="fleet/canary-03"]')
    await tile.wait_for()
    assert await tile.get_attribute("data-state") == "failed"
    assert HOSTILE in (await tile.get_attribute("aria-label") or "")
    assert await page.locator("#injected").count() == 0
    assert await page.title() != "1"
