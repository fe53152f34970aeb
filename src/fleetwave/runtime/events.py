"""Kubernetes Events (core/v1) about our objects, with repeats folded into one Event's count.

Like client-go's correlator, the same (object, type, reason, message) within the cache's memory
bumps `count` and `lastTimestamp` instead of creating another Event. Events are best effort: a
failed write is logged, never raised, so it cannot fail a reconcile.

Like client-go's broadcaster, `record` only queues the Event: one writer task per recorder sends
them in order, off the reconcile's path (each Event is a write to the API server, and a rollout's
stage transitions emit several). The queue is bounded; past it an Event is dropped and counted.
An Event's first occurrence is written at once; its repeats are counted in memory and written as one
bump of `count` and `lastTimestamp` `bump_after` seconds after the first of them (ADR 0068: every
revision of a rollout repeats the same stage Events, and a count bump per repeat was a third of the
requests of a rollout). `flush()` waits for what was queued and writes the repeats held back;
`close()` does so within a time limit, at shutdown. Every Event write goes in the client's bulk
lane (`kube.lanes`): a promotion's decision never waits behind one.
"""

from __future__ import annotations

import asyncio
import collections
import datetime as dt
import logging
import uuid
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from lightkube.models.core_v1 import EventSource, ObjectReference
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Event

from fleetwave.core import timestamps
from fleetwave.kube import fence, lanes, ops
from fleetwave.kube.client import AsyncClient
from fleetwave.runtime.background import BackgroundQueue

log = logging.getLogger(__name__)


class EventType(StrEnum):
    NORMAL = "Normal"
    WARNING = "Warning"


@dataclass(frozen=True, slots=True)
class ObjectRef:
    api_version: str
    kind: str
    name: str
    namespace: str | None = None
    uid: str | None = None

    @classmethod
    def of(cls, obj: Any) -> ObjectRef:
        """The reference to a lightkube object (typed or generic)."""
        meta = obj.metadata
        return cls(str(obj.apiVersion), str(obj.kind), str(meta.name), meta.namespace, meta.uid)


@dataclass(slots=True)
class _Seen:
    name: str
    namespace: str
    count: int  # as the Event in the API server has it
    unwritten: int = 0  # repeats counted since, not yet written
    last: dt.datetime | None = None  # when the latest of them happened
    timer: asyncio.TimerHandle | None = None  # the bump that writes them, when one is due


class SpamFilter:
    """Like client-go's spam filter: per key (object and reason), a burst of `burst` Events, then one
    per `refill_seconds`. Every Event is a write to the API server; a rollout that re-plans at every
    batch must not turn each re-plan into one."""

    def __init__(self, *, burst: int = 25, refill_seconds: float = 300.0, size: int = 4096) -> None:
        self.burst, self.refill_seconds, self.size = burst, refill_seconds, size
        self._buckets: collections.OrderedDict[Any, tuple[float, float]] = collections.OrderedDict()

    def allow(self, key: Any, now: float) -> bool:
        tokens, at = self._buckets.get(key, (float(self.burst), now))
        tokens = min(float(self.burst), tokens + (now - at) / self.refill_seconds)
        allowed = tokens >= 1.0
        self._buckets[key] = (tokens - 1.0 if allowed else tokens, now)
        self._buckets.move_to_end(key)
        while len(self._buckets) > self.size:
            self._buckets.popitem(last=False)
        return allowed


# What `record` queued: the object, type, reason, message and when it happened; or, for repeats
# held back, the Event's key and what is known of it.
_Key = tuple[ObjectRef, EventType, str, str]
_Pending = tuple[ObjectRef, EventType, str, str, dt.datetime] | tuple[_Key, _Seen]


