"""A Helm chart repository served over HTTP on loopback, for the demo and the tests.

Charts are packaged with the real `helm` (so the index and archives are exactly what a public
repository serves) and served by a stdlib HTTP server on a free 127.0.0.1 port. With `basic_auth`
every request must carry those credentials (HTTP basic authentication), as a private repository's
would; the others get 401 and nothing of the repository.
"""

from __future__ import annotations

import base64
import functools
import hmac
import subprocess
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


@dataclass(frozen=True, slots=True)
class ChartRepo:
    url: str
    directory: Path


class _QuietHandler(SimpleHTTPRequestHandler):
    expected_authorization: str | None = None  # "Basic <base64>" when the repository is private

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def send_head(self) -> Any:
        wanted = self.expected_authorization
        given = self.headers.get("Authorization") or ""
        if wanted is not None and not hmac.compare_digest(given.encode(), wanted.encode()):
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="fleetwave-private"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return None
        return super().send_head()


def _handler(directory: Path, basic_auth: tuple[str, str] | None) -> Any:
    if basic_auth is None:
        return functools.partial(_QuietHandler, directory=str(directory))
    token = base64.b64encode(":".join(basic_auth).encode()).decode()
    private = type("_PrivateHandler", (_QuietHandler,), {"expected_authorization": f"Basic {token}"})
    return functools.partial(private, directory=str(directory))


def package(helm: str, chart_dir: Path, out: Path, *, version: str, app_version: str | None = None) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    argv = [helm, "package", str(chart_dir), "--destination", str(out), "--version", version]
    argv += ["--app-version", app_version or version]
    subprocess.run(argv, check=True, capture_output=True, text=True)
    return out / f"{chart_dir.name}-{version}.tgz"


@contextmanager
def serve(
    helm: str,
    directory: Path,
    charts: Sequence[tuple[Path, str]],
    *,
    basic_auth: tuple[str, str] | None = None,
    address: str = "127.0.0.1",
) -> Iterator[ChartRepo]:
    """Package each (chart_dir, version), index them, and serve `directory` on `address` until the
    block exits; with `basic_auth` (username, password), only to requests that carry them."""
    for chart_dir, version in charts:
        package(helm, chart_dir, directory, version=version)
    server = ThreadingHTTPServer((address, 0), _handler(directory, basic_auth))
    url = f"http://{address}:{server.server_address[1]}"
    subprocess.run([helm, "repo", "index", str(directory), "--url", url], check=True, capture_output=True)
    thread = threading.Thread(target=server.serve_forever, name="chart-repo", daemon=True)
    thread.start()
    try:
        yield ChartRepo(url=url, directory=directory)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
