"""The controller's side of the sandbox: a small pool of worker processes for health checks.

A job (one cluster: readiness of the delivered objects plus the user's checks) goes to an idle
worker; the reply must come within the job's wall-time budget or the worker is killed (SIGKILL,
reaped) and replaced, and the check fails naming the limit. A worker that dies by itself (its
memory cap) fails the check the same way. Workers start ahead of need so a gate does not wait
for Python to import lupa.

Hostile checks cannot starve the rest of the controller (ADR 0041):
- jobs that run user code (Lua, CEL) may hold at most `workers - 1` workers, so readiness-only
  jobs (profiles without validateHealths, KubeFleet availability) always find one;
- a job that had to be stopped (same cluster, same checks, same objects) fails at once, without a
  worker, for a cool-down that doubles with every further stop (30 s up to 10 min by default);
  its message is the one it was stopped with, so the limit stays named.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import json
import logging
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field

from fleetwave.api.sveltos import ValidateHealth
from fleetwave.health.model import DEFAULT_LIMITS, Limits
from fleetwave.sandbox import framing

log = logging.getLogger(__name__)

ObjectId = tuple[str, str, str | None, str]

START_SECONDS = 60.0  # a worker's imports on a loaded machine
MAX_REMEMBERED = 4096  # stopped jobs whose cool-down is remembered


@dataclass(frozen=True, slots=True)
class Budget:
    workers: int = 2
    wall_seconds: float = 20.0  # one cluster's whole judgement, every check and read included
    memory_bytes: int = 1024 * 1024 * 1024  # address space of a worker process
    limits: Limits = field(default_factory=lambda: DEFAULT_LIMITS)
    # A stopped job is not run again for this long (doubled per further stop, up to the maximum).
    cooldown_seconds: float = 30.0
    max_cooldown_seconds: float = 600.0


@dataclass(frozen=True, slots=True)
class Verdict:
    ok: bool
    message: str


@dataclass(slots=True)
class _Penalty:
    strikes: int
    until: float
    cooldown: float
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

    def signal_kill(self) -> None:
        """SIGKILL now (usable while being cancelled); asyncio's child watcher reaps it."""
        with contextlib.suppress(ProcessLookupError):
            self.proc.kill()

    async def kill(self) -> None:
        self.signal_kill()
        await self.proc.wait()