class EventRecorder:
    def __init__(
        self,
        client: AsyncClient,
        component: str = "fleetwave",
        *,
        instance: str | None = None,
        cache_size: int = 4096,
        max_pending: int = 1000,
        bump_after: float = 10.0,
    ) -> None:
        self._api = client
        self.component = component
        self.instance = instance or component
        self.bump_after = bump_after
        self._cache_size = cache_size
        self._seen: collections.OrderedDict[_Key, _Seen] = collections.OrderedDict()
        self._spam = SpamFilter(size=cache_size)
        self._closing = False
        self._queue: BackgroundQueue[_Pending] = BackgroundQueue(
            self._handle, what="events", max_pending=max_pending
        )

    @property
    def dropped(self) -> int:
        """Events not written because the queue was full."""
        return self._queue.dropped

    async def record(self, ref: ObjectRef, type_: EventType, reason: str, message: str) -> None:
        """Queue the Event (its time is now); it is written in the background, in order."""
        now = dt.datetime.now(dt.UTC)
        if not self._spam.allow((ref, reason), now.timestamp()):
            log.debug("event %s on %s/%s dropped: too many of it lately", reason, ref.kind, ref.name)
            return
        if not self._queue.put((ref, type_, reason, message, now)):
            log.debug("event %s on %s/%s dropped: %d waiting", reason, ref.kind, ref.name, self._queue.left)

    async def flush(self) -> None:
        """Wait until every queued Event was written (or failed), repeats held back included."""
        await self._queue.flush()
        self._release_all()
        await self._queue.flush()

    async def close(self, within: float = 5.0) -> None:
        """Write what is queued and the repeats held back, within `within` seconds, then stop the
        writer."""
        self._closing = True  # repeats still queued are written as they come, not held back
        self._release_all()
        await self._queue.close(within)

    def _release_all(self) -> None:
        for key, seen in self._seen.items():
            if seen.unwritten:
                self._release(key, seen)

    def _release(self, key: _Key, seen: _Seen) -> None:
        """Queue the write of a held-back count (a timer's, a flush's or an eviction's)."""
        if seen.timer is not None:
            seen.timer.cancel()
            seen.timer = None
        self._queue.put((key, seen))

    async def _handle(self, item: _Pending) -> None:
        # An Event decides nothing: its write goes in the bulk lane, behind a rollout's decisions.
        # Said here, not left to the writer task, which inherits the lane of whichever reconcile
        # happened to record the first Event.
        with lanes.bulk():
            if len(item) == 2:
                key, seen = item
                await self._write_repeats(key, seen)
            else:
                await self._write(*item)

    async def _write(
        self, ref: ObjectRef, type_: EventType, reason: str, message: str, now: dt.datetime
    ) -> None:
        key = (ref, type_, reason, message)
        seen = self._seen.get(key)
        if seen is not None:
            seen.unwritten += 1
            seen.last = now
            self._seen.move_to_end(key)
            if self._closing:
                await self._write_repeats(key, seen)
            elif seen.timer is None:
                seen.timer = asyncio.get_running_loop().call_later(self.bump_after, self._release, key, seen)
            return
        try:
            self._remember(key, await self._create(ref, type_, reason, message, now, 1))
        except Exception as exc:
            _not_recorded(type_, reason, ref, exc)

    async def _write_repeats(self, key: _Key, seen: _Seen) -> None:
        """Add the repeats counted since the last write to the Event (a new one if it expired)."""
        if seen.timer is not None:
            seen.timer.cancel()
            seen.timer = None
        unwritten, at = seen.unwritten, seen.last or dt.datetime.now(dt.UTC)
        if not unwritten:
            return
        seen.unwritten = 0
        ref, type_, reason, message = key
        try:
            if await self._bump(seen, unwritten, at):
                return
            fresh = await self._create(ref, type_, reason, message, at, unwritten)
            if self._seen.get(key) is seen:
                self._remember(key, fresh)
        except Exception as exc:
            _not_recorded(type_, reason, ref, exc)

    async def _bump(self, seen: _Seen, repeats: int, at: dt.datetime) -> bool:
        """Count `repeats` more occurrences; False if the Event has gone (expired by its TTL)."""
        patch = {"count": seen.count + repeats, "lastTimestamp": timestamps.fmt(at)}
        try:
            await ops.merge_patch(self._api, Event, seen.name, patch, namespace=seen.namespace)
        except ops.StatusError as exc:
            if ops.is_not_found(exc):
                return False
            raise
        seen.count += repeats
        return True

    async def _create(
        self, ref: ObjectRef, type_: EventType, reason: str, message: str, now: dt.datetime, count: int
    ) -> _Seen:
        # Cluster-scoped objects get their Events in "default", as kubectl and client-go expect.
        namespace = ref.namespace or "default"
        event = Event(
            metadata=ObjectMeta(name=f"{ref.name}.{uuid.uuid4().hex[:16]}", namespace=namespace),
            involvedObject=ObjectReference(
                apiVersion=ref.api_version, kind=ref.kind, name=ref.name, namespace=ref.namespace, uid=ref.uid
            ),
            type=str(type_),
            reason=reason,
            message=message,
            count=count,
            firstTimestamp=now,
            lastTimestamp=now,
            source=EventSource(component=self.component),
            reportingComponent=self.component,
            reportingInstance=self.instance,
        )
        created = await self._api.create(event)
        return _Seen(str(created.metadata.name), namespace, count)

    def _remember(self, key: _Key, seen: _Seen) -> None:
        self._seen[key] = seen
        self._seen.move_to_end(key)
        while len(self._seen) > self._cache_size:
            old_key, old = self._seen.popitem(last=False)
            if old.unwritten:
                self._release(old_key, old)  # forgotten, but its repeats are still written


def _not_recorded(type_: str, reason: str, ref: ObjectRef, exc: Exception) -> None:
    """A write the fence refused was already logged once by the fence (ADR 0115): at debug level
    here, or a replica that stops with Events queued logs a line for each."""
    level = logging.DEBUG if isinstance(exc, fence.FencedWrite) else logging.WARNING
    log.log(level, "event %s %s on %s/%s not recorded: %s", type_, reason, ref.kind, ref.name, exc)
