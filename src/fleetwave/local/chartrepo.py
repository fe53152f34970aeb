"""A Helm chart repository served over HTTP on loopback, for the demo and the tests.

Charts are packaged with the real `helm` (so the index and archives are exactly what a public
repository serves) and served by a stdlib HTTP server on a free 127.0.0.1 port.
"""

from __future__ import annotations

import functools
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
    def log_message(self, format: str, *args: Any) -> None:
        pass


def package(helm: str, chart_dir: Path, out: Path, *, version: str, app_version: str | None = None) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    argv = [helm, "package", str(chart_dir), "--destination", str(out), "--version", version]
    argv += ["--app-version", app_version or version]
    subprocess.run(argv, check=True, capture_output=True, text=True)
    return out / f"{chart_dir.name}-{version}.tgz"


@contextmanager
def serve(helm: str, directory: Path, charts: Sequence[tuple[Path, str]]) -> Iterator[ChartRepo]:
    """Package each (chart_dir, version), index them, and serve `directory` until the block exits."""
    for chart_dir, version in charts:
        package(helm, chart_dir, directory, version=version)
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(directory)))
    url = f"http://127.0.0.1:{server.server_address[1]}"
    subprocess.run([helm, "repo", "index", str(directory), "--url", url], check=True, capture_output=True)
    thread = threading.Thread(target=server.serve_forever, name="chart-repo", daemon=True)
    thread.start()
    try:
        yield ChartRepo(url=url, directory=directory)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
