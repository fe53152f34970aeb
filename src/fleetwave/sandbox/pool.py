"""The controller's side of the sandbox: a small pool of worker processes for health checks.

A job (one cluster: readiness of the delivered objects plus the user's checks) goes to an idle
worker; the reply must come within the job's wall-time budget or the worker is killed (SIGKILL,
reaped) and replaced, and the check fails naming the limit. A worker that dies by itself (its
memory cap) fails the check the same way. Workers start ahead of need so a gate does not wait
for Python to import lupa.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

from fleetwave.api.sveltos import ValidateHealth
from fleetwave.health.model import DEFAULT_LIMITS, Limits
from fleetwave.sandbox import framing

ObjectId = tuple[str, str, str | None, str]


@dataclass(frozen=True, slots=True)
class Budget:
    workers: int = 2
    wall_seconds: float = 20.0  # one cluster's whole judgement, every check and read included
    memory_bytes: int = 1024 * 1024 * 1024  # address space of a worker process
    limits: Limits = field(default_factory=lambda: DEFAULT_LIMITS)


@dataclass(frozen=True, slots=True)
class Verdict:
    ok: bool
    message: str


class _Worker:
    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc

    async def request(self, message: object) -> object:
        assert self.proc.stdin is not None
        self.proc.stdin.write(framing.encode(message))
        await self.proc.stdin.drain()
        return await self.receive()

    async def receive(self) -> object:
        assert self.proc.stdout is not None
        try:
            header = await self.proc.stdout.readexactly(framing.HEADER_SIZE)
            return framing.decode(await self.proc.stdout.readexactly(framing.length_of(header)))
        except asyncio.IncompleteReadError:
            raise framing.FrameError("worker exited") from None

    async def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.proc.kill()
        await self.proc.wait()


class CheckPool:
    def __init__(self, budget: Budget = Budget()) -> None:
        self.budget = budget
        self._idle: list[_Worker] = []
        self._slots = asyncio.Semaphore(budget.workers)
        self.killed = 0  # workers stopped for exceeding the budget (a metric and a test hook)

    async def start(self) -> None:
        """Warm the pool: every worker started and ready."""
        self._idle += await asyncio.gather(*(self._spawn() for _ in range(self.budget.workers)))

    async def close(self) -> None:
        idle, self._idle = self._idle, []
        await asyncio.gather(*(w.kill() for w in idle))

    async def check(
        self,
        kubeconfig: bytes,
        checks: Sequence[ValidateHealth],
        objects: Sequence[ObjectId],
        *,
        allow_insecure: bool = False,
    ) -> Verdict:
        job: dict[str, object] = {
            "kubeconfig": base64.b64encode(kubeconfig).decode(),
            "allowInsecure": allow_insecure,
            "checks": [c.model_dump(mode="json", by_alias=True, exclude_none=True) for c in checks],
            "objects": [list(o) for o in objects],
            "limits": asdict(self.budget.limits),
        }
        async with self._slots:
            worker = self._idle.pop() if self._idle else await self._spawn()
            verdict, healthy = await self._run(worker, job)
            if healthy:
                self._idle.append(worker)
            else:
                await worker.kill()
        return verdict

    async def _run(self, worker: _Worker, job: dict[str, object]) -> tuple[Verdict, bool]:
        try:
            reply = await asyncio.wait_for(worker.request(job), self.budget.wall_seconds)
        except TimeoutError:
            self.killed += 1
            limit = f"{self.budget.wall_seconds:g}s"
            return Verdict(False, f"health checks exceeded the wall-time limit of {limit}; stopped"), False
        except (framing.FrameError, ConnectionError):
            self.killed += 1
            mib = self.budget.memory_bytes // (1024 * 1024)
            why = f"the health-check sandbox died (memory limit {mib} MiB or a crash); stopped"
            return Verdict(False, why), False
        if not isinstance(reply, dict) or not isinstance(reply.get("message"), str):
            return Verdict(False, "the health-check sandbox sent a malformed reply"), False
        return Verdict(reply.get("ok") is True, reply["message"]), True

    async def _spawn(self) -> _Worker:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "fleetwave.sandbox.worker",
            f"--memory-bytes={self.budget.memory_bytes}",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            start_new_session=True,  # a terminal's Ctrl-C reaches the controller, which closes the pool
        )
        worker = _Worker(proc)
        hello = await asyncio.wait_for(worker.receive(), 60.0)
        if hello != {"ready": True}:
            await worker.kill()
            raise RuntimeError("health-check sandbox worker did not start")
        return worker
