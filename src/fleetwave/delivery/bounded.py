"""Run a content tool (fleetwave-render, kustomize, the archive unpacker) on hostile input, within
budgets it cannot lift.

The tool gets no environment of the controller's (its credentials live there), no PATH (kustomize
cannot run git or plugins), its own process group, address-space and CPU rlimits set before it
starts, a wall-clock deadline, and a cap on what it may print. Exceeding any of them kills the whole
group and is reported, never raised past the caller as anything but `ToolError`.

It cannot open a socket either (ADR 0098): a seccomp filter, built once by libseccomp and installed
in the child before exec with no_new_privs, makes socket(2) fail with EPERM in every address family,
and io_uring_setup(2) too (a ring can open sockets without socket(2)). The filter is inherited by
everything the tool starts and cannot be removed. A proxy variable is not enough: Go dials loopback
directly whatever HTTP_PROXY says. Without libseccomp, or where the kernel refuses the filter, no
tool runs unless the operator sets FLEETWAVE_ALLOW_UNCONFINED_TOOLS=true.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import errno
import functools
import logging
import os
import resource
import signal
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

log = logging.getLogger(__name__)

ALLOW_UNCONFINED_ENV = "FLEETWAVE_ALLOW_UNCONFINED_TOOLS"
# The proxy stays although the filter makes it moot: a second wall where seccomp is opted out of.
_NOWHERE = "http://127.0.0.1:9"  # the discard port: a dial fails at once
_DENIED_SYSCALLS = ("socket", "io_uring_setup")

# libseccomp's and the kernel's constants (seccomp.h, linux/prctl.h, linux/seccomp.h).
_SCMP_ACT_ALLOW = 0x7FFF0000
_SCMP_ACT_ERRNO = 0x00050000
_PR_SET_SECCOMP = 22
_PR_SET_NO_NEW_PRIVS = 38
_SECCOMP_MODE_FILTER = 2


@dataclass(frozen=True, slots=True)
class Limits:
    wall_seconds: float = 20.0
    cpu_seconds: int = 15
    # Address space, not resident memory: a Go program reserves about 600 MiB of it before it
    # allocates anything, so 2 GiB leaves it roughly 1 GiB of heap.
    memory_bytes: int = 2 * 1024 * 1024 * 1024
    output_bytes: int = 16 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Completed:
    code: int
    stdout: bytes
    stderr: str


class ToolError(RuntimeError):
    """The tool could not run, ran out of a budget, or was killed; the message says which."""


class _SockFprog(ctypes.Structure):
    _fields_ = (("len", ctypes.c_ushort), ("filter", ctypes.c_void_p))


def _environment(home: str | None, extra: Mapping[str, str]) -> dict[str, str]:
    env = {"PATH": "/nonexistent", "HTTP_PROXY": _NOWHERE, "HTTPS_PROXY": _NOWHERE, "NO_PROXY": ""}
    env.update({k.lower(): v for k, v in env.items() if k.endswith("PROXY")})
    if home:
        env["HOME"] = home
    env.update(extra)
    return env


@functools.cache
def network_filter() -> bytes | str:
    """The seccomp program (classic BPF) that refuses the denied syscalls, or why there is none.

    libseccomp writes it, for this machine's architecture with the checks that stop a process from
    switching to another syscall table (x32, i386); it is built once, here, so the child only makes
    two prctl calls between fork and exec."""
    try:
        lib = ctypes.CDLL("libseccomp.so.2")
    except OSError:
        return "libseccomp (libseccomp.so.2) is not installed"
    lib.seccomp_init.argtypes, lib.seccomp_init.restype = (ctypes.c_uint32,), ctypes.c_void_p
    lib.seccomp_syscall_resolve_name.argtypes = (ctypes.c_char_p,)
    lib.seccomp_rule_add_array.argtypes = (
        ctypes.c_void_p,
        ctypes.c_uint32,
        ctypes.c_int,
        ctypes.c_uint,
        ctypes.c_void_p,
    )
    lib.seccomp_export_bpf.argtypes = (ctypes.c_void_p, ctypes.c_int)
    lib.seccomp_release.argtypes, lib.seccomp_release.restype = (ctypes.c_void_p,), None
    context = lib.seccomp_init(_SCMP_ACT_ALLOW)
    if not context:
        return "libseccomp could not start a filter"
    try:
        return _filter_program(lib, context)
    finally:
        lib.seccomp_release(context)


def _filter_program(lib: ctypes.CDLL, context: int) -> bytes | str:
    for name in _DENIED_SYSCALLS:
        number = lib.seccomp_syscall_resolve_name(name.encode())
        if number < 0:
            return f"libseccomp does not know {name}(2) (too old)"
        if lib.seccomp_rule_add_array(context, _SCMP_ACT_ERRNO | errno.EPERM, number, 0, None) < 0:
            return f"libseccomp refused the rule for {name}(2)"
    fd = os.memfd_create("fleetwave-seccomp")
    try:
        if lib.seccomp_export_bpf(context, fd) < 0:
            return "libseccomp could not export the filter"
        size = os.lseek(fd, 0, os.SEEK_CUR)
        return os.pread(fd, size, 0)
    finally:
        os.close(fd)


def _unconfined_allowed() -> bool:
    return os.environ.get(ALLOW_UNCONFINED_ENV, "").strip().lower() in ("1", "true", "yes")


@functools.cache
def _installer(program: bytes) -> Callable[[bool], None]:
    """prctl(no_new_privs) then prctl(seccomp filter), from the child. Every argument is made here,
    in the parent, so the child only calls libc; the cache keeps the program's buffer alive."""
    libc = ctypes.CDLL(None, use_errno=True)
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    zero = ctypes.c_ulong(0)
    # no_new_privs first: the kernel accepts a filter from an unprivileged process only then.
    calls = (
        (_PR_SET_NO_NEW_PRIVS, ctypes.c_ulong(1), zero, zero, zero),
        (_PR_SET_SECCOMP, ctypes.c_ulong(_SECCOMP_MODE_FILTER), ctypes.byref(fprog), zero, zero),
    )

    def install(strict: bool) -> None:
        for call in calls:
            if libc.prctl(*call) != 0 and strict:
                raise OSError(ctypes.get_errno(), f"prctl {call[0]} for {len(buffer)} bytes")

    return install