class CheckPool:
    def __init__(self, budget: Budget = Budget(), *, clock: Callable[[], float] = time.monotonic) -> None:
        self.budget = budget
        self._clock = clock
        self._idle: list[_Worker] = []
        self._live: set[_Worker] = set()  # idle and busy: close() kills them all
        self._slots = asyncio.Semaphore(budget.workers)
        self._user_slots = asyncio.Semaphore(max(1, budget.workers - 1))
        self._penalties: dict[str, _Penalty] = {}
        self._refills: set[asyncio.Task[None]] = set()
        self._reaping: set[asyncio.Future[int]] = set()  # killed while being cancelled: waited on here
        self._closed = False
        self.killed = 0  # workers stopped for exceeding the budget (a metric and a test hook)
        self.held = 0  # jobs failed at once because the same job was stopped recently

    @property
    def processes(self) -> int:
        """Worker processes alive now (idle or busy, starting included)."""
        return len(self._live)

    @property
    def idle(self) -> int:
        """Workers started and waiting for a job."""
        return len(self._idle)

    async def start(self) -> None:
        """Warm the pool: every worker started and ready."""
        self._closed = False
        missing = self.budget.workers - len(self._live)
        started = await asyncio.gather(*(self._spawn() for _ in range(missing)), return_exceptions=True)
        self._idle += [w for w in started if isinstance(w, _Worker)]
        failed = [e for e in started if isinstance(e, BaseException)]
        if failed:
            raise failed[0]

    async def close(self) -> None:
        """Kill and reap every worker, busy ones included; checks in flight fail."""
        self._closed = True
        refills = list(self._refills)
        for task in refills:
            task.cancel()
        await asyncio.gather(*refills, return_exceptions=True)
        self._idle = []
        workers, self._live = list(self._live), set()
        await asyncio.gather(*(w.kill() for w in workers))
        await asyncio.gather(*list(self._reaping), return_exceptions=True)

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
        key = hashlib.sha256(json.dumps(job, sort_keys=True).encode()).hexdigest()
        held = self._held(key)
        if held is not None:
            return held
        lane = self._user_slots if checks else contextlib.nullcontext()
        async with lane, self._slots:
            verdict, stopped = await self._dispatch(job)
        self._remember(key, verdict, stopped)
        return verdict

    async def webhook_condition(self, rule: str, status: int, body: object) -> Verdict:
        """A webhook gate's successCondition over one answer (ADR 0080), in a worker like user checks."""
        job: dict[str, object] = {"kind": "webhookCondition", "rule": rule, "status": status, "body": body}
        key = hashlib.sha256(json.dumps(job, sort_keys=True).encode()).hexdigest()
        held = self._held(key)
        if held is not None:
            return held
        async with self._user_slots, self._slots:
            verdict, stopped = await self._dispatch(job)
        self._remember(key, verdict, stopped)
        return verdict

    async def analysis_measurement(self, url: str, path: str, query: str, rule: str) -> Verdict:
        """One measurement of an analysis gate (ADR 0081): the query and the condition, in a worker."""
        job: dict[str, object] = {
            "kind": "analysisMeasurement",
            "url": url,
            "path": path,
            "query": query,
            "rule": rule,
            "limits": asdict(self.budget.limits),
        }
        key = hashlib.sha256(json.dumps(job, sort_keys=True).encode()).hexdigest()
        held = self._held(key)
        if held is not None:
            return held
        async with self._user_slots, self._slots:
            verdict, stopped = await self._dispatch(job)
        self._remember(key, verdict, stopped)
        return verdict

    async def _dispatch(self, job: dict[str, object]) -> tuple[Verdict, bool]:
        """The verdict, and whether the job had to be stopped (its worker killed or dead)."""
        if self._closed:
            return Verdict(False, "the health-check sandbox is shut down"), False
        try:
            worker = self._idle.pop() if self._idle else await self._spawn()
        except (OSError, RuntimeError, TimeoutError, framing.FrameError) as e:
            return Verdict(False, f"the health-check sandbox could not start a worker: {e}"), False
        try:
            verdict, healthy = await self._run(worker, job)
        except BaseException:  # cancelled mid-job (shutdown, lost lease): the worker's state is unknown
            self._abandon(worker)
            raise
        if healthy and not self._closed:
            self._idle.append(worker)
            return verdict, False
        await asyncio.shield(self._abandon(worker))  # a cancel now still leaves it to close() to reap
        self._refill()
        return verdict, not self._closed

    async def _run(self, worker: _Worker, job: dict[str, object]) -> tuple[Verdict, bool]:
        try:
            reply = await asyncio.wait_for(worker.request(job), self.budget.wall_seconds)
        except TimeoutError:
            self.killed += 1
            limit = f"{self.budget.wall_seconds:g}s"
            return Verdict(False, f"health checks exceeded the wall-time limit of {limit}; stopped"), False
        except (framing.FrameError, ConnectionError):
            if self._closed:
                return Verdict(False, "the health-check sandbox is shut down"), False
            self.killed += 1
            mib = self.budget.memory_bytes // (1024 * 1024)
            why = f"the health-check sandbox died (memory limit {mib} MiB or a crash); stopped"
            return Verdict(False, why), False
        if not isinstance(reply, dict) or not isinstance(reply.get("message"), str):
            self.killed += 1
            return Verdict(False, "the health-check sandbox sent a malformed reply; stopped"), False
        return Verdict(reply.get("ok") is True, reply["message"]), True

    def _abandon(self, worker: _Worker) -> asyncio.Future[int]:
        """Kill a worker now (also from a path that is being cancelled); its exit is awaited by the
        returned future, which close() awaits too, so no process or pipe outlives the pool."""
        self._live.discard(worker)
        worker.signal_kill()
        reaped = asyncio.ensure_future(worker.proc.wait())
        self._reaping.add(reaped)
        reaped.add_done_callback(self._reaping.discard)
        return reaped

    def _held(self, key: str) -> Verdict | None:
        penalty = self._penalties.get(key)
        if penalty is None or self._clock() >= penalty.until:
            return None
        self.held += 1
        return Verdict(False, f"{penalty.message} (not run again for {penalty.cooldown:g}s)")

    def _remember(self, key: str, verdict: Verdict, stopped: bool) -> None:
        if not stopped:
            self._penalties.pop(key, None)
            return
        now = self._clock()
        strikes = self._penalties[key].strikes + 1 if key in self._penalties else 1
        cooldown = min(self.budget.cooldown_seconds * 2 ** (strikes - 1), self.budget.max_cooldown_seconds)
        self._penalties.pop(key, None)  # re-inserted last: the dict stays ordered by last stop
        self._penalties[key] = _Penalty(strikes, now + cooldown, cooldown, verdict.message)
        forget_before = now - self.budget.max_cooldown_seconds
        for old in [k for k, p in self._penalties.items() if p.until < forget_before]:
            del self._penalties[old]
        while len(self._penalties) > MAX_REMEMBERED:
            del self._penalties[next(iter(self._penalties))]

    def _refill(self) -> None:
        """Replace a killed worker in the background, so the next check does not wait for imports."""
        if self._closed or len(self._live) + len(self._refills) >= self.budget.workers:
            return
        task = asyncio.create_task(self._spawn_idle(), name="health-check sandbox refill")
        self._refills.add(task)
        task.add_done_callback(self._refills.discard)

    async def _spawn_idle(self) -> None:
        try:
            worker = await self._spawn()
        except (OSError, RuntimeError, TimeoutError, framing.FrameError) as e:
            log.warning("health-check sandbox: replacing a worker failed: %s", e)
            return
        if self._closed:
            self._live.discard(worker)
            await worker.kill()
        else:
            self._idle.append(worker)

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
        self._live.add(worker)
        try:
            hello = await asyncio.wait_for(worker.receive(), START_SECONDS)
            if hello != {"ready": True}:
                raise RuntimeError("health-check sandbox worker did not start")
        except BaseException:
            self._abandon(worker)
            raise
        return worker
