"""A content tool cannot open a socket (issue 40, finding 7; ADR 0098).

`bounded.run` installs a seccomp filter in the child before exec: socket(2) fails with EPERM in every
family, io_uring_setup(2) too, and whatever the tool starts inherits the filter. The tool here is
Python, which shows the errno plainly; tests/integration/test_content_tools_no_network.py shows the
same for the real kustomize against a server on loopback.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Coroutine
from typing import Any

import pytest
import uvloop

from fleetwave.delivery import bounded

SOCKET = """
import errno, socket, sys
try:
    socket.socket(getattr(socket, sys.argv[1]), socket.SOCK_STREAM)
except OSError as e:
    print(errno.errorcode[e.errno])
else:
    print("opened")
"""

IO_URING = """
import ctypes, errno
libc = ctypes.CDLL(None, use_errno=True)
params = ctypes.create_string_buffer(120)
fd = libc.syscall(425, 8, params)  # io_uring_setup, the same number on x86-64 and arm64
print("opened" if fd >= 0 else errno.errorcode[ctypes.get_errno()])
"""


Runner = Callable[[Coroutine[Any, Any, bounded.Completed]], bounded.Completed]
# asyncio's loop, and uvloop's, which the controller runs on (it forks and execs on its own).
LOOPS: list[Runner] = [asyncio.run, uvloop.run]


def python(*args: str) -> list[str]:
    return [sys.executable, "-I", *args]


@pytest.mark.parametrize("run", LOOPS)
@pytest.mark.parametrize("family", ["AF_INET", "AF_INET6", "AF_UNIX"])
def test_a_tool_cannot_open_a_socket_in_any_family(run: Runner, family: str) -> None:
    done = run(bounded.run(python("-c", SOCKET, family)))
    assert (done.code, done.stdout) == (0, b"EPERM\n")


def test_a_tool_cannot_set_up_an_io_uring_either() -> None:
    done = asyncio.run(bounded.run(python("-c", IO_URING)))
    assert (done.code, done.stdout) == (0, b"EPERM\n")


def test_what_a_tool_starts_inherits_the_filter() -> None:
    nested = f"import subprocess, sys; subprocess.run([sys.executable, '-I', '-c', {SOCKET!r}, 'AF_INET'])"
    done = asyncio.run(bounded.run(python("-c", nested)))
    assert done.stdout == b"EPERM\n"


def test_without_libseccomp_no_tool_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(bounded.ALLOW_UNCONFINED_ENV, raising=False)
    monkeypatch.setattr(bounded, "network_filter", lambda: "libseccomp (libseccomp.so.2) is not installed")
    with pytest.raises(bounded.ToolError) as info:
        asyncio.run(bounded.run(python("-c", "print('ran')"), name="kustomize"))
    assert str(info.value) == (
        "kustomize was not started: libseccomp (libseccomp.so.2) is not installed, so its network cannot "
        "be cut off; install libseccomp2, or set FLEETWAVE_ALLOW_UNCONFINED_TOOLS=true to run content "
        "tools with network access"
    )


def test_the_operator_may_run_tools_unconfined_where_seccomp_is_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(bounded.ALLOW_UNCONFINED_ENV, "true")
    monkeypatch.setattr(bounded, "network_filter", lambda: "libseccomp (libseccomp.so.2) is not installed")
    done = asyncio.run(bounded.run(python("-c", SOCKET, "AF_UNIX")))
    assert done.stdout == b"opened\n"


@pytest.mark.parametrize("run", LOOPS)
def test_a_kernel_that_refuses_the_filter_stops_the_tool(
    run: Runner,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(bounded.ALLOW_UNCONFINED_ENV, raising=False)

    def refusing(program: bytes) -> Callable[[bool], None]:
        def install(strict: bool) -> None:
            if strict:
                raise OSError(22, "seccomp")

        return install

    monkeypatch.setattr(bounded, "_installer", refusing)
    with pytest.raises(bounded.ToolError, match=r"^kustomize was not started: the kernel refused its limits"):
        run(bounded.run(python("-c", "print('ran')"), name="kustomize"))


def test_the_filter_is_libseccomps_program_for_this_machine() -> None:
    program = bounded.network_filter()
    assert isinstance(program, bytes), program  # this machine and the image have libseccomp
    assert len(program) % 8 == 0  # whole BPF instructions
