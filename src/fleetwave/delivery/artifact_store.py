"""The Flux artifacts the controller has fetched, by digest, and the manifests under a path (ADR 0103).

A rollout's content is resolved on every pass, synchronously, from caches (`controllers.sveltos.content`);
fetching is I/O. So the pass first `ensure`s, off the event loop, that every artifact its references
name is here (downloaded and verified: `artifacts`; unpacked by the bounded child: `unpack`; the
files under each referenced path read in a worker thread), and the resolve then only looks up
`texts` and `archive`. A digest names content, so what is here never goes stale: it is dropped only
to stay within `max_bytes` (least recently used first). A broken artifact is remembered as broken;
a transient failure is retried after `RETRY_SECONDS`.

Under a path, the files ending in .yaml, .yml or .json are content (sorted by name; anything else —
a README, a .sourceignore — is not); at most `MAX_PATH_FILES` of them and `MAX_PATH_BYTES` in all,
since what a revision delivers is pinned whole into its snapshot. A path may also name one file.
"""

from __future__ import annotations

import asyncio
import os
import posixpath
import shutil
import tempfile
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from fleetwave.delivery import artifacts
from fleetwave.delivery.artifacts import Artifact, Broken, Transient
from fleetwave.delivery.kustomize import UNPACK_LIMITS, unpack_child

MAX_PATH_FILES = 1000
MAX_PATH_BYTES = 2 * 1024 * 1024
RETRY_SECONDS = 5.0
CONTENT_SUFFIXES = (".yaml", ".yml", ".json")
Texts = tuple[tuple[str, str], ...]  # (file under the path, its text)
Download = Callable[[Artifact], Awaitable[bytes]]


@dataclass(slots=True)
class _Entry:
    archive: bytes = b""
    broken: str = ""
    paths: dict[str, Texts | str] = field(default_factory=dict)  # path -> texts, or why not


def normal_path(path: str | None) -> str:
    """`path` inside an artifact, normalised ("." for its root); Broken when it leaves the root."""
    norm = posixpath.normpath((path or "").strip() or ".")
    if posixpath.isabs(norm) or norm == ".." or norm.startswith("../"):
        raise Broken(f"path {path!r} must stay inside the artifact")
    return norm


class ArtifactStore:
    """Fetched artifacts by digest (see the module)."""

    def __init__(self, *, max_bytes: int = 256 * 1024 * 1024, download: Download | None = None) -> None:
        self._max_bytes = max_bytes
        self._download = download or artifacts.download
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._transient: dict[str, tuple[float, str]] = {}  # digest -> (when, why)
        self._locks: dict[str, asyncio.Lock] = {}
        self._downloads = asyncio.Semaphore(2)  # two at a time: each may hold MAX_ARTIFACT_BYTES

    async def ensure(self, artifact: Artifact, paths: Iterable[str]) -> None:
        """`artifact` fetched and the texts under each of `paths` read (problems are remembered)."""
        lock = self._locks.setdefault(artifact.digest, asyncio.Lock())
        try:
            async with lock:
                entry = await self._entry(artifact)
                if entry is None or entry.broken:
                    return
                missing = sorted({p for p in paths if p not in entry.paths})
                if missing:
                    entry.paths.update(await _read_paths(entry.archive, missing))
        finally:
            if not lock.locked():
                self._locks.pop(artifact.digest, None)

    async def _entry(self, artifact: Artifact) -> _Entry | None:
        entry = self._entries.get(artifact.digest)
        if entry is not None:
            self._entries.move_to_end(artifact.digest)
            return entry
        failed = self._transient.get(artifact.digest)
        if failed is not None and time.monotonic() - failed[0] < RETRY_SECONDS:
            return None
        try:
            async with self._downloads:
                entry = _Entry(archive=await self._download(artifact))
        except Transient as e:
            self._transient[artifact.digest] = (time.monotonic(), str(e))
            return None
        except Broken as e:
            entry = _Entry(broken=str(e))
        self._transient.pop(artifact.digest, None)
        self._keep(artifact.digest, entry)
        return entry

    def _keep(self, digest: str, entry: _Entry) -> None:
        self._entries[digest] = entry
        while len(self._entries) > 1 and self._size() > self._max_bytes:
            self._entries.popitem(last=False)

    def _size(self) -> int:
        return sum(len(e.archive) for e in self._entries.values())

    def texts(self, artifact: Artifact, path: str) -> Texts | None:
        """The files under `path` of `artifact`; None while it is not fetched (see `pending`);
        Broken when it cannot be delivered."""
        entry = self._known(artifact)
        if entry is None:
            return None
        found = entry.paths.get(path)
        if isinstance(found, str):
            raise Broken(f"{artifact.source} at {artifact.short_revision}: {found}")
        return found

    def archive(self, artifact: Artifact) -> bytes | None:
        """The verified bytes of `artifact`; None while it is not fetched; Broken if it cannot be."""
        entry = self._known(artifact)
        return None if entry is None else entry.archive

    def pending(self, artifact: Artifact) -> str:
        """Why `artifact` is not here: the last transient failure, or that it is being fetched."""
        failed = self._transient.get(artifact.digest)
        return failed[1] if failed else f"{artifact.source}: fetching {artifact.short_revision}"

    def _known(self, artifact: Artifact) -> _Entry | None:
        entry = self._entries.get(artifact.digest)
        if entry is not None and entry.broken:
            raise Broken(entry.broken)
        return entry


async def _read_paths(archive: bytes, paths: list[str]) -> dict[str, Texts | str]:
    """Each path's texts (or why not), from one unpacking of `archive` by the bounded child."""
    tmp = Path(tempfile.mkdtemp(prefix="fleetwave-artifact-"))
    try:
        problem = await unpack_child(archive, tmp / "tree", UNPACK_LIMITS)
        if problem is not None:
            return dict.fromkeys(paths, f"the artifact {problem}")
        return await asyncio.to_thread(_collect_all, tmp / "tree", paths)
    finally:
        await asyncio.to_thread(shutil.rmtree, tmp, ignore_errors=True)


def _collect_all(tree: Path, paths: list[str]) -> dict[str, Texts | str]:
    out: dict[str, Texts | str] = {}
    for path in paths:
        try:
            out[path] = _collect(tree, path)
        except Broken as e:
            out[path] = str(e)
    return out


def _collect(tree: Path, path: str) -> Texts:
    """The content files under `path` of the unpacked `tree` (which holds only files and directories)."""
    where = tree / path
    if where.is_file():
        return (_read(where, posixpath.basename(path), MAX_PATH_BYTES),)
    if not where.is_dir():
        raise Broken(f"path {path!r} does not exist in the artifact")
    names = sorted(_content_files(where))
    if len(names) > MAX_PATH_FILES:
        raise Broken(f"path {path!r} holds more than {MAX_PATH_FILES} manifest files")
    texts: list[tuple[str, str]] = []
    left = MAX_PATH_BYTES
    for name in names:
        texts.append(_read(where / name, name, left))
        left -= len(texts[-1][1].encode())
    return tuple(texts)


def _content_files(root: Path) -> Iterable[str]:
    for directory, _, files in os.walk(root):
        for name in files:
            if name.endswith(CONTENT_SUFFIXES):
                yield os.path.relpath(os.path.join(directory, name), root)


def _read(file: Path, name: str, left: int) -> tuple[str, str]:
    if file.stat().st_size > left:
        raise Broken(f"the manifests under the path are larger than {MAX_PATH_BYTES} bytes in all")
    try:
        return name, file.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise Broken(f"{name} is not UTF-8 text") from None