@functools.cache
def _warn_unconfined(reason: str) -> None:
    log.warning("content tools run without their network filter (%s=true): %s", ALLOW_UNCONFINED_ENV, reason)


def _preexec(limits: Limits, name: str) -> Callable[[], None]:
    """What the child runs between fork and exec: rlimits, then the network filter."""
    program = network_filter()
    strict = not _unconfined_allowed()
    if isinstance(program, str):
        if strict:
            raise ToolError(
                f"{name} was not started: {program}, so its network cannot be cut off; install "
                f"libseccomp2, or set {ALLOW_UNCONFINED_ENV}=true to run content tools with network access"
            )
        _warn_unconfined(program)
    install = None if isinstance(program, str) else _installer(program)

    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
        # The soft limit below the hard one: the kernel then sends SIGXCPU (reported as the CPU
        # budget) at the budget; with both equal it sends SIGKILL, which reads as memory.
        resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_seconds, limits.cpu_seconds + 1))
        if install is not None:
            install(strict)

    return apply


def confine_this_process(limits: Limits, name: str) -> None:
    """The budgets and the network filter of a tool, applied to the calling process itself (helm's
    post-renderer, which helm starts): what `run` applies to its child between fork and exec.
    `ToolError` when the filter cannot be had and the operator did not opt out."""
    try:
        _preexec(limits, name)()
    except OSError as e:
        raise ToolError(f"{name} could not confine itself: {e.strerror or e}") from None


async def run(
    argv: Sequence[str],
    *,
    stdin: bytes = b"",
    limits: Limits = Limits(),
    cwd: str | None = None,
    home: str | None = None,
    env: Mapping[str, str] | None = None,
    name: str | None = None,
) -> Completed:
    """Run `argv` within `limits`; `name` is what messages call it (default: the program's name)."""
    name = name or os.path.basename(argv[0])
    proc = await _start(argv, name, limits, cwd=cwd, env=_environment(home, env or {}))
    try:
        out, err = await asyncio.wait_for(_communicate(proc, stdin, limits.output_bytes), limits.wall_seconds)
    except TimeoutError:
        await _kill(proc)
        raise ToolError(f"{name} took longer than {limits.wall_seconds:.0f}s and was stopped") from None
    except ToolError as e:
        raise ToolError(f"{name}: {e}") from None
    except BaseException:
        await _kill(proc)
        raise
    code = proc.returncode if proc.returncode is not None else -1
    if code < 0:
        raise ToolError(f"{name} was stopped by signal {-code} ({_why(-code)})")
    return Completed(code, out, err.decode(errors="replace"))


async def _start(
    argv: Sequence[str], name: str, limits: Limits, *, cwd: str | None, env: dict[str, str]
) -> asyncio.subprocess.Process:
    try:
        return await asyncio.create_subprocess_exec(
            *argv,
            cwd=cwd,
            env=env,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
            preexec_fn=_preexec(limits, name),
        )
    except FileNotFoundError:
        raise ToolError(
            f"{name} is not installed: put the pinned {name} on PATH or beside helm "
            "(the fleetwave controller image ships it; in a checkout, tools/binaries/build.sh builds it)"
        ) from None
    except subprocess.SubprocessError:  # what the child's setup raised, reported by the parent
        raise ToolError(f"{name} was not started: the kernel refused its limits or network filter") from None
    except OSError as e:
        raise ToolError(f"{name} could not start: {e.strerror or e}") from None


def _why(sig: int) -> str:
    if sig == signal.SIGXCPU:
        return "CPU budget spent"
    if sig == signal.SIGKILL:
        return "killed, most likely out of its memory budget or output cap"
    return "crashed"


async def _communicate(proc: asyncio.subprocess.Process, stdin: bytes, cap: int) -> tuple[bytes, bytes]:
    assert proc.stdout is not None
    assert proc.stderr is not None

    async def feed() -> None:
        assert proc.stdin is not None
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            proc.stdin.write(stdin)
            await proc.stdin.drain()
        proc.stdin.close()

    async def read(stream: asyncio.StreamReader, limit: int, label: str) -> bytes:
        chunks: list[bytes] = []
        size = 0
        while chunk := await stream.read(65536):
            size += len(chunk)
            if size > limit:
                raise ToolError(f"its {label} passed {limit} bytes and it was stopped")
            chunks.append(chunk)
        return b"".join(chunks)

    try:
        _, out, err = await asyncio.gather(
            feed(), read(proc.stdout, cap, "output"), read(proc.stderr, 64 * 1024, "error output")
        )
    except ToolError:
        await _kill(proc)
        raise
    await proc.wait()
    return out, err


async def _kill(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        await proc.wait()
