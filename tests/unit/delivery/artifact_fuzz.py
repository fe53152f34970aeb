"""Hostile Flux artifacts through the controller's own path, watched for escapes (ADR 0098, 0103).

Each case's archive is served by a loopback HTTP server and announced with its correct digest, so it
goes the whole way: `ArtifactStore.ensure` (the guarded download, the digest check, the bounded
unpacking child, the files read in a worker thread), then `texts` and `archive`. Nothing of that
path is replaced (the store is handed `artifacts.download` itself, wrapped only to tell the event
loop's ticker which step runs); two of its steps are observed (`observing`):

- after the unpacker returns, and before the store removes its temporary directory, the tree is
  walked: nothing but directories and regular files with one link each, and nothing beside it;
- the texts the store read are compared with the files they came from: regular files inside the
  root, reached through no link, with the same bytes.

And around each case: the store's temporary directory goes under a fresh parent (`tempfile.tempdir`
for the duration of the case) beside a sentinel tree; the parent, a canary directory elsewhere in
/tmp, the names in /, and the names carrying `artifact_cases.MARKER` in /tmp are compared before
and after. Any difference, link or foreign text is an escape.

Used by tests/unit/delivery/test_delivery_artifact_fuzz.py and bench/bench_artifact_fuzz.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import http.server
import os
import re
import shutil
import stat
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from artifact_cases import MARKER, Aim, Case

from fleetwave.delivery import artifact_store, artifacts, bounded, kustomize
from fleetwave.delivery.artifact_store import ArtifactStore, Download, Texts
from fleetwave.delivery.artifacts import Artifact, Broken

PATHS = (".",)  # the artifact's root: every file the unpacker wrote is under it
SOURCE = "GitRepository/flux/fuzz"
# Refusals that mean the unpacker or the scan misbehaved, though the controller stayed clean: a
# traceback (one that passes the error-output cap too), or the scan and tarfile disagreeing.
SUSPECT = ("the unpacker failed", "error output passed", "tarfile could not read what was checked")
BUDGET = ("took longer than", "stopped by signal")  # the unpacker's CPU, memory or time budget spent
Snapshot = dict[str, tuple[str, int, str]]  # relative path -> (kind, size, content digest or link)
Make = Callable[[Case, Aim], Awaitable[bytes]]


class FileServer(http.server.ThreadingHTTPServer):
    """Serves `bodies` (URL path -> bytes) on loopback, as source-controller serves artifacts."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.bodies: dict[str, bytes] = {}

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(http.server.BaseHTTPRequestHandler):
    server: FileServer

    def do_GET(self) -> None:
        body = self.server.bodies.get(self.path)
        self.send_response(404 if body is None else 200)
        self.send_header("Content-Length", str(len(body or b"")))
        self.end_headers()
        self.wfile.write(body or b"")

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextlib.contextmanager
def serving() -> Iterator[FileServer]:
    server = FileServer()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


class Ticker:
    """The event loop's longest gap: a task sleeping `interval` and measuring how late it wakes. Only
    gaps wholly inside `counting` (the controller's path) and outside `paused` (the harness's own
    checks) are kept."""

    def __init__(self, interval: float = 0.001) -> None:
        self.interval = interval
        self.worst = 0.0
        self.worst_during = ""  # `during` when the worst gap happened
        self.during = ""  # which case runs
        self.phase = ""  # which step of the store's work runs
        self.by_phase: dict[str, float] = {}  # the worst gap that ended in each phase
        self.samples = 0
        self._active = 0
        self._epoch = 0

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            start, epoch, counting = loop.time(), self._epoch, self._active > 0
            await asyncio.sleep(self.interval)
            gap = loop.time() - start - self.interval
            if counting and self._active > 0 and epoch == self._epoch:
                self.samples += 1
                self.by_phase[self.phase] = max(self.by_phase.get(self.phase, 0.0), gap)
                if gap > self.worst:
                    self.worst, self.worst_during = gap, self.during

    @contextlib.contextmanager
    def counting(self) -> Iterator[None]:
        self._epoch += 1
        self._active += 1
        try:
            yield
        finally:
            self._active -= 1
            self._epoch += 1

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        self._epoch += 1
        self._active -= 1
        try:
            yield
        finally:
            self._active += 1
            self._epoch += 1

    def reset(self) -> None:
        self.worst, self.worst_during, self.samples, self.by_phase = 0.0, "", 0, {}


