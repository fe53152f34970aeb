"""A level-triggered controller: keys from informers go through a WorkQueue to N workers.

`reconcile(key)` re-reads the world and returns a `Result`; one switch turns it into queue
actions (controller-runtime's): raise -> rate-limited retry; requeue_after -> forget the backoff
and add after the delay; requeue (or a requeue_after <= 0) -> rate-limited retry without an error;
otherwise forget.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from fleetwave.kube import fence, lanes, ops
from fleetwave.runtime import metrics, queueing, watching

log = logging.getLogger(__name__)

K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True, slots=True)
class Result:
    requeue_after: float | None = None
    requeue: bool = False
    # `requeue_after` is a re-check (polling for facts a watch should bring, a safety net), not a
    # deadline the pass promised: it waits with keys woken by events (ADR 0117).
    poll: bool = False


def _about(controller: str, key: object) -> dict[str, str]:
    """The object a reconcile's log line is about, for structured logs (`runtime.logs`): the
    controller's name is its kind, a key of "namespace/name" or "name" its object."""
    if not isinstance(key, str):
        return {"kind": controller}
    namespace, _, name = key.rpartition("/")
    return {"kind": controller, "namespace": namespace, "object_name": name}


class Controller(Generic[K]):
    def __init__(
        self,
        name: str,
        reconcile: Callable[[K], Awaitable[Result]],
        *,
        workers: int = 1,
        queue: queueing.WorkQueue[K] | None = None,
        metrics_: metrics.Metrics | None = None,
        bulk: bool = False,
        deadlines_first: bool = False,
        deadline_workers: int = 0,
    ) -> None:
        """`bulk`: its reconciles' API requests go in their clients' bulk lane (`kube.lanes`).
        `deadlines_first`: a key whose `requeue_after` (not a poll) fell due is handed out before
        keys woken by events (ADR 0117) — for rollouts, whose timers are gates people wait on; a
        controller whose timers are safety nets keeps them with its events. `deadline_workers`: that
        many more workers, which take only such keys: when every other worker is busy (each pass
        awaiting the API server), a deadline falling due still starts at once (ADR 0129)."""
        self.name = name
        self._reconcile = reconcile
        self._workers = workers
        self._bulk = bulk
        self._deadlines_first = deadlines_first
        self._deadline_workers = deadline_workers if deadlines_first else 0
        self.queue: queueing.WorkQueue[K] = queue if queue is not None else queueing.WorkQueue()
        self._metrics = metrics_ if metrics_ is not None else metrics.Metrics()
        self._metrics.queue_depth.labels(name).set_function(lambda: len(self.queue))
        self._sharding: Sharding[K] | None = None
        self._running: dict[K, int] = {}  # key in flight -> the shard it was admitted under

    @property
    def bulk(self) -> bool:
        return self._bulk

    def shard(self, sharding: Sharding[K]) -> None:
        """Reconcile only the keys of shards this replica owns (ADR 0067)."""
        self._sharding = sharding

    def _admits(self, key: K) -> bool:
        s = self._sharding
        return s is None or s.owns(s.shard_of(key))

    def busy(self, shard: int) -> bool:
        """Whether a reconcile of one of the shard's keys is in flight."""
        return shard in self._running.values()

    def resync(self, shard: int) -> None:
        """Enqueue every key of a shard just taken: its events were dropped while another held it."""
        s = self._sharding
        if s is None:
            return
        for key in s.all_keys():
            if s.shard_of(key) == shard:
                self.queue.add(key)

    def watch(
        self,
        informer: watching.Informer,
        mapper: Callable[[Any], Iterable[K]],
        *,
        delay: float = 0.0,
        signature: Callable[[Any], Hashable] | None = None,
        urgent: bool = False,
    ) -> None:
        """Enqueue `mapper(obj)` on every change the informer sees (e.g. an owner's key); with a
        `delay`, that many seconds later, every change meanwhile folded into the one reconcile.
        `signature`: what of an object the controller reads (e.g. `besides_status`); a change that
        leaves it as it was is not followed. Creation and removal always are. `urgent`: the keys go
        in the timer lane, before every key woken by other news (a person's decision, which someone
        is waiting to see acted on)."""
        seen: dict[str, Hashable] = {}

        def enqueue(event: watching.EventType, obj: Any) -> None:
            if signature is not None:
                name = watching.object_key(obj)
                if event == "DELETED":
                    seen.pop(name, None)
                else:
                    mark = signature(obj)
                    if name in seen and seen[name] == mark:
                        return
                    seen[name] = mark
            for key in mapper(obj):
                self.enqueue(key, delay, urgent=urgent)

        informer.on_change(enqueue)

    def enqueue(self, key: K, delay: float = 0.0, *, urgent: bool = False) -> None:
        if not self._admits(key):
            return
        lane = queueing.Lane.TIMER if urgent else queueing.Lane.EVENT
        if delay > 0:
            self.queue.add_after(key, delay, lane)  # news, only folded
        else:
            self.queue.add(key, lane)

    async def run(self) -> None:
        """Run the workers until cancelled; shuts the queue down on the way out."""
        tasks = [asyncio.create_task(self._worker(), name=f"{self.name}-{i}") for i in range(self._workers)]
        tasks += [
            asyncio.create_task(self._worker(timer_lane_only=True), name=f"{self.name}-deadlines-{i}")
            for i in range(self._deadline_workers)
        ]
        try:
            await asyncio.gather(*tasks)
        finally:
            self.queue.shutdown()
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _worker(self, *, timer_lane_only: bool = False) -> None:
        while True:
            try:
                key = await self.queue.get(timer_lane_only=timer_lane_only)
            except queueing.ShutDown:
                return
            try:
                await self._process(key)
            finally:
                self.queue.done(key)
            # A pass that makes no request never suspends, and neither does `get` while keys are
            # ready: without this, one worker ran pass after pass in one turn of the loop (8 s at
            # 100 rollouts over 1,000 clusters), and gate timers, watch events and other workers'
            # replies waited behind it (ADR 0143).
            await asyncio.sleep(0)

    async def _process(self, key: K) -> None:
        s = self._sharding
        if s is None:
            await self._reconcile_once(key)
            return
        shard = s.shard_of(key)
        if not s.owns(shard):  # given up or never ours: the owner reconciles it
            self.queue.forget(key)
            return
        self._running[key] = shard
        try:
            await self._reconcile_once(key)
        finally:
            del self._running[key]

    async def _reconcile_once(self, key: K) -> None:
        m = self._metrics
        waited = self.queue.waited(key)
        m.event_to_reconcile.labels(self.name).observe(waited)
        started = time.perf_counter()
        try:
            with lanes.bulk() if self._bulk else contextlib.nullcontext():
                result = await self._reconcile(key)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            if isinstance(e, ops.StatusError) and (ops.is_not_found(e) or ops.is_stale(e)):
                # An object deleted, or changed by someone else, while it was reconciled (a write
                # guarded by the resourceVersion it read was refused): the retry reads it afresh.
                # Routine under concurrent edits, so no traceback.
                log.debug("controller %s: %r: %s; retrying", self.name, key, ops.message_of(e))
            elif isinstance(e, fence.FencedWrite):
                # The lease is not confirmed: the fence has said so once for the whole spell, and
                # every reconcile in flight meets it; the retry writes once the lease is renewed.
                log.debug("controller %s: %r: %s; retrying", self.name, key, e)
            else:
                log.exception(
                    "controller %s: reconcile of %r failed", self.name, key, extra=_about(self.name, key)
                )
            m.reconcile_errors.labels(self.name).inc()
            m.reconciles.labels(self.name, "error").inc()
            self.queue.add_rate_limited(key)
            return
        finally:
            took = time.perf_counter() - started
            m.reconcile_duration.labels(self.name).observe(took)
            # The timeline `bench/trace_rollout.py --controller-log` merges with watch events.
            log.debug(
                "reconciled %s %s: waited %.1f ms, took %.1f ms", self.name, key, waited * 1e3, took * 1e3
            )
        m.reconciles.labels(self.name, _apply(self.queue, key, result, self._deadlines_first)).inc()


@dataclass(frozen=True, slots=True)
class Sharding(Generic[K]):
    """How a controller's keys map to shards, and which shards this replica owns."""

    shard_of: Callable[[K], int]
    owns: Callable[[int], bool]
    all_keys: Callable[[], Iterable[K]]  # every key the controller reconciles, from the caches


def besides_status(obj: Any) -> tuple[str, ...]:
    """What of an object changes with anything but its status (the spec moves `generation`)."""
    meta = obj.metadata
    return tuple(repr(getattr(meta, field, None)) for field in _BESIDES_STATUS)


_BESIDES_STATUS = (
    "uid",
    "generation",
    "deletionTimestamp",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
)


def _apply(queue: queueing.WorkQueue[K], key: K, result: Result, deadlines_first: bool = False) -> str:
    """Turn a successful Result into queue actions; returns the metric label."""
    if result.requeue_after is not None and result.requeue_after > 0:
        queue.forget(key)
        deadline = deadlines_first and not result.poll
        queue.add_after(key, result.requeue_after, queueing.Lane.TIMER if deadline else queueing.Lane.EVENT)
        return "requeue_after"
    if result.requeue or result.requeue_after is not None:
        queue.add_rate_limited(key)
        return "requeue"
    queue.forget(key)
    return "success"
