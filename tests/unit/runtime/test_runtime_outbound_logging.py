"""No log line, at any level, carries what a webhook's or a notification sink's URL hides in its
path or query, a header value, or a response's headers: httpx logs each request's full URL at INFO
and httpcore the response headers at DEBUG, so the controller's logging setup keeps them at WARNING,
and fleetwave's own lines name scheme://host:port only (issue 40, finding 8)."""

from __future__ import annotations

import base64
import datetime as dt
import http.server
import logging
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from fleetwave.cli import controller as cli_controller
from fleetwave.promapi import guards
from fleetwave.runtime import notify, webhook

PATH_SECRET = "T0SECRETPATH"
QUERY_SECRET = "QSECRETQUERY"
HEADER_SECRET = "HSECRETHEADER"
ANSWER_SECRET = "RSECRETANSWER"  # a response header value: a server may echo credentials back
SECRETS = (PATH_SECRET, QUERY_SECRET, HEADER_SECRET, ANSWER_SECRET)


@pytest.fixture
def server() -> Iterator[str]:
    """A receiver on 127.0.0.1: 200 to GET (a webhook gate), 500 to POST (a failing sink)."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def _answer(self, status: int) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
            self.send_response(status)
            self.send_header("X-Echo", ANSWER_SECRET)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

        def do_GET(self) -> None:
            self._answer(200)

        def do_POST(self) -> None:
            self._answer(500)

        def log_message(self, *_args: Any) -> None:
            return

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture
def controller_logging(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The controller's logging setup, with the library loggers' levels put back afterwards."""
    monkeypatch.setenv(guards.ALLOW_LOOPBACK_ENV, "1")  # the receiver is on 127.0.0.1
    loggers = [logging.getLogger(name) for name in cli_controller.HTTP_LIBRARY_LOGGERS]
    levels = [each.level for each in loggers]
    cli_controller.configure_logging("DEBUG")
    try:
        yield
    finally:
        for each, level in zip(loggers, levels, strict=True):
            each.setLevel(level)


@pytest.mark.usefixtures("controller_logging")
async def test_no_url_path_query_header_or_answer_reaches_a_log_line(
    server: str, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("fleetwave.runtime.notify.asyncio.sleep", _no_wait)
    caplog.set_level(logging.DEBUG)  # every logger that does not say otherwise
    url = f"{server}/services/{PATH_SECRET}?token={QUERY_SECRET}"
    gate = webhook.Request(url, "GET", {"X-Token": HEADER_SECRET}, {}, timeout=5.0, retries=0)
    assert (await webhook.call(gate)).status == 200
    values = {"url": url, "headers": f"Authorization: Bearer {HEADER_SECRET}\n"}
    sink = notify.sink_from_secret({k: base64.b64encode(v.encode()).decode() for k, v in values.items()})
    notifier = notify.Notifier(lambda: sink)
    notifier.notify(_failed())
    await notifier.flush()
    await notifier.close()
    assert notifier.failed == 1
    # The failure is logged, naming where it went as scheme://host:port and nothing more.
    assert f"notifications: Failed to {server} not delivered: HTTP 500" in caplog.text
    shown = caplog.text + "".join(repr(r.args) for r in caplog.records)
    assert [s for s in SECRETS if s in shown] == []


def _failed() -> notify.Notification:
    at = dt.datetime(2026, 11, 25, 8, 0, tzinfo=dt.UTC)
    return notify.Notification("Failed", "ClusterPromotion", "p", None, "ClusterFailed", "m", at)


async def _no_wait(_seconds: float) -> None:
    return None
