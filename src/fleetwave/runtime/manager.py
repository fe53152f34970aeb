"""The Manager runs informers, then (once they have synced and, with leader election, once this
replica leads) the controllers, and serves /metrics, /healthz and /readyz over plain HTTP.

Losing the lease stops every controller and makes `run` raise `LeadershipLost`: the process
exits non-zero and starts afresh, so no task of the old term can still act. Until then, and in the
moments after a pause, the write fence (`kube.fence`, ADR 0115) refuses every write once the lease
is past its renew deadline: with election, `run` arms it. SIGTERM/SIGINT stop
gracefully and release the lease, so a successor takes over without waiting for it to expire.

With `shards > 1` (ADR 0067) there is no single leader: controllers start once informers sync, each
reconciling only the keys of the shards this replica holds (`runtime/shards.py`); a shard that
cannot be renewed ends the run the same way (`ShardLost` is a `LeadershipLost`).

Given a `lease_loop` (ADR 0140), the single leader Lease is taken, renewed and released on that
loop's thread, with a lease client built there: a long turn of this loop then delays no renewal.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import signal
from collections.abc import Awaitable, Callable, Coroutine, Hashable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from fleetwave.kube import fence
from fleetwave.kube.client import AsyncClient
from fleetwave.runtime import controller, gc_pauses, leader, loop_lag, metrics, shards, watching
from fleetwave.runtime.lease_loop import LeaseLoop, run_on
from fleetwave.runtime.probes import Endpoint, ProbeServer

log = logging.getLogger(__name__)

K = TypeVar("K", bound=Hashable)


_ELECTION, _SHARDS = "leader election", "shards"  # the tasks that hold leases, named; they stop last
_LEASE_HOLDERS = frozenset({_ELECTION, _SHARDS})


class LeadershipLost(RuntimeError):
    """This replica stopped leading; exit non-zero and let the supervisor restart it."""


class ShardLost(LeadershipLost):
    """A shard's lease was not renewed in time; exit like a leader that lost its lease."""


@dataclass(frozen=True, slots=True)
class Election:
    lease_name: str = "fleetwave-controller"
    identity: str | None = None
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0


def _elections(
    leases: AsyncClient, namespace: str, election: Election, write_fence: fence.Fence, shard_count: int
) -> tuple[shards.ShardSet | None, leader.LeaderElector | None]:
    """Shard Leases (`shard_count > 1`), the single leader Lease (1), or no election (0). `leases`:
    a client of their own, so a renewal never waits behind the controller's requests on a busy
    connection."""
    identity = election.identity or leader.default_identity()
    duration, deadline, retry = election.lease_duration, election.renew_deadline, election.retry_period
    if shard_count > 1:
        return shards.ShardSet(
            leases,
            namespace,
            identity,
            shard_count,
            lease_duration=duration,
            renew_deadline=deadline,
            retry_period=retry,
            write_fence=write_fence,
        ), None
    if shard_count == 1:
        return None, leader.LeaderElector(
            leases,
            namespace,
            election.lease_name,
            identity,
            lease_duration=duration,
            renew_deadline=deadline,
            retry_period=retry,
            write_fence=write_fence,
        )
    return None, None


