"""Flux source artifacts: what a GitRepository, OCIRepository or Bucket offers, and its download (ADR 0103).

Flux's source-controller fetches Git, OCI and bucket content and serves each revision as a tar.gz
*artifact*, announced in the source's `status.artifact` (`url`, `revision`, `digest`, `size`).
fleetwave never talks to Git or a registry itself: it reads that status from its informer cache and
downloads the artifact from the URL, as Sveltos does.

The download is hostile input like any other: the URL goes through the outbound guards (never
link-local or cloud-metadata addresses, loopback only with the operator's opt-in, every resolved
address checked and connected to directly), no redirect is followed, the size is bounded before
anything is read (a declared `Content-Length` or `status.artifact.size` over the bound is refused)
and while reading (the stream stops at the bound), and the bytes must hash to the announced digest
before anything else looks at them.

`Transient` problems (the server is down, a 5xx, a timeout) are retried; every other problem is
`Broken`: this revision of the source cannot be delivered, and says why.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fleetwave.promapi.download import Refused, Unavailable, get_capped

FLUX_GROUP = "source.toolkit.fluxcd.io"
FLUX_KINDS = ("GitRepository", "OCIRepository", "Bucket")
MAX_ARTIFACT_BYTES = 64 * 1024 * 1024  # compressed; unpacking has its own bounds (`unpack`)
DOWNLOAD_SECONDS = 60.0
_ALGORITHMS = {"sha256": hashlib.sha256, "sha384": hashlib.sha384, "sha512": hashlib.sha512}


class Broken(ValueError):
    """This artifact cannot be delivered; the message names the reason, never the URL's query."""


class Transient(RuntimeError):
    """The artifact could not be fetched just now (server down, 5xx, timeout): try again later."""


@dataclass(frozen=True, slots=True)
class Artifact:
    """One revision of a Flux source, as its status announces it."""

    source: str  # Kind/namespace/name
    url: str
    revision: str  # e.g. main@sha1:0123abcd...
    digest: str  # algorithm:hex
    size: int | None

    @property
    def short_revision(self) -> str:
        return short_revision(self.revision)


def short_revision(revision: str) -> str:
    """`main@sha1:0123456789ab…` as people read it: the hash cut to 7 characters."""
    head, sep, tail = revision.rpartition(":")
    if not sep or len(tail) <= 12:
        return revision
    return f"{head}:{tail[:7]}"


def artifact_of(kind: str, obj: Mapping[str, Any]) -> Artifact:
    """The artifact `obj`'s status announces, or Broken saying why there is none to deliver."""
    meta = obj.get("metadata") or {}
    source = f"{kind}/{meta.get('namespace')}/{meta.get('name')}"
    status = obj.get("status") or {}
    raw = status.get("artifact") if isinstance(status, Mapping) else None
    if not isinstance(raw, Mapping):
        raise Broken(f"{source} has no artifact yet ({_readiness(status)})")
    url, revision = raw.get("url"), raw.get("revision")
    if not isinstance(url, str) or not url or not isinstance(revision, str) or not revision:
        raise Broken(f"{source}: status.artifact has no url or revision")
    size = raw.get("size")
    return Artifact(
        source=source,
        url=url,
        revision=revision[:200],
        digest=_digest(raw, source),
        size=size if isinstance(size, int) and size >= 0 else None,
    )


def _digest(raw: Mapping[str, Any], source: str) -> str:
    """`digest` (Flux v1: "sha256:<hex>"), or `checksum` (v1beta2: a bare SHA-256 hex)."""
    digest, checksum = raw.get("digest"), raw.get("checksum")
    if isinstance(digest, str) and ":" in digest:
        algorithm, _, value = digest.partition(":")
    elif isinstance(checksum, str) and checksum:
        algorithm, value = "sha256", checksum
    else:
        raise Broken(f"{source}: status.artifact has no digest, so its content cannot be verified")
    if algorithm not in _ALGORITHMS:
        raise Broken(f"{source}: digest algorithm {algorithm[:20]} is not supported (sha256, sha384, sha512)")
    if not value or any(c not in "0123456789abcdef" for c in value.lower()):
        raise Broken(f"{source}: status.artifact.digest is not a hex digest")
    return f"{algorithm}:{value.lower()}"


def _readiness(status: Any) -> str:
    conditions = status.get("conditions") if isinstance(status, Mapping) else None
    for condition in conditions if isinstance(conditions, list) else []:
        if isinstance(condition, Mapping) and condition.get("type") == "Ready":
            message = " ".join(str(condition.get("message") or "").split())[:300]
            return f"not ready: {message}" if message else "not ready"
    return "the source-controller has not reported on it"


async def download(artifact: Artifact) -> bytes:
    """The artifact's bytes, verified against its digest: Transient or Broken otherwise."""
    at = f"{artifact.source} at {artifact.short_revision}"
    if artifact.size is not None and artifact.size > MAX_ARTIFACT_BYTES:
        raise Broken(f"{at}: the artifact is larger than {MAX_ARTIFACT_BYTES} bytes")
    try:
        body = await get_capped(
            artifact.url, max_bytes=MAX_ARTIFACT_BYTES, seconds=DOWNLOAD_SECONDS, field="status.artifact.url"
        )
    except Unavailable as e:
        raise Transient(f"{at}: the artifact could not be fetched: {e}") from None
    except Refused as e:
        raise Broken(f"{at}: the artifact cannot be fetched: {e}") from None
    _verify(artifact, body)
    return body


def _verify(artifact: Artifact, body: bytes) -> None:
    algorithm, _, expected = artifact.digest.partition(":")
    found = _ALGORITHMS[algorithm](body).hexdigest()
    if found != expected:
        raise Broken(
            f"{artifact.source} at {artifact.short_revision}: the artifact does not match its digest "
            f"({algorithm}:{found[:12]}… served, {algorithm}:{expected[:12]}… announced); nothing is applied"
        )
