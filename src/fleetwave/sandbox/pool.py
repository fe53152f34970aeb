"""The controller's side of the sandbox: a small pool of worker processes for health checks.

A job (one cluster: readiness of the delivered objects plus the user's checks; a webhook gate's
condition; an analysis measurement) goes to an idle worker. Its user code is stopped by the worker's
CPU-time limit (the kernel's SIGXCPU, which no C loop escapes) or, as a backstop, by the job's wall
time, after which the worker is killed (SIGKILL, reaped) and replaced; the check fails naming the
limit. A worker that dies by itself (its memory cap) fails the check the same way. Workers start
ahead of need so a gate does not wait for Python to import lupa.

Hostile checks cannot starve the rest of the controller, nor each other's owners (ADR 0041, 0097):
- every job names its owner (the profile, promotion, placement or run whose check it is); jobs that
  run user code (Lua, CEL) wait in per-owner queues served in turn (round robin), an owner holding
  at most `owner_workers` workers at once, all of them together at most `workers - 1`: one owner's
  hostile or slow checks delay another owner's by no more than the wait for a free share;
- readiness-only jobs (no user code) may take any worker, so they always find one;
- a job that had to be stopped fails at once, without a worker, for a cool-down that doubles with
  every further stop (30 s up to 10 min by default); its message is the one it was stopped with, so
  the limit stays named. A CPU stop is the script's own doing, so its cool-down holds the owner's
  same code on every cluster (a hostile profile over N clusters costs one stop per round, not N); a
  wall-time stop may be a slow member, so it holds that one job (cluster, code, objects) only.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import json
import logging
import signal
import sys
import time
from collections import Counter, deque
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Literal

from fleetwave.api.sveltos import ValidateHealth
from fleetwave.health.model import DEFAULT_LIMITS, Limits
from fleetwave.sandbox import framing

log = logging.getLogger(__name__)

ObjectId = tuple[str, str, str | None, str]

START_SECONDS = 60.0  # a worker's imports on a loaded machine
MAX_REMEMBERED = 4096  # stopped jobs whose cool-down is remembered
EXIT_SECONDS = 2.0  # how long a worker that closed its pipe is given to report why it exited
# What a job's user code is, for the cool-down of a CPU stop: everything but the cluster it ran on.
CODE_FIELDS = ("kind", "checks", "rule", "query", "url", "path", "limits")

# Why a job was stopped ("": it was not): its cool-down's key depends on it.
Stop = Literal["", "cpu", "wall", "died"]


@dataclass(frozen=True, slots=True)
class Budget:
    workers: int = 4
    # Workers one owner's user-code jobs may hold at once while others' wait their turn.
    owner_workers: int = 1
    wall_seconds: float = 20.0  # one cluster's whole judgement, every check and read included
    cpu_seconds: int = 2  # CPU of one job (whole seconds: RLIMIT_CPU); 0 turns the limit off
    request_seconds: float = 5.0  # one read of a member; one that went unanswered ends its reads
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


@dataclass(frozen=True, slots=True)
class _Keys:
    job: str  # this very job: cluster, code, objects
    code: str  # the owner's code, whatever cluster it runs on


class _Shares:
    """Who gets a worker next. Readiness-only jobs first, in arrival order, on any worker. Then
    user-code jobs: each owner's in arrival order, and of the owners below their share the one
    served least recently first (round robin); all of them together never the last worker."""

    def __init__(self, workers: int, per_owner: int) -> None:
        self.workers = max(1, workers)
        self.user_cap = max(1, workers - 1)
        self.per_owner = max(1, per_owner)
        self.busy = 0
        self.user_busy = 0
        self.held: Counter[str] = Counter()  # workers each owner's user-code jobs hold
        self._plain: deque[asyncio.Future[None]] = deque()
        self._queues: dict[str, deque[asyncio.Future[None]]] = {}
        self._served: dict[str, int] = {}  # owner -> when it last got a worker (a tick)
        self._tick = 0

    @contextlib.asynccontextmanager
    async def slot(self, owner: str, user: bool) -> AsyncIterator[None]:
        waiter = asyncio.get_running_loop().create_future()
        (self._queues.setdefault(owner, deque()) if user else self._plain).append(waiter)
        self._grant()
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.cancelled():
                self._forget(waiter, owner, user)
            else:  # granted, then cancelled before it could start
                self._release(owner, user)
            raise
        try:
            yield
        finally:
            self._release(owner, user)

    def _grant(self) -> None:
        while self._plain and self.busy < self.workers:
            waiter = self._plain.popleft()
            if not waiter.done():  # done: cancelled, its task has not run its cleanup yet
                self.busy += 1
                waiter.set_result(None)
        while self.busy < self.workers and self.user_busy < self.user_cap:
            below = [o for o in self._queues if self.held[o] < self.per_owner]
            owner = min(below, key=lambda o: self._served.get(o, -1), default=None)
            if owner is None:
                return
            queue = self._queues[owner]
            waiter = queue.popleft()
            if not queue:
                del self._queues[owner]
            if waiter.done():
                continue
            self._tick += 1
            self._served[owner] = self._tick
            self.busy += 1
            self.user_busy += 1
            self.held[owner] += 1
            waiter.set_result(None)

    def _forget(self, waiter: asyncio.Future[None], owner: str, user: bool) -> None:
        queue = self._queues.get(owner) if user else self._plain
        if queue is not None and waiter in queue:
            queue.remove(waiter)
        if user and not queue:
            self._queues.pop(owner, None)
            self._idle_owner(owner)

    def _release(self, owner: str, user: bool) -> None:
        self.busy -= 1
        if user:
            self.user_busy -= 1
            self.held[owner] -= 1
            if self.held[owner] <= 0:
                del self.held[owner]
            self._idle_owner(owner)
        self._grant()

    def _idle_owner(self, owner: str) -> None:
        """An owner with nothing queued or running is forgotten (its next job starts a new turn)."""
        if owner not in self._queues and not self.held[owner]:
            self._served.pop(owner, None)


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
        self._shares = _Shares(budget.workers, budget.owner_workers)
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
        owner: str = "",
    ) -> Verdict:
        """`owner`: whose check it is ("<kind>/<namespace>/<name>"), the unit of the pool's shares."""
        job: dict[str, object] = {
            "kubeconfig": base64.b64encode(kubeconfig).decode(),
            "allowInsecure": allow_insecure,
            "checks": [c.model_dump(mode="json", by_alias=True, exclude_none=True) for c in checks],
            "objects": [list(o) for o in objects],
            "limits": asdict(self.budget.limits),
            "requestSeconds": self.budget.request_seconds,
        }
        return await self._submit(job, owner, user=bool(checks))

    async def webhook_condition(self, rule: str, status: int, body: object, *, owner: str = "") -> Verdict:
        """A webhook gate's successCondition over one answer (ADR 0080), in a worker like user checks."""
        job: dict[str, object] = {"kind": "webhookCondition", "rule": rule, "status": status, "body": body}
        return await self._submit(job, owner, user=True)

    async def analysis_measurement(
        self, url: str, path: str, query: str, rule: str, *, owner: str = ""
    ) -> Verdict:
        """One measurement of an analysis gate (ADR 0081): the query and the condition, in a worker."""
        job: dict[str, object] = {
            "kind": "analysisMeasurement",
            "url": url,
            "path": path,
            "query": query,
            "rule": rule,
            "limits": asdict(self.budget.limits),
        }
        return await self._submit(job, owner, user=True)

    async def _submit(self, job: dict[str, object], owner: str, *, user: bool) -> Verdict:
        code = {"owner": owner, **{k: v for k, v in job.items() if k in CODE_FIELDS}}
        keys = _Keys(_digest(job), _digest(code) if user else _digest(job))
        held = self._held(keys)
        if held is not None:
            return held
        async with self._shares.slot(owner, user):
            # Asked again: while this job waited its turn, a sibling on another cluster may have
            # been stopped for the same code.
            held = self._held(keys)
            if held is not None:
                return held
            verdict, stop = await self._dispatch(job)
        self._remember(keys, verdict, stop)
        return verdict

    async def _dispatch(self, job: dict[str, object]) -> tuple[Verdict, Stop]:
        """The verdict, and why the job had to be stopped ("" when its worker answered)."""
        if self._closed:
            return Verdict(False, "the health-check sandbox is shut down"), ""
        try:
            worker = self._idle.pop() if self._idle else await self._spawn()
        except (OSError, RuntimeError, TimeoutError, framing.FrameError) as e:
            return Verdict(False, f"the health-check sandbox could not start a worker: {e}"), ""
        try:
            verdict, stop = await self._run(worker, job)
        except BaseException:  # cancelled mid-job (shutdown, lost lease): the worker's state is unknown
            self._abandon(worker)
            raise
        if not stop and not self._closed:
            self._idle.append(worker)
            return verdict, ""
        await asyncio.shield(self._abandon(worker))  # a cancel now still leaves it to close() to reap
        self._refill()
        return verdict, "" if self._closed else stop

    async def _run(self, worker: _Worker, job: dict[str, object]) -> tuple[Verdict, Stop]:
        try:
            reply = await asyncio.wait_for(worker.request(job), self.budget.wall_seconds)
        except TimeoutError:
            self.killed += 1
            limit = f"{self.budget.wall_seconds:g}s"
            return Verdict(False, f"health checks exceeded the wall-time limit of {limit}; stopped"), "wall"
        except (framing.FrameError, ConnectionError):
            if self._closed:
                return Verdict(False, "the health-check sandbox is shut down"), "died"
            self.killed += 1
            return await self._died(worker)
        if not isinstance(reply, dict) or not isinstance(reply.get("message"), str):
            self.killed += 1
            return Verdict(False, "the health-check sandbox sent a malformed reply; stopped"), "died"
        return Verdict(reply.get("ok") is True, reply["message"]), ""

    async def _died(self, worker: _Worker) -> tuple[Verdict, Stop]:
        """Why a worker closed its pipe mid-job: the kernel's SIGXCPU is the CPU-time limit."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(worker.proc.wait()), EXIT_SECONDS)
        if worker.proc.returncode == -signal.SIGXCPU:
            limit = f"{self.budget.cpu_seconds}s"
            return Verdict(False, f"health checks exceeded the CPU time limit of {limit}; stopped"), "cpu"
        mib = self.budget.memory_bytes // (1024 * 1024)
        why = f"the health-check sandbox died (memory limit {mib} MiB or a crash); stopped"
        return Verdict(False, why), "died"

    def _abandon(self, worker: _Worker) -> asyncio.Future[int]:
        """Kill a worker now (also from a path that is being cancelled); its exit is awaited by the
        returned future, which close() awaits too, so no process or pipe outlives the pool."""
        self._live.discard(worker)
        worker.signal_kill()
        reaped = asyncio.ensure_future(worker.proc.wait())
        self._reaping.add(reaped)
        reaped.add_done_callback(self._reaping.discard)
        return reaped

    def _held(self, keys: _Keys) -> Verdict | None:
        now = self._clock()
        for key in (keys.code, keys.job):
            penalty = self._penalties.get(key)
            if penalty is not None and now < penalty.until:
                self.held += 1
                return Verdict(False, f"{penalty.message} (not run again for {penalty.cooldown:g}s)")
        return None

    def _remember(self, keys: _Keys, verdict: Verdict, stop: Stop) -> None:
        if not stop:
            self._penalties.pop(keys.job, None)
            self._penalties.pop(keys.code, None)
            return
        key = keys.code if stop == "cpu" else keys.job
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
            f"--cpu-seconds={self.budget.cpu_seconds}",
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


def _digest(value: object) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()