class Manager:
    def __init__(
        self,
        client: AsyncClient,
        *,
        namespace: str,
        leader_election: bool,
        metrics_port: int = 8080,
        health_port: int = 8081,
        host: str = "127.0.0.1",
        election: Election = Election(),
        handle_signals: bool = True,
        shard_count: int = 1,
        lease_client: AsyncClient | None = None,
        lease_loop: LeaseLoop | None = None,
    ) -> None:
        """`lease_loop`: the leader Lease runs there, on `lease_client`, built there (ADR 0140).
        Shard Leases stay here: their renewals also drain and hand over the controllers' keys."""
        if lease_loop is not None and shard_count > 1:
            raise ValueError("shard Leases are renewed on the manager's own loop: no lease_loop with shards")
        self.metrics = metrics.Metrics()
        # This replica's write fence (ADR 0115): every lease it holds renews it; armed in `run`.
        self.fence = fence.Fence()
        count = max(shard_count, 1) if leader_election else 0
        self.shards, self.elector = _elections(lease_client or client, namespace, election, self.fence, count)
        if self.shards is not None:
            self._wire(self.shards)
        self._lease_loop = lease_loop
        # Set once this replica leads: told by the elector, from whichever loop it runs on.
        self.leading = asyncio.Event()
        self.probes = ProbeServer(host, metrics_port, health_port, self._endpoints())
        self.synced = asyncio.Event()
        # Wall time the controllers began, once this replica leads (or contends for shards): from
        # then on nothing else delivers what it delivers, shard takeovers aside (ADR 0121).
        self.controllers_started: dt.datetime | None = None
        # What informers list and watch through (`app.build` may give them a client of their own).
        self.watch_client = client
        self._informers: list[watching.Informer] = []
        self._controllers: list[controller.Controller[Any]] = []
        self._handle_signals = handle_signals
        self._stop = asyncio.Event()

    def _wire(self, held: shards.ShardSet) -> None:
        held.busy = lambda shard: any(c.busy(shard) for c in self._controllers)
        held.on_gain(self._resync)
        self.metrics.shards_held.set_function(lambda: len(held.held))

    def _resync(self, shard: int) -> None:
        for ctl in self._controllers:
            ctl.resync(shard)

    def add_informer(self, informer: watching.Informer) -> watching.Informer:
        self._informers.append(informer)
        return informer

    def add_controller(
        self,
        name: str,
        reconcile: Callable[[K], Awaitable[controller.Result]],
        *,
        workers: int = 1,
        rollout: Callable[[K], str] | None = None,
        keys: Callable[[], Iterable[K]] = tuple,
        bulk: bool = False,
        deadlines_first: bool = False,
        deadline_workers: int = 0,
    ) -> controller.Controller[K]:
        """`rollout(key)` names the rollout a key is part of (its shard's hash input; default: the
        key itself) and `keys()` lists every key, for the keys of a shard this replica takes over;
        `bulk`: its requests go in the bulk lane (`kube.lanes`); `deadlines_first`, `deadline_workers`:
        see `Controller`."""
        ctl: controller.Controller[K] = controller.Controller(
            name,
            reconcile,
            workers=workers,
            metrics_=self.metrics,
            bulk=bulk,
            deadlines_first=deadlines_first,
            deadline_workers=deadline_workers,
        )
        if self.shards is not None:
            held, of = self.shards, rollout or (lambda key: f"{name}/{key}")
            ctl.shard(controller.Sharding(lambda key: held.shard_of(of(key)), held.owns, keys))
        self._controllers.append(ctl)
        return ctl

    def stop(self) -> None:
        self._stop.set()

    async def run(self) -> None:
        """Run until `stop()` or a signal; raises `LeadershipLost` if the lease is lost."""
        if self.elector is not None or self.shards is not None:
            self.fence.arm()
        with fence.enforced(self.fence), self._signals(), gc_pauses.GcPauses(self.metrics.gc_pause):
            await self.probes.start()
            tasks = [asyncio.create_task(i.run(), name=f"informer {i.name}") for i in self._informers]
            tasks.append(asyncio.create_task(loop_lag.watch(self.metrics.loop_lag), name="loop lag"))
            try:
                await self._run_phases(tasks)
            finally:
                await self._shutdown(tasks)

    async def _run_phases(self, tasks: list[asyncio.Task[None]]) -> None:
        if not await self._until(watching.wait_synced(self._informers), tasks):
            return
        self.synced.set()
        elector_task = None
        if self.shards is not None:
            elector_task = asyncio.create_task(self._run_shards(), name=_SHARDS)
            tasks.append(elector_task)
        if self.elector is not None:
            elector_task = asyncio.create_task(self._elect(self.elector), name=_ELECTION)
            tasks.append(elector_task)
            if not await self._until(self.leading.wait(), tasks):
                return
            self.metrics.leader.set(1)
        self.controllers_started = dt.datetime.now(dt.UTC)
        tasks += [asyncio.create_task(c.run(), name=f"controller {c.name}") for c in self._controllers]
        await self._until(asyncio.Event().wait(), tasks)
        if elector_task is not None and elector_task.done() and not self._stop.is_set():
            raise LeadershipLost(f"{self.elector and self.elector.identity} lost the leader lease")

    async def _elect(self, elector: leader.LeaderElector) -> None:
        """The elector's run (on the lease loop, if there is one) until the lease is lost."""
        here = asyncio.get_running_loop()

        def tell_here() -> None:
            here.call_soon_threadsafe(self.leading.set)

        elector.on_leading = tell_here
        await run_on(self._lease_loop, elector.run())

    async def _run_shards(self) -> None:
        assert self.shards is not None
        try:
            with fence.exempt():  # shard and heartbeat Leases: how this replica confirms what it holds
                await self.shards.run()
        except shards.ShardLost as e:
            raise ShardLost(str(e)) from e

    async def _until(self, wanted: Coroutine[Any, Any, Any], tasks: list[asyncio.Task[None]]) -> bool:
        """Wait for `wanted`; False if a stop request or a finished background task came first."""
        target = asyncio.ensure_future(wanted)
        stop = asyncio.ensure_future(self._stop.wait())
        try:
            await asyncio.wait([target, stop, *tasks], return_when=asyncio.FIRST_COMPLETED)
        finally:
            for fut in (target, stop):
                fut.cancel()
        for task in tasks:
            if task.done() and not task.cancelled() and task.exception() is not None:
                raise task.exception()  # type: ignore[misc]
        return target.done() and not target.cancelled() and not self._stop.is_set()

    async def _shutdown(self, tasks: list[asyncio.Task[None]]) -> None:
        self.metrics.leader.set(0)
        # Controllers stop before the elector: a cancelled elector drops the fence at once (on the
        # lease loop's thread), and a pass still unwinding would then see its last write refused.
        holders = [t for t in tasks if t.get_name() in _LEASE_HOLDERS]
        for phase in ([t for t in tasks if t not in holders], holders):
            for task in reversed(phase):
                task.cancel()
            await asyncio.gather(*phase, return_exceptions=True)
        if self.elector is not None:
            await run_on(self._lease_loop, self.elector.release())
        if self.shards is not None:
            with fence.exempt():
                await self.shards.release()
        await self.probes.stop()

    def _endpoints(self) -> dict[str, Endpoint]:
        def metrics_page() -> tuple[int, str, bytes]:
            return 200, CONTENT_TYPE_LATEST, generate_latest(self.metrics.registry)

        def readyz() -> tuple[int, str, bytes]:
            ok = self.synced.is_set()
            return (200 if ok else 503), "text/plain", b"ok" if ok else b"informers not synced"

        return {
            "/metrics": Endpoint(metrics_page, port="metrics"),
            "/healthz": Endpoint(lambda: (200, "text/plain", b"ok"), port="health"),
            "/readyz": Endpoint(readyz, port="health"),
        }

    @contextlib.contextmanager
    def _signals(self) -> Iterator[None]:
        loop = asyncio.get_running_loop()
        sigs = (signal.SIGTERM, signal.SIGINT) if self._handle_signals else ()
        for sig in sigs:
            loop.add_signal_handler(sig, self.stop)
        try:
            yield
        finally:
            for sig in sigs:
                loop.remove_signal_handler(sig)