@contextlib.asynccontextmanager
async def ticking(ticker: Ticker) -> AsyncIterator[Ticker]:
    task = asyncio.create_task(ticker.run())
    try:
        yield ticker
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


# ---- what the filesystem holds ----


def snapshot(top: Path) -> Snapshot:
    """Everything under `top`, links not followed."""
    out: Snapshot = {}
    for directory, dirs, files in os.walk(top):
        for name in dirs + files:
            path = os.path.join(directory, name)
            out[os.path.relpath(path, top)] = _describe(path)
    return out


def _describe(path: str) -> tuple[str, int, str]:
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode):
        return "link", 0, os.readlink(path)
    if stat.S_ISDIR(info.st_mode):
        return "directory", 0, ""
    if stat.S_ISREG(info.st_mode):  # only the sentinel's and the canary's few small files
        return "file", info.st_size, hashlib.sha256(Path(path).read_bytes()).hexdigest()
    return "special", info.st_mode, ""


def marked(directory: str) -> set[str]:
    """Names in `directory` carrying the marker every hostile name aimed outside carries."""
    try:
        return {name for name in os.listdir(directory) if MARKER in name}
    except OSError:
        return set()


def differences(where: str, before: Snapshot, after: Snapshot) -> list[str]:
    out = [f"{where}: {name} created ({after[name][0]})" for name in sorted(after.keys() - before.keys())]
    out += [f"{where}: {name} removed" for name in sorted(before.keys() - after.keys())]
    out += [
        f"{where}: {name} changed"
        for name in sorted(before.keys() & after.keys())
        if before[name] != after[name]
    ]
    return out


def audit_tree(tree: Path) -> list[str]:
    """What the unpacker left that it must never make: anything beside the root, links, devices."""
    out = [f"{name} created beside the unpack root" for name in os.listdir(tree.parent) if name != tree.name]
    if not os.path.lexists(tree):
        return out
    if not stat.S_ISDIR(os.lstat(tree).st_mode):
        return [*out, "the unpack root is not a directory"]
    for directory, dirs, files in os.walk(tree):  # lstat only: a tree may hold 64 MiB
        for name in dirs + files:
            path = os.path.join(directory, name)
            problem = _not_plain(os.lstat(path))
            if problem:
                out.append(f"{problem} in the unpacked tree: {os.path.relpath(path, tree)}")
    return out


def _not_plain(info: os.stat_result) -> str:
    if stat.S_ISLNK(info.st_mode):
        return "a symbolic link"
    if stat.S_ISREG(info.st_mode):
        return "a hard-linked file" if info.st_nlink != 1 else ""
    return "" if stat.S_ISDIR(info.st_mode) else "a device, FIFO or socket"


def audit_texts(tree: Path, found: dict[str, Texts | str]) -> list[str]:
    """Each text the store read must be a regular file's bytes, inside the root, through no link."""
    out = []
    root = os.path.realpath(tree)
    for path, texts in found.items():
        if isinstance(texts, str):
            continue
        where = tree / path
        is_dir = os.path.lexists(where) and stat.S_ISDIR(os.lstat(where).st_mode)
        for name, text in texts:
            source = where / name if is_dir else where
            problem = _foreign(source, root, text)
            if problem:
                out.append(f"text {name!r} under {path!r}: {problem}")
    return out


def _foreign(source: Path, root: str, text: str) -> str:
    if not os.path.lexists(source):
        return "no such file in the unpacked tree"
    real = os.path.realpath(source)
    if not real.startswith(root + os.sep):
        return f"read from outside the root ({real})"
    if real != os.path.abspath(source):
        return "read through a link"
    info = os.lstat(source)
    if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
        return "not a regular file of one link"
    if Path(source).read_bytes() != text.encode():
        return "not the file's bytes"
    return ""


