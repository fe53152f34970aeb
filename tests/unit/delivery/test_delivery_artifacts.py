"""Flux artifacts: what a source's status announces, the guarded download, the digest check, and the
store that unpacks and reads a path (ADR 0103). Served by a real HTTP server on loopback."""

from __future__ import annotations

import gzip
import hashlib
import http.server
import io
import tarfile
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import tar_archives as ta

from fleetwave.delivery import artifact_store, artifacts
from fleetwave.delivery.artifact_store import ArtifactStore
from fleetwave.delivery.artifacts import Artifact, Broken, Transient
from fleetwave.promapi import guards


def targz(files: dict[str, str], links: dict[str, str] | None = None) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as out:
        for name, text in sorted(files.items()):
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            out.addfile(info, io.BytesIO(data))
        for name, target in (links or {}).items():
            info = tarfile.TarInfo(name)
            info.type, info.linkname = tarfile.SYMTYPE, target
            out.addfile(info)
    return gzip.compress(raw.getvalue(), mtime=0)


class _Files(http.server.BaseHTTPRequestHandler):
    served: dict[str, tuple[int, bytes, dict[str, str]]] = {}
    hits: dict[str, int] = {}

    def do_GET(self) -> None:
        code, body, headers = self.served.get(self.path, (404, b"", {}))
        self.hits[self.path] = self.hits.get(self.path, 0) + 1
        self.send_response(code)
        for key, value in headers.items():
            self.send_header(key, value)
        if "Content-Length" not in headers:
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setenv(guards.ALLOW_LOOPBACK_ENV, "1")
    _Files.served, _Files.hits = {}, {}
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Files)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def serve(base: str, path: str, body: bytes, code: int = 200, **headers: str) -> str:
    _Files.served[path] = (code, body, dict(headers))
    return base + path


def announced(url: str, body: bytes, revision: str = "main@sha1:" + "ab" * 20) -> Artifact:
    return Artifact(
        "GitRepository/flux/apps", url, revision, "sha256:" + hashlib.sha256(body).hexdigest(), None
    )


def source(artifact: dict[str, Any] | None, ready: str = "") -> dict[str, Any]:
    status: dict[str, Any] = {}
    if artifact is not None:
        status["artifact"] = artifact
    if ready:
        status["conditions"] = [{"type": "Ready", "status": "False", "message": ready}]
    return {"metadata": {"namespace": "flux", "name": "apps"}, "status": status}


# ---- what the status announces ----


def test_a_v1_status_gives_the_artifact_and_the_revision_reads_short() -> None:
    found = artifacts.artifact_of(
        "GitRepository",
        source(
            {
                "url": "http://sc/a.tar.gz",
                "revision": "main@sha1:" + "0123456789" * 4,
                "digest": "sha256:AB12",
            }
        ),
    )
    assert found.source == "GitRepository/flux/apps"
    assert found.digest == "sha256:ab12"
    assert found.short_revision == "main@sha1:0123456"


def test_a_v1beta2_checksum_is_a_sha256_digest() -> None:
    found = artifacts.artifact_of(
        "Bucket", source({"url": "http://sc/a.tar.gz", "revision": "sha256:x", "checksum": "cd" * 32})
    )
    assert found.digest == "sha256:" + "cd" * 32


def test_no_artifact_says_why_from_the_ready_condition() -> None:
    with pytest.raises(
        Broken, match=r"GitRepository/flux/apps has no artifact yet \(not ready: auth failed\)"
    ):
        artifacts.artifact_of("GitRepository", source(None, ready="auth failed"))


@pytest.mark.parametrize(
    ("artifact", "reason"),
    [
        ({"url": "http://sc/a", "revision": "r"}, "no digest"),
        ({"url": "http://sc/a", "revision": "r", "digest": "md5:ab"}, "md5 is not supported"),
        ({"url": "http://sc/a", "revision": "r", "digest": "sha256:zz"}, "not a hex digest"),
        ({"revision": "r", "digest": "sha256:ab"}, "no url or revision"),
    ],
)
def test_an_artifact_that_cannot_be_verified_is_refused(artifact: dict[str, Any], reason: str) -> None:
    with pytest.raises(Broken, match=reason):
        artifacts.artifact_of("OCIRepository", source(artifact))


# ---- the download ----


async def test_the_download_is_verified_against_the_digest(server: str) -> None:
    body = targz({"apps/a.yaml": "kind: ConfigMap\n"})
    url = serve(server, "/gitrepository/flux/apps/1.tar.gz", body)
    assert await artifacts.download(announced(url, body)) == body


async def test_a_tampered_artifact_is_broken_and_names_source_and_revision(server: str) -> None:
    body = targz({"a.yaml": "kind: ConfigMap\n"})
    url = serve(server, "/t.tar.gz", targz({"a.yaml": "kind: Secret\n"}))
    with pytest.raises(
        Broken, match=r"GitRepository/flux/apps at main@sha1:ababab[a-f0-9]?: .*does not match"
    ):
        await artifacts.download(announced(url, body))


