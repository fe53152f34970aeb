"""Push a directory as a Flux OCI artifact, through a registry's HTTP API (OCI distribution spec).

What `flux push artifact` writes, without the flux CLI: a manifest whose config is Flux's (empty JSON,
`application/vnd.cncf.flux.config.v1+json`) and whose one layer is the directory as a gzipped tar
(`application/vnd.cncf.flux.content.v1.tar+gzip`, the media type an OCIRepository selects by
default). The tar is reproducible (sorted names, zero times and owners), so the same tree pushed
twice is the same digest. Blobs are uploaded monolithically (POST, then PUT with the digest); a blob
the registry already has is not sent again.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urljoin

import httpx2

MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json"
CONFIG_TYPE = "application/vnd.cncf.flux.config.v1+json"
CONTENT_TYPE = "application/vnd.cncf.flux.content.v1.tar+gzip"
TIMEOUT = 30.0


class OciError(RuntimeError):
    """The registry refused a step of the push; the message names the step and the answer."""


@dataclass(frozen=True, slots=True)
class Blob:
    media_type: str
    data: bytes

    @property
    def digest(self) -> str:
        return f"sha256:{hashlib.sha256(self.data).hexdigest()}"

    def descriptor(self) -> dict[str, object]:
        return {"mediaType": self.media_type, "digest": self.digest, "size": len(self.data)}


def tar_gz(directory: Path) -> bytes:
    """The files and directories under `directory` as a reproducible gzipped tar, names relative."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path in sorted(directory.rglob("*")):
            if path.is_symlink() or not (path.is_file() or path.is_dir()):
                continue  # Flux refuses links in artifacts; nothing else is content
            info = tar.gettarinfo(str(path), arcname=path.relative_to(directory).as_posix())
            info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
            info.mode = 0o755 if path.is_dir() else 0o644
            if path.is_file():
                with path.open("rb") as f:
                    tar.addfile(info, f)
            else:
                tar.addfile(info)
    return gzip.compress(raw.getvalue(), mtime=0)


def manifest(config: Blob, layer: Blob, annotations: Mapping[str, str]) -> bytes:
    document: dict[str, object] = {
        "schemaVersion": 2,
        "mediaType": MANIFEST_TYPE,
        "config": config.descriptor(),
        "layers": [layer.descriptor()],
    }
    if annotations:
        document["annotations"] = dict(annotations)
    return json.dumps(document, separators=(",", ":")).encode()


def push_oci_artifact(
    registry_url: str,
    repo: str,
    tag: str,
    directory: Path,
    *,
    annotations: Mapping[str, str] | None = None,
    client: httpx2.Client | None = None,
) -> str:
    """Push `directory` as `<registry>/<repo>:<tag>` and return the manifest's digest (sha256:...).

    `registry_url`: http(s)://host:port. `client`: one configured for the registry (TLS trust,
    credentials); by default a plain one that ignores proxy variables."""
    config, layer = Blob(CONFIG_TYPE, b"{}"), Blob(CONTENT_TYPE, tar_gz(directory))
    body = manifest(config, layer, annotations or {})
    own = client is None
    http = client or httpx2.Client(timeout=TIMEOUT, trust_env=False)
    try:
        for blob in (config, layer):
            _upload(http, registry_url, repo, blob)
        answer = http.put(
            f"{registry_url}/v2/{repo}/manifests/{tag}", content=body, headers={"Content-Type": MANIFEST_TYPE}
        )
        _check(answer, f"PUT manifest {repo}:{tag}")
    finally:
        if own:
            http.close()
    return f"sha256:{hashlib.sha256(body).hexdigest()}"


def _upload(http: httpx2.Client, registry_url: str, repo: str, blob: Blob) -> None:
    base = f"{registry_url}/v2/{repo}/blobs"
    if http.head(f"{base}/{blob.digest}").status_code == 200:
        return
    started = http.post(f"{base}/uploads/")
    _check(started, f"POST {repo} blob upload")
    # The Location may be relative, and may already carry a query (the upload's state).
    location = urljoin(f"{registry_url}/", started.headers["Location"])
    separator = "&" if "?" in location else "?"
    done = http.put(
        f"{location}{separator}digest={blob.digest}",
        content=blob.data,
        headers={"Content-Type": "application/octet-stream"},
    )
    _check(done, f"PUT {repo} blob {blob.digest}")


def _check(answer: httpx2.Response, step: str) -> None:
    if answer.status_code >= 300:
        raise OciError(f"{step}: HTTP {answer.status_code} {answer.text[:300]}")
