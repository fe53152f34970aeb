"""Start and stop the local fleet's background processes.

Each process gets its own session (and so its own process group) so that it outlives the
`fleetwave local up` command that started it, and so that `down` can stop it and everything it
spawned without touching anything else on the machine. A recorded pid is only signalled while its
/proc cmdline still names our state directory: a stale pid reused by an unrelated process is left alone.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

_log = logging.getLogger(__name__)

# Children started by this very Python process (tests, the demo), kept so they can be reaped and so
# that Popen never warns about a still-running child being garbage-collected: fleet processes are
# meant to outlive the handle.
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}


@dataclass(frozen=True, slots=True)
class ProcessRecord:
    name: str
    pid: int
    log: str
    marker: str  # a string that must appear in the process's cmdline (the state dir)


_EPHEMERAL_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_LOWEST_PORT = 10000  # clear of the well-known and registered ports services commonly listen on
_handed_out: set[int] = set()


def _ephemeral_start() -> int:
    """The first port the kernel gives to outgoing connections (Linux default 32768)."""
    try:
        return int(_EPHEMERAL_FILE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port() -> int:
    """A free loopback TCP port for a process about to listen on it, chosen below the kernel's
    ephemeral range: a port the kernel picked (bind to 0) is one it may also hand to any outgoing
    connection before the process binds it, which with hundreds of connections open (a controller
    starting against a large fleet) happens. Never the same port twice from one process."""
    start = _ephemeral_start()
    if start - _LOWEST_PORT >= 1000:
        for _ in range(64):
            port = random.randrange(_LOWEST_PORT, start)
            if port in _handed_out:
                continue
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    continue
            _handed_out.add(port)
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start(
    name: str, argv: Sequence[str], *, log: Path, marker: str, env: dict[str, str] | None = None
) -> ProcessRecord:
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, **(env or {})},
        )
    _CHILDREN[proc.pid] = proc
    return ProcessRecord(name=name, pid=proc.pid, log=str(log), marker=marker)


def is_ours(record: ProcessRecord) -> bool:
    """Is the recorded process alive and still the one we started?"""
    child = _CHILDREN.get(record.pid)
    if child is not None:  # our own child: no cmdline race between fork and exec
        return child.poll() is None
    try:
        cmdline = Path(f"/proc/{record.pid}/cmdline").read_bytes()
    except OSError:
        return False
    return record.marker.encode() in cmdline and not _is_zombie(record.pid)


def _is_zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def stop(records: Sequence[ProcessRecord], *, grace: float = 10.0) -> list[str]:
    """SIGTERM every live process group we own, then SIGKILL what is left after `grace` seconds.

    A group counts as gone only when its last member is: a child a process spawned (helm, a shell)
    must not outlive `down`. Returns the names of processes that had to be killed.
    """
    live = [r for r in records if is_ours(r)]
    for record in live:
        _signal_group(record.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(_running(r) for r in live):
        _reap(live)
        time.sleep(0.1)
    killed = [r for r in live if _running(r)]
    for record in killed:
        _signal_group(record.pid, signal.SIGKILL)
    for _ in range(50):
        _reap(killed)
        if not any(_running(r) for r in killed):
            break
        time.sleep(0.1)
    return [r.name for r in killed]


def _running(record: ProcessRecord) -> bool:
    """The recorded process, or any other member of its process group, is still there."""
    if is_ours(record):
        return True
    try:
        os.killpg(record.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not _only_zombies(record.pid)


def _only_zombies(pgid: int) -> bool:
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            return False
    return True


def _signal_group(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def _reap(records: Sequence[ProcessRecord]) -> None:
    """Collect our exited children when the fleet was started by this very process (tests, demo).

    Only the recorded pids are waited for: waiting for any child would steal the exit status of
    unrelated subprocesses (helm runs) and make them look successful.
    """
    for record in records:
        child = _CHILDREN.get(record.pid)
        if child is not None and child.poll() is not None:
            del _CHILDREN[record.pid]


def rss_bytes(pid: int) -> int:
    """Resident set size of one process, from /proc (0 if it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        return 0
    return 0


def watch_exit(
    proc: subprocess.Popen[bytes],
    what: str,
    log: Path,
    on_exit: Callable[[], None] | None = None,
) -> threading.Event:
    """Call `on_exit` (by default: interrupt the main thread) when `proc` exits before the returned
    event is set, after logging its exit code and the end of `log` (a warning: shown without any
    logging set up). A benchmark waiting on a controller's work stops at once when the controller
    dies, instead of after its time budget."""
    if on_exit is None:
        _interruptible()
        on_exit = _interrupt_main
    expected = threading.Event()

    def watch() -> None:
        code = proc.wait()
        if expected.is_set():
            return
        tail = log.read_text(errors="replace").splitlines()[-15:] if log.exists() else []
        _log.warning("%s exited with %s; the end of its log:\n%s", what, code, "\n".join(tail))
        on_exit()

    threading.Thread(target=watch, name=f"watch-exit-{proc.pid}", daemon=True).start()
    return expected


def _interrupt_main() -> None:
    """A real SIGINT to the main thread: it also ends a blocking call there (a sleep, a select),
    which `_thread.interrupt_main` leaves to finish first."""
    main = threading.main_thread().ident
    assert main is not None
    signal.pthread_kill(main, signal.SIGINT)


def _interruptible() -> None:
    """Let SIGINT reach the main thread as KeyboardInterrupt: it is ignored in a command that a
    non-interactive shell starts in the background."""
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGINT) in (
        signal.SIG_IGN,
        signal.SIG_DFL,
    ):
        signal.signal(signal.SIGINT, signal.default_int_handler)
