"""Run a content tool (fleetwave-render, kustomize) on hostile input, within budgets it cannot lift.

The tool gets no environment of the controller's (its credentials live there), no PATH (kustomize
cannot run git or plugins), a proxy that goes nowhere (no remote bases over HTTP), its own process
group, address-space and CPU rlimits set before it starts, a wall-clock deadline, and a cap on what
it may print. Exceeding any of them kills the whole group and is reported, never raised past the
caller as anything but `ToolError`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import resource
import signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

_NOWHERE = "http://127.0.0.1:9"  # the discard port: a dial fails at once


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


def _environment(home: str | None, extra: Mapping[str, str]) -> dict[str, str]:
    env = {"PATH": "/nonexistent", "HTTP_PROXY": _NOWHERE, "HTTPS_PROXY": _NOWHERE, "NO_PROXY": ""}
    env.update({k.lower(): v for k, v in env.items() if k.endswith("PROXY")})
    if home:
        env["HOME"] = home
    env.update(extra)
    return env


def _limiter(limits: Limits) -> object:
    def apply() -> None:  # runs in the child between fork and exec
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
        resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_seconds, limits.cpu_seconds))

    return apply


async def run(
    argv: Sequence[str],
    *,
    stdin: bytes = b"",
    limits: Limits = Limits(),
    cwd: str | None = None,
    home: str | None = None,
    env: Mapping[str, str] | None = None,
) -> Completed:
    name = os.path.basename(argv[0])
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            cwd=cwd,
            env=_environment(home, env or {}),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
            preexec_fn=_limiter(limits),  # type: ignore[arg-type]
        )
    except FileNotFoundError:
        raise ToolError(
            f"{name} is not installed: put the pinned {name} on PATH or beside helm "
            "(tools/binaries/build.sh builds it)"
        ) from None
    except OSError as e:
        raise ToolError(f"{name} could not start: {e.strerror or e}") from None
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
