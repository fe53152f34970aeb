"""A real Git server on loopback (smart HTTP), for Flux's source-controller in the local fleet and tests.

Git itself speaks the protocol: every request runs `git http-backend` (Debian's `git` package) as a
CGI program, so clones, fetches and pushes are exactly what any Git hosting serves. This module is
only the web server around it — a stdlib ThreadingHTTPServer on 127.0.0.1 that hands the backend the
request (CGI variables, the body streamed to its stdin: chunked bodies decoded, gzip ones passed
through with `HTTP_CONTENT_ENCODING`, which the backend inflates itself) and streams its answer back.

Every repository under the root is exported and accepts pushes without authentication: the server
binds loopback only, for one user's fleet or one test session. `create_repo` and `push_tree` are the
helpers that put content there (a private HOME and config, a fixed author), returning commit shas.

Run detached, outliving the command that started it (`fleetwave local up --with-flux`):

    python -m fleetwave.local.gitserver serve --root DIR --port PORT
"""

from __future__ import annotations

import argparse
import contextlib
import io
import logging
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import urllib.parse
from collections.abc import Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import FrameType, TracebackType
from typing import IO, Any

_log = logging.getLogger(__name__)

AUTHOR = ("fleetwave", "fleetwave@localhost")
_CHUNK = 64 * 1024
_PUSH_LOCKS: dict[tuple[str, str], threading.Lock] = {}
_PUSH_LOCKS_GUARD = threading.Lock()


class GitError(RuntimeError):
    """git is missing or a git command failed; the message names the command and git's own words."""


def git_binary() -> str:
    found = shutil.which("git")
    if found is None:
        raise GitError("git is not installed (Debian: apt-get install git, which includes git-http-backend)")
    return found


def isolated_env(home: Path) -> dict[str, str]:
    """The environment of every git this module runs: no user or system config (a developer's
    signing, hooks or URL rewrites must not change what is pushed), a fixed author."""
    name, email = AUTHOR
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith("GIT_")},
        "HOME": str(home),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_AUTHOR_NAME": name,
        "GIT_AUTHOR_EMAIL": email,
        "GIT_COMMITTER_NAME": name,
        "GIT_COMMITTER_EMAIL": email,
        "GIT_TERMINAL_PROMPT": "0",
    }