@dataclass
class Watch:
    """The findings of the observed steps of the case that runs now."""

    ticker: Ticker
    found: list[str] = field(default_factory=list)


@contextlib.contextmanager
def observing(watch: Watch) -> Iterator[None]:
    """The store's unpacking and reading, each followed by its audit (see the module). The store
    calls both by their names in its module, so they are replaced there for the duration (and the
    unpacker is kustomize's, which is what a test replaces to play an unpacker that escapes)."""
    real_unpack, real_collect = kustomize.unpack_child, artifact_store._collect_all
    saved = vars(artifact_store)["unpack_child"]

    async def unpack_child(
        archive: bytes, tree: Path, limits: bounded.Limits = kustomize.UNPACK_LIMITS
    ) -> str | None:
        problem = await real_unpack(archive, tree, limits)
        with watch.ticker.paused():
            watch.found += await asyncio.to_thread(audit_tree, tree)
        return problem

    def collect_all(tree: Path, paths: list[str]) -> dict[str, Texts | str]:
        found = real_collect(tree, paths)  # in the store's worker thread, as always
        with watch.ticker.paused():
            watch.found += audit_texts(tree, found)
        return found

    artifact_store.unpack_child = unpack_child  # type: ignore[attr-defined]
    artifact_store._collect_all = collect_all
    try:
        yield
    finally:
        artifact_store.unpack_child = saved  # type: ignore[attr-defined]
        artifact_store._collect_all = real_collect


# ---- one case ----


@dataclass
class Outcome:
    index: int
    category: str
    shape: str
    verdict: str  # accepted, refused, pending (nothing fetched), crash (anything but Broken)
    message: str  # the refusal as a class (numbers as N), or what crashed
    seconds: float  # ensure + texts + archive
    size: int  # the artifact's bytes
    texts: int = 0
    escapes: list[str] = field(default_factory=list)
    left_behind: list[str] = field(default_factory=list)  # the store's temporary files, not removed

    @property
    def suspect(self) -> bool:
        """Not an escape, but not a clean refusal either: worth a reproducer."""
        return self.verdict in ("crash", "pending") or any(s in self.message for s in SUSPECT)

    @property
    def budget(self) -> bool:
        """Refused because the unpacker was stopped by its budget rather than by a check."""
        return any(s in self.message for s in BUDGET)


def message_class(message: str, artifact: Artifact) -> str:
    """A refusal without its source, revision and numbers: what the category's refusals have in common."""
    text = message.removeprefix(f"{artifact.source} at {artifact.short_revision}: ").removeprefix(
        "the artifact "
    )
    text = re.sub(r"^\S+ is not UTF-8 text", "<file> is not UTF-8 text", text)
    return re.sub(r"(?<![A-Za-z-])\d+", "N", text)  # bzip2 and UTF-8 stay


def announced(url: str, body: bytes) -> Artifact:
    revision = "main@sha1:" + hashlib.sha1(body).hexdigest()  # a name, as Git's
    return Artifact(SOURCE, url, revision, "sha256:" + hashlib.sha256(body).hexdigest(), None)


async def deliver(server: FileServer, ticker: Ticker, name: str, body: bytes) -> tuple[Outcome, Texts]:
    """`body` through a fresh store, as a rollout's pass fetches it ahead and then resolves."""
    path = f"/{name}.tar.gz"
    server.bodies[path] = body
    artifact = announced(server.base + path, body)
    store = ArtifactStore(download=_tagged(ticker))
    outcome = Outcome(-1, "", "", "accepted", "", 0.0, len(body))
    start = time.perf_counter()
    try:
        with ticker.counting():
            await store.ensure(artifact, PATHS)
            texts = store.texts(artifact, PATHS[0])
            kept = store.archive(artifact)
    except Broken as e:
        outcome.verdict, outcome.message = "refused", message_class(str(e), artifact)
        return outcome, ()
    except Exception as e:  # the controller's path must end in texts or Broken, nothing else
        outcome.verdict, outcome.message = "crash", f"{type(e).__name__}: {e}"[:300]
        return outcome, ()
    finally:
        outcome.seconds = time.perf_counter() - start
        server.bodies.pop(path, None)
    if texts is None:
        outcome.verdict, outcome.message = "pending", store.pending(artifact)
    elif kept != body:
        outcome.verdict, outcome.message = "crash", "the store kept other bytes than the verified artifact"
    outcome.texts = len(texts or ())
    return outcome, texts or ()


