"""Build Kustomize overlays and apply patches with the pinned `kustomize` binary (ADR 0089).

Two uses, both the real kustomize rather than an imitation:

- `build`: a Sveltos kustomizationRef's ConfigMap/Secret holds `kustomize.tar.gz`, a directory tree;
  a child process (`unpack`, under `bounded.run`) unpacks it into a private temporary directory
  (regular files and directories only, no path leaving the root, every size checked before it is
  read: ADR 0098), and it is built at `path`, with `components` and `targetNamespace` added by an
  outer kustomization, as Sveltos adds them. Nothing of the archive is parsed in the controller.
- `patch`: a profile's `patches` (strategic merge or JSON 6902, each with an optional target) applied
  to the objects it delivers, through a kustomization whose only resource is those objects; the
  same for a Helm chart's rendered output (`patch_text`, run by helm's post-renderer `postrender`).

kustomize runs under `bounded.run`: no sockets (a seccomp filter), no PATH (so no git, no exec
plugins, no helm), rlimits, a deadline and an output cap. Remote bases therefore fail instead of
being fetched, loopback ones included.
"""

from __future__ import annotations

import asyncio
import os
import posixpath
import shutil
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from fleetwave.delivery import bounded, unpack

ARCHIVE_KEY = "kustomize.tar.gz"  # Sveltos' key in binaryData (ConfigMap) or data (Secret)
MAX_ENTRIES = unpack.MAX_ENTRIES
MAX_UNPACKED_BYTES = unpack.MAX_UNPACKED_BYTES
# The unpacker holds the checked tar stream (at most unpack.MAX_TAR_BYTES, about 80 MiB) and a copy
# for tarfile; Python itself needs some 30 MiB of address space.
UNPACK_LIMITS = bounded.Limits(
    wall_seconds=20.0, cpu_seconds=10, memory_bytes=512 * 1024 * 1024, output_bytes=4096
)


class KustomizeError(ValueError):
    """The archive, path or patches cannot be built; the message names what and never quotes data."""


@dataclass(frozen=True, slots=True)
class Kustomizer:
    binary: str = "kustomize"
    limits: bounded.Limits = field(default_factory=bounded.Limits)
    unpack_limits: bounded.Limits = UNPACK_LIMITS

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
        tmp = Path(tempfile.mkdtemp(prefix="fleetwave-kustomize-"))
        try:
            await self._unpack(archive, tmp)
            if not (tmp / "tree" / inner).is_dir():
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
            return await self._build(tmp, outer)
        finally:  # up to 2,000 files: removed off the event loop
            await asyncio.to_thread(shutil.rmtree, tmp, ignore_errors=True)

    async def _unpack(self, archive: bytes, where: Path) -> None:
        """The archive's tree at `where`/tree, unpacked by a child: see `unpack`."""
        problem = await unpack_child(archive, where / "tree", self.unpack_limits)
        if problem is not None:
            raise KustomizeError(f"{ARCHIVE_KEY} {problem}")

    async def patch(self, objects: Sequence[Mapping[str, Any]], patches: Sequence[Mapping[str, Any]]) -> str:
        """The YAML of `objects` after `patches` ({"patch": text, "target": {...}}), in order."""
        return await self.patch_text(yaml.safe_dump_all([dict(o) for o in objects], sort_keys=True), patches)

    async def patch_text(self, manifests: str, patches: Sequence[Mapping[str, Any]]) -> str:
        """`patch` for objects given as YAML text (a Helm chart's rendered output, which kustomize
        parses, not the controller)."""
        with tempfile.TemporaryDirectory(prefix="fleetwave-patch-") as tmp:
            _write(Path(tmp) / "objects.yaml", manifests)
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


async def unpack_child(archive: bytes, tree: Path, limits: bounded.Limits = UNPACK_LIMITS) -> str | None:
    """Unpack `archive` into the new directory `tree` in a bounded child (`unpack`, ADR 0098); None
    when it worked, else what is wrong, as a predicate of the archive ("is damaged (...)")."""
    try:
        done = await bounded.run(
            [sys.executable, "-I", "-m", "fleetwave.delivery.unpack", tree.name],
            stdin=archive,
            limits=limits,
            cwd=str(tree.parent),
            home=str(tree.parent),
            name="the archive's unpacker",
        )
    except bounded.ToolError as e:
        return f"could not be unpacked: {e}"
    if done.code == unpack.REFUSED and done.stderr.count("\n") == 1:
        return done.stderr.strip()[:300]
    if done.code != 0:  # a traceback, say: its text is not for the profile's status
        return f"could not be unpacked (the unpacker failed, code {done.code})"
    return None


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