async def test_an_artifact_over_the_bound_is_refused_before_it_is_read(
    server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(artifacts, "MAX_ARTIFACT_BYTES", 1000)
    body = b"x" * 5000
    url = serve(server, "/big.tar.gz", body)
    with pytest.raises(Broken, match="more than 1000 bytes"):
        await artifacts.download(announced(url, body))
    declared = Artifact("Bucket/flux/b", url, "r", "sha256:00", 2000)
    with pytest.raises(Broken, match="larger than 1000 bytes"):
        await artifacts.download(declared)
    assert _Files.hits["/big.tar.gz"] == 1  # the announced size alone refused the second


async def test_a_server_error_is_transient_and_a_redirect_is_refused(server: str) -> None:
    url = serve(server, "/down.tar.gz", b"", code=503)
    with pytest.raises(Transient, match="answered 503"):
        await artifacts.download(announced(url, b""))
    moved = serve(server, "/moved.tar.gz", b"", code=302, Location="http://169.254.169.254/")
    with pytest.raises(Broken, match="answered 302"):
        await artifacts.download(announced(moved, b""))


async def test_a_metadata_address_is_never_contacted() -> None:
    with pytest.raises(Broken, match="link-local"):
        await artifacts.download(announced("http://169.254.169.254/latest/a.tar.gz", b""))


# ---- the store ----


async def test_the_store_reads_the_manifests_under_a_path_once_per_digest(server: str) -> None:
    body = targz(
        {
            "apps/b.yaml": "kind: B\n",
            "apps/sub/a.yml": "kind: A\n",
            "apps/README.md": "# not content",
            "other/c.yaml": "kind: C\n",
        }
    )
    artifact = announced(serve(server, "/s.tar.gz", body), body)
    store = ArtifactStore()
    await store.ensure(artifact, ["apps"])
    await store.ensure(artifact, ["apps", "other/c.yaml"])
    assert store.texts(artifact, "apps") == (("b.yaml", "kind: B\n"), ("sub/a.yml", "kind: A\n"))
    assert store.texts(artifact, "other/c.yaml") == (("c.yaml", "kind: C\n"),)
    assert store.archive(artifact) == body
    assert _Files.hits["/s.tar.gz"] == 1


async def test_a_missing_path_is_broken_and_names_it(server: str) -> None:
    body = targz({"apps/a.yaml": "kind: A\n"})
    artifact = announced(serve(server, "/m.tar.gz", body), body)
    store = ArtifactStore()
    await store.ensure(artifact, ["nope"])
    with pytest.raises(Broken, match=r"GitRepository/flux/apps at main@sha1:\w+: path 'nope' does not exist"):
        store.texts(artifact, "nope")


def test_a_path_leaving_the_artifact_is_refused() -> None:
    with pytest.raises(Broken, match="must stay inside the artifact"):
        artifact_store.normal_path("../../etc")
    assert artifact_store.normal_path("./apps/") == "apps"
    assert artifact_store.normal_path(None) == "."


async def test_an_artifact_with_a_link_is_refused_whole(server: str) -> None:
    body = targz({"apps/a.yaml": "kind: A\n"}, links={"apps/passwd.yaml": "/etc/passwd"})
    artifact = announced(serve(server, "/l.tar.gz", body), body)
    store = ArtifactStore()
    await store.ensure(artifact, ["apps"])
    with pytest.raises(Broken, match="symbolic link"):
        store.texts(artifact, "apps")


async def test_an_absolute_name_is_refused(server: str) -> None:
    body = gzip.compress(ta.tar(ta.file("/etc/cron.d/x.yaml", "kind: A\n")))
    artifact = announced(serve(server, "/abs.tar.gz", body), body)
    store = ArtifactStore()
    await store.ensure(artifact, ["."])
    with pytest.raises(Broken, match="the artifact entry 1 must stay inside the archive"):
        store.texts(artifact, ".")


async def test_a_transient_failure_is_retried_and_reported_meanwhile(
    server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    body = targz({"a.yaml": "kind: A\n"})
    url = serve(server, "/later.tar.gz", b"", code=503)
    artifact = announced(url, body)
    store = ArtifactStore()
    await store.ensure(artifact, ["."])
    assert store.texts(artifact, ".") is None
    assert "answered 503" in store.pending(artifact)
    serve(server, "/later.tar.gz", body)
    await store.ensure(artifact, ["."])
    assert store.texts(artifact, ".") is None  # not before RETRY_SECONDS
    monkeypatch.setattr(artifact_store, "RETRY_SECONDS", 0.0)
    await store.ensure(artifact, ["."])
    assert store.texts(artifact, ".") == (("a.yaml", "kind: A\n"),)


async def test_content_over_the_path_bound_is_broken(server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(artifact_store, "MAX_PATH_BYTES", 100)
    body = targz({"apps/a.yaml": "x: " + "y" * 80 + "\n", "apps/b.yaml": "x: " + "z" * 80 + "\n"})
    artifact = announced(serve(server, "/p.tar.gz", body), body)
    store = ArtifactStore()
    await store.ensure(artifact, ["apps"])
    with pytest.raises(Broken, match="larger than 100 bytes in all"):
        store.texts(artifact, "apps")


async def test_the_store_keeps_within_its_memory_bound(server: str) -> None:
    bodies = [targz({f"{i}.yaml": "k: " + str(i) * 3000}) for i in range(3)]
    found = [announced(serve(server, f"/{i}.tar.gz", b), b) for i, b in enumerate(bodies)]
    store = ArtifactStore(max_bytes=max(len(b) for b in bodies) + 10)
    for artifact in found:
        await store.ensure(artifact, ["."])
    assert store.archive(found[0]) is None  # dropped, least recently used first
    assert store.archive(found[2]) == bodies[2]