def _tagged(ticker: Ticker) -> Download:
    """The store's own download, telling the ticker which step a gap ended in."""

    async def download(artifact: Artifact) -> bytes:
        ticker.phase = "download and digest"
        try:
            return await artifacts.download(artifact)
        finally:
            ticker.phase = "unpack and read"

    return download


class Fuzzer:
    """Runs cases one at a time, each under a fresh parent directory (see the module)."""

    def __init__(self, server: FileServer, ticker: Ticker, workdir: Path) -> None:
        self.server, self.ticker, self.workdir = server, ticker, workdir
        self.canary = Path(f"/tmp/fleetwave-fuzz-canary-{os.getpid()}")
        self.watch = Watch(ticker)

    @contextlib.contextmanager
    def running(self) -> Iterator[Fuzzer]:
        self.canary.mkdir(mode=0o755)
        (self.canary / "keep.yaml").write_text("kept: true\n")
        try:
            with observing(self.watch):
                yield self
        finally:
            shutil.rmtree(self.canary, ignore_errors=True)

    async def run(self, case: Case, make: Make | None = None) -> tuple[Outcome, bytes]:
        """The case's outcome, and its archive (for a reproducer); `make` builds the archive (in
        another process, say, so that its memory is not counted as the controller's)."""
        parent = Path(tempfile.mkdtemp(prefix=f"case-{case.index}-", dir=self.workdir))
        _sentinel(parent / "sentinel")
        aim = self._aim(parent)
        body = await make(case, aim) if make is not None else case.archive(aim)
        before = self._look(parent)
        self.watch.found = []
        self.ticker.during = f"case {case.index} ({case.category} / {case.shape})"
        saved, tempfile.tempdir = tempfile.tempdir, str(parent)  # where the store's mkdtemp goes
        try:
            outcome, _ = await deliver(self.server, self.ticker, f"case-{case.index}", body)
        finally:
            tempfile.tempdir = saved
        outcome.index, outcome.category, outcome.shape = case.index, case.category, case.shape
        after = self._look(parent)
        outcome.escapes = list(self.watch.found)
        for where in before:
            for change in differences(where, before[where], after[where]):
                bucket = (
                    outcome.left_behind
                    if change.startswith("parent: fleetwave-artifact-")
                    else outcome.escapes
                )
                bucket.append(change)
        shutil.rmtree(parent)
        return outcome, body

    def _aim(self, parent: Path) -> Aim:
        root = parent / "fleetwave-artifact-x" / "tree"  # as `artifact_store._read_paths` lays it out
        return Aim(
            canary=str(self.canary),
            sentinel=str(parent / "sentinel"),
            to_parent=os.path.relpath(parent, root),
            to_canary=os.path.relpath(self.canary, root),
        )

    def _look(self, parent: Path) -> dict[str, Snapshot]:
        """The case's parent and the canary whole; the root directory's names; marked names in /tmp."""
        names = {"names in /": dict.fromkeys(os.listdir("/"), ("name", 0, ""))}
        for directory in ("/tmp", str(self.workdir)):
            names[f"marked names in {directory}"] = dict.fromkeys(marked(directory), ("name", 0, ""))
        return {"parent": snapshot(parent), "canary": snapshot(self.canary), **names}


def _sentinel(top: Path) -> None:
    (top / "sub").mkdir(parents=True)
    (top / "victim.yaml").write_text("victim: untouched\n")
    (top / "sub" / "inner.yaml").write_text("inner: untouched\n")
