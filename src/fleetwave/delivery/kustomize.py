"""Build Kustomize overlays and apply patches with the pinned `kustomize` binary (ADR 0089).

Two uses, both the real kustomize rather than an imitation:

- `build`: a Sveltos kustomizationRef's ConfigMap/Secret holds `kustomize.tar.gz`, a directory tree;
  it is unpacked into a private temporary directory (regular files and directories only, no path
  leaving the root, bounded in count and size) and built at `path`, with `components` and
  `targetNamespace` added by an outer kustomization, as Sveltos adds them.
- `patch`: a profile's `patches` (strategic merge or JSON 6902, each with an optional target) applied
  to the objects it delivers, through a kustomization whose only resource is those objects.

kustomize runs under `bounded.run`: no network, no PATH (so no git, no exec plugins, no helm), rlimits,
a deadline and an output cap. Remote bases therefore fail instead of being fetched.
"""

from __future__ import annotations

import io
import os
import posixpath
import tarfile
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from fleetwave.delivery import bounded

ARCHIVE_KEY = "kustomize.tar.gz"  # Sveltos' key in binaryData (ConfigMap) or data (Secret)
MAX_ENTRIES = 2000
MAX_UNPACKED_BYTES = 64 * 1024 * 1024


class KustomizeError(ValueError):
    """The archive, path or patches cannot be built; the message names what and never quotes data."""


@dataclass(frozen=True, slots=True)
class Kustomizer:
    binary: str = "kustomize"
    limits: bounded.Limits = field(default_factory=bounded.Limits)

    async def build(
        self,
        archive: bytes,
        *,
        path: str | None,
        components: Sequence[str] = (),
        target_namespace: str | None = None,
    ) -> str:
        """The YAML kustomize builds from the archive's directory `path` (default its root)."""
        inner = _relative(path or ".", "path")
        with tempfile.TemporaryDirectory(prefix="fleetwave-kustomize-") as tmp:
            root = Path(tmp) / "tree"
            _unpack(archive, root)
            if not (root / inner).is_dir():
                raise KustomizeError(f"path {path!r} is not a directory of the archive")
            outer: dict[str, Any] = {
                "apiVersion": "kustomize.config.k8s.io/v1beta1",
                "kind": "Kustomization",
                "resources": [posixpath.join("tree", inner)],
            }
            if components:
                outer["components"] = [
                    posixpath.join("tree", _relative(posixpath.join(inner, c), "components"))
                    for c in components
                ]
            if target_namespace:
                outer["namespace"] = target_namespace
            return await self._build(Path(tmp), outer)

    async def patch(self, objects: Sequence[Mapping[str, Any]], patches: Sequence[Mapping[str, Any]]) -> str:
        """The YAML of `objects` after `patches` ({"patch": text, "target": {...}}), in order."""
        with tempfile.TemporaryDirectory(prefix="fleetwave-patch-") as tmp:
            _write(Path(tmp) / "objects.yaml", yaml.safe_dump_all([dict(o) for o in objects], sort_keys=True))
            outer = {
                "apiVersion": "kustomize.config.k8s.io/v1beta1",
                "kind": "Kustomization",
                "resources": ["objects.yaml"],
                "patches": [dict(p) for p in patches],
            }
            return await self._build(Path(tmp), outer)

    async def _build(self, where: Path, kustomization: Mapping[str, Any]) -> str:
        _write(where / "kustomization.yaml", yaml.safe_dump(dict(kustomization), sort_keys=False))
        try:
            done = await bounded.run(
                [self.binary, "build", "--load-restrictor", "LoadRestrictionsRootOnly", str(where)],
                limits=self.limits,
                cwd=str(where),
                home=str(where),
            )
        except bounded.ToolError as e:
            raise KustomizeError(str(e)) from None
        if done.code != 0:
            raise KustomizeError(f"kustomize build failed: {_clean(done.stderr, where)}")
        return done.stdout.decode(errors="replace")


def _clean(stderr: str, where: Path) -> str:
    """kustomize's message without our temporary paths, on one line, bounded."""
    text = " ".join(stderr.replace(str(where) + "/tree/", "").replace(str(where) + "/", "").split())
    return text.removeprefix("Error: ")[:500]


def _relative(path: str, what: str) -> str:
    norm = posixpath.normpath(path.strip() or ".")
    if posixpath.isabs(norm) or norm == ".." or norm.startswith("../"):
        raise KustomizeError(f"{what} {path!r} must stay inside the archive")
    return norm


def _write(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)  # content may hold secrets
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(text)


def _unpack(archive: bytes, root: Path) -> None:
    """Regular files and directories only, every name inside `root`, bounded in count and size."""
    root.mkdir(mode=0o700)
    try:
        with tarfile.open(fileobj=io.BytesIO(archive), mode="r:*") as tar:
            _extract(tar, root)
    except (tarfile.TarError, EOFError):
        raise KustomizeError(f"{ARCHIVE_KEY} is not a tar archive (gzip-compressed or plain)") from None
    except OSError as e:  # a file where the archive wants a directory, say
        raise KustomizeError(f"{ARCHIVE_KEY} cannot be unpacked: {e.strerror or 'damaged'}") from None


def _extract(tar: tarfile.TarFile, root: Path) -> None:
    total = 0
    for count, member in enumerate(_members(tar), start=1):
        if count > MAX_ENTRIES:
            raise KustomizeError(f"{ARCHIVE_KEY} holds more than {MAX_ENTRIES} entries")
        name = _relative(member.name, "archive entry")
        if name == ".":
            continue
        target = root / name
        if member.isdir():
            target.mkdir(mode=0o700, parents=True, exist_ok=True)
            continue
        if not member.isfile():
            raise KustomizeError(f"{ARCHIVE_KEY}: {name} is not a regular file or directory")
        total += member.size
        if total > MAX_UNPACKED_BYTES:
            raise KustomizeError(f"{ARCHIVE_KEY} unpacks to more than {MAX_UNPACKED_BYTES} bytes")
        source = tar.extractfile(member)
        if source is None:
            raise KustomizeError(f"{ARCHIVE_KEY}: {name} cannot be read")
        target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(source.read(member.size + 1)[: member.size])


def _members(tar: tarfile.TarFile) -> Any:
    try:
        yield from tar
    except (tarfile.TarError, EOFError, OSError, ValueError):
        raise KustomizeError(f"{ARCHIVE_KEY} is damaged") from None