def _git(args: list[str], *, env: Mapping[str, str], cwd: Path | None = None) -> str:
    proc = subprocess.run(
        [git_binary(), "-c", "init.defaultBranch=main", "-c", "commit.gpgsign=false", *args],
        cwd=cwd,
        env=dict(env),
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise GitError(f"git {args[0]} failed (exit {proc.returncode}): {proc.stderr.strip()[-500:]}")
    return proc.stdout.strip()


def create_repo(root: Path, name: str) -> Path:
    """A new bare repository `<root>/<name>.git` whose default branch is main (kept if it exists)."""
    path = root / f"{name}.git"
    if not (path / "HEAD").is_file():
        with tempfile.TemporaryDirectory(prefix="fleetwave-git-") as home:
            _git(["init", "-q", "--bare", str(path)], env=isolated_env(Path(home)))
    return path


def branch_head(remote: str, branch: str) -> str | None:
    """The sha `branch` of `remote` (a URL or a path) points at, or None when it has no such branch."""
    with tempfile.TemporaryDirectory(prefix="fleetwave-git-") as home:
        found = _git(["ls-remote", remote, f"refs/heads/{branch}"], env=isolated_env(Path(home)))
    return found.split()[0] if found else None


def _push_lock(remote: str, branch: str) -> threading.Lock:
    with _PUSH_LOCKS_GUARD:
        return _PUSH_LOCKS.setdefault((remote, branch), threading.Lock())


def push_tree(remote: str, tree: Path, *, branch: str = "main", message: str = "update") -> str:
    """Commit exactly the files under `tree` (files absent from it are deleted) on top of `branch` of
    `remote` (a URL or a path) and push; returns the new commit's sha. The tree is used as the work
    tree in place: nothing is copied and no `.git` is written into it. Pushes to one branch from
    this process are serialized: two at once would otherwise race and one be refused as not a
    fast-forward."""
    with _push_lock(remote, branch), tempfile.TemporaryDirectory(prefix="fleetwave-git-") as tmp:
        env = isolated_env(Path(tmp))
        repo = Path(tmp) / "repo"
        _git(["init", "-q", str(repo)], env=env)
        git = ["--git-dir", str(repo / ".git"), "--work-tree", str(tree)]
        ref = f"refs/heads/{branch}"
        if branch_head(remote, branch):
            _git([*git, "fetch", "-q", remote, ref], env=env)
            _git([*git, "update-ref", ref, "FETCH_HEAD"], env=env)
        _git([*git, "symbolic-ref", "HEAD", ref], env=env)
        # The index starts empty, so `add -A` stages the tree as it is: deletions included.
        _git([*git, "add", "-A"], env=env)
        _git([*git, "commit", "-q", "--allow-empty", "-m", message], env=env)
        _git([*git, "push", "-q", remote, f"HEAD:{ref}"], env=env)
        return _git([*git, "rev-parse", "HEAD"], env=env)


# --- the HTTP server ----------------------------------------------------------------------------------


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    root: Path
    git: str
    home: Path


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:
        self._backend()

    def do_POST(self) -> None:
        self._backend()

    def log_message(self, format: str, *args: Any) -> None:
        _log.debug("%s %s", self.address_string(), format % args)

    def _backend(self) -> None:
        with (
            tempfile.TemporaryFile() as errors,
            subprocess.Popen(
                [self.server.git, "http-backend"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=errors,
                env=self._cgi_env(),
            ) as proc,
        ):
            assert proc.stdin is not None
            assert proc.stdout is not None
            feeder = threading.Thread(target=self._feed, args=(proc.stdin,), daemon=True)
            feeder.start()
            try:
                self._relay(proc.stdout)
            except ConnectionError:
                proc.kill()  # the client went away: nothing would read the rest of the answer
            finally:
                feeder.join(timeout=30)
            if proc.wait() != 0:
                errors.seek(0)
                tail = errors.read()[-500:].decode(errors="replace")
                _log.warning("git http-backend exited with %s: %s", proc.returncode, tail)

    def _cgi_env(self) -> dict[str, str]:
        path, _, query = self.path.partition("?")
        env = isolated_env(self.server.home) | {
            "GIT_PROJECT_ROOT": str(self.server.root),
            "GIT_HTTP_EXPORT_ALL": "1",
            # Pushes without a REMOTE_USER: the server is loopback-only and unauthenticated by design.
            "GIT_CONFIG_COUNT": "1",
            "GIT_CONFIG_KEY_0": "http.receivepack",
            "GIT_CONFIG_VALUE_0": "true",
            "GATEWAY_INTERFACE": "CGI/1.1",
            "SERVER_PROTOCOL": self.request_version,
            "REQUEST_METHOD": self.command,
            "PATH_INFO": urllib.parse.unquote(path),
            "QUERY_STRING": query,
            "REMOTE_ADDR": self.client_address[0],
        }
        for header, variable in (
            ("Content-Type", "CONTENT_TYPE"),
            ("Content-Length", "CONTENT_LENGTH"),
            ("Content-Encoding", "HTTP_CONTENT_ENCODING"),
            ("Git-Protocol", "HTTP_GIT_PROTOCOL"),
        ):
            value = self.headers.get(header)
            if value is not None:
                env[variable] = value
        return env

    def _feed(self, stdin: IO[bytes]) -> None:
        """Stream the request body to the backend; a chunked body is decoded and simply ends, which
        the backend reads as end of input (no CONTENT_LENGTH is set for it)."""
        with contextlib.suppress(BrokenPipeError, ConnectionError, ValueError), stdin:
            if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                for chunk in _chunks(self.rfile):
                    stdin.write(chunk)
                return
            remaining = int(self.headers.get("Content-Length") or 0)
            while remaining > 0:
                data = self.rfile.read(min(_CHUNK, remaining))
                if not data:
                    return
                stdin.write(data)
                remaining -= len(data)

    def _relay(self, stdout: IO[bytes]) -> None:
        """The CGI answer: headers (a `Status:` one sets the code) up to a blank line, then the body,
        streamed; HTTP/1.0, so the end of the body is the end of the connection."""
        status, headers = 200, []
        for raw in iter(stdout.readline, b""):
            line = raw.decode("latin-1").rstrip("\r\n")
            if not line:
                break
            name, _, value = line.partition(":")
            if name.lower() == "status":
                status = int(value.split()[0])
            else:
                headers.append((name, value.strip()))
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        while data := stdout.read(_CHUNK):
            self.wfile.write(data)


def _chunks(rfile: io.BufferedIOBase) -> Iterator[bytes]:
    """The data of an HTTP/1.1 chunked body, chunk by chunk (extensions and trailers dropped)."""
    while True:
        size = int(rfile.readline().split(b";")[0].strip() or b"0", 16)
        if size == 0:
            while rfile.readline().strip():
                pass  # trailers
            return
        yield rfile.read(size)
        rfile.readline()  # the CRLF after each chunk


class GitServer:
    """The server for the repositories under `root`, on 127.0.0.1:`port` (0: a free one) until `stop`."""

    def __init__(self, root: Path, *, port: int = 0) -> None:
        self.root = root.resolve()
        self.root.mkdir(parents=True, exist_ok=True)
        self._home = tempfile.TemporaryDirectory(prefix="fleetwave-git-server-")
        self._server = _Server(("127.0.0.1", port), _Handler)
        self._server.root, self._server.git, self._server.home = (
            self.root,
            git_binary(),
            Path(self._home.name),
        )
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def repo_url(self, name: str) -> str:
        return f"{self.url}/{name}.git"

    def create_repo(self, name: str) -> str:
        """A bare repository `name` (kept if it exists); returns its clone URL."""
        create_repo(self.root, name)
        return self.repo_url(name)

    def start(self) -> GitServer:
        self._thread = threading.Thread(target=self._server.serve_forever, name="git-server", daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        self._server.serve_forever()

    def interrupt(self) -> None:
        """End `serve_forever` from any thread, a signal handler on the serving one included."""
        threading.Thread(target=self._server.shutdown, daemon=True).start()

    def stop(self) -> None:
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join(timeout=5)
        self._server.server_close()
        self._home.cleanup()

    def __enter__(self) -> GitServer:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def _serve(root: Path, port: int) -> None:
    server = GitServer(root, port=port)

    def on_term(signum: int, frame: FrameType | None) -> None:
        server.interrupt()

    signal.signal(signal.SIGTERM, on_term)
    try:
        server.serve_forever()
    finally:
        server.stop()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m fleetwave.local.gitserver")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="serve the repositories under --root until SIGTERM")
    serve.add_argument("--root", type=Path, required=True)
    serve.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(message)s")
    _serve(args.root, args.port)


if __name__ == "__main__":
    main()
