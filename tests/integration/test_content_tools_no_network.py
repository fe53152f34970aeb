"""The pinned kustomize cannot reach loopback (issue 40, finding 7; ADR 0098).

Go ignores HTTP(S)_PROXY for loopback addresses, so a kustomization listing
`http://127.0.0.1:PORT/x.yaml` was fetched into delivered content: anything the controller's pod
serves on its own ports, sidecars included. Here the test process serves such a YAML, the real
kustomize builds a kustomization pointing at it, and the build must fail without the server seeing
a request. fleetwave-render has no network path of its own (Sprig's getHostByName is removed); it
runs under the same filter, which tests/unit/delivery/test_delivery_bounded_network.py checks.
"""

from __future__ import annotations

import asyncio
import http.server
import io
import tarfile
import threading
import urllib.request
from collections.abc import Iterator

import pytest

from fleetwave.delivery.kustomize import KustomizeError, Kustomizer
from fleetwave.local import binaries

CONFIGMAP = b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: from-loopback}\ndata: {secret: 'yes'}\n"


def tgz(files: dict[str, str]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as out:
        for name, text in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(text.encode())
            out.addfile(info, io.BytesIO(text.encode()))
    return buf.getvalue()


class Served:
    def __init__(self) -> None:
        self.requests: list[str] = []


@pytest.fixture
def loopback_yaml() -> Iterator[tuple[int, Served]]:
    served = Served()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            served.requests.append(self.path)
            self.send_response(200)
            self.send_header("Content-Type", "application/yaml")
            self.send_header("Content-Length", str(len(CONFIGMAP)))
            self.end_headers()
            self.wfile.write(CONFIGMAP)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], served
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def kustomizer(bins: binaries.Binaries) -> Kustomizer:
    return Kustomizer(bins.path("kustomize"))


def test_the_server_answers_a_process_without_the_filter(loopback_yaml: tuple[int, Served]) -> None:
    # The control: the same URL is reachable from here, so a refusal below is the filter's doing.
    port, served = loopback_yaml
    direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # whatever this shell's proxy
    with direct.open(f"http://127.0.0.1:{port}/x.yaml", timeout=10) as answer:
        assert answer.read() == CONFIGMAP
    assert served.requests == ["/x.yaml"]


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_kustomize_cannot_fetch_a_resource_from_loopback(
    kustomizer: Kustomizer, loopback_yaml: tuple[int, Served], host: str
) -> None:
    port, served = loopback_yaml
    archive = tgz({"kustomization.yaml": f"resources:\n- http://{host}:{port}/x.yaml\n"})
    with pytest.raises(KustomizeError, match="kustomize build failed") as info:
        asyncio.run(kustomizer.build(archive, path="."))
    assert "operation not permitted" in str(info.value)  # socket(2) refused, not a dial that failed
    assert served.requests == []


def test_kustomize_still_builds_what_the_archive_holds(kustomizer: Kustomizer) -> None:
    archive = tgz({"kustomization.yaml": "resources: [cm.yaml]\n", "cm.yaml": CONFIGMAP.decode()})
    out = asyncio.run(kustomizer.build(archive, path="."))
    assert "name: from-loopback" in out
