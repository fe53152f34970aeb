"""Wake-ups from member clusters: a judgement that is not yet healthy re-runs as soon as what it
reads changes on the member, instead of at the next poll (ADR 0065).

A stream is one watch on one member for one (apiVersion, kind, namespace): a list of one item for a
starting resourceVersion, then a watch with bookmarks. It keeps no objects (the judgement reads the
member itself); every event calls the wake-up of each subscriber. Streams are shared by every
judgement reading the same kind there and end when their last subscriber leaves or stops renewing,
after lingering `linger` seconds: the next rollout's judgement on that member then finds its stream
running instead of paying a list and a new watch on its critical path (ADR 0068). A lingering stream
gives its place up to a new one when a bound is reached.
Bounded: at most `per_member` streams per member and `total` overall; past a bound a judgement
is not watched and falls back to its poll, which stays as the safety net for what no stream covers
(a Lua `getResource`, a watch the member refuses).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections.abc import Callable, Coroutine, Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from fleetwave.delivery import content as ct
from fleetwave.delivery.target import MemberTarget, MemberUnreachable
from fleetwave.kube import client as kubeclient
from fleetwave.kube import internals, kinds, ops
from fleetwave.runtime import queueing

log = logging.getLogger(__name__)

Wake = Callable[[], None]
# Which changes wake a subscriber: it is given the changed object (None: always woken).
Only = Callable[[Mapping[str, Any]], bool]
# What a subscriber is told of every change before the wake: the object, or None when unknown.
Note = Callable[[Mapping[str, Any] | None], None]


class Changed(Protocol):
    """What a stream calls on a change: with the changed object, or with nothing when what changed
    is not known (the stream listed again, an object was deleted)."""

    def __call__(self, obj: Mapping[str, Any] | None = None) -> None: ...


StreamRunner = Callable[[MemberTarget, "Interest", Changed], Coroutine[Any, Any, None]]


@dataclass(frozen=True, slots=True)
class Interest:
    """What a judgement reads on a member: one kind, in one namespace (None: every namespace)."""

    api_version: str
    kind: str
    namespace: str | None = None


@dataclass(frozen=True, slots=True)
class _StreamKey:
    member: str
    credentials: str  # hash of the kubeconfig: a rotated credential starts a fresh stream
    interest: Interest


@dataclass(slots=True)
class _Stream:
    task: asyncio.Task[None] | None = None
    # key -> (wake, renewed, which changes wake it, what is told of every change)
    subscribers: dict[Hashable, tuple[Wake, float, Only | None, Note | None]] = field(default_factory=dict)
    events: int = 0
    last_event: float = float("-inf")  # clock time of the last change it reported
    idle_since: float | None = None  # when its last subscriber left (it lingers until `linger`)
    server: Hashable = None  # the member API server and credentials it watches (`pool_key`)
    # The objects it saw change, as last seen, by (namespace, name): an apply goes over the version
    # seen instead of reading the object first (`latest`). Forgotten when it cannot name a change.
    # Without status and managedFields (what an apply judges is the rest): a few KiB each.
    seen: dict[tuple[str | None, str], Mapping[str, Any]] = field(default_factory=dict)


SEEN_PER_STREAM = 64  # the most recently changed; with `total` streams, a bound on the memory kept


_BACKOFF = queueing.Backoff(base=0.5, cap=30.0)


class MemberWatches:
    def __init__(
        self,
        *,
        per_member: int = 16,
        total: int = 2000,
        idle_seconds: float = 300.0,
        linger: float = 0.0,
        server_timeout: int = 240,
        clock: Callable[[], float] = time.monotonic,
        stream: StreamRunner | None = None,
    ) -> None:
        self.per_member = per_member
        self.total = total
        self.idle_seconds = idle_seconds
        self.linger = linger
        self.server_timeout = server_timeout
        self._clock = clock
        self._streams: dict[_StreamKey, _Stream] = {}
        # The streams by member API server and credentials (`MemberTarget.pool_key`) and kind.
        self._by_server: dict[tuple[Hashable, str, str], set[_StreamKey]] = {}
        self._stream = stream or self._watch
        self.refused = 0  # subscriptions past a bound (observable in tests and benchmarks)

    def now(self) -> float:
        return self._clock()

    def subscribe(
        self,
        target: MemberTarget,
        interests: Iterable[Interest],
        key: Hashable,
        wake: Wake,
        *,
        since: float | None = None,
        only: Only | None = None,
        note: Note | None = None,
    ) -> bool:
        """Call `wake` when something of `interests` changes on `target`, until `release(key)` (or
        `idle_seconds` without a renewal: a subscriber that vanished must not keep streams alive).
        `only`: which changed objects wake it (a deletion, or a stream listing again, always does).
        `note`: told of every change first, with the object (None when what changed is not known).

        `since`: when the judgement began reading (`now()`); a change a stream saw after that and
        before this call wakes at once, so nothing that happened while judging is missed. A new
        stream wakes its subscribers once it has listed, for the same reason. False when a bound
        left some of `interests` without a stream (the subscriber's poll must cover them)."""
        credentials = hashlib.sha256(target.kubeconfig).hexdigest()[:16]
        now = self._clock()
        self._expire(now)
        missed, covered, wanted = False, True, set()
        for interest in _covering(interests):
            skey = _StreamKey(target.name, credentials, interest)
            wanted.add(skey)
            stream = self._streams.get(skey) or self._open(target, skey, interest)
            if stream is None:
                covered = False
                continue
            stream.subscribers[key] = (wake, now, only, note)
            stream.idle_since = None
            missed = missed or (since is not None and stream.last_event >= since)
        self._leave_others(target.name, wanted, key)
        if missed:
            if note is not None:
                note(None)
            wake()
        return covered

    def _leave_others(self, member: str, wanted: set[_StreamKey], key: Hashable) -> None:
        """A subscriber reads only what it named last: drop it from streams it no longer needs."""
        for skey, stream in list(self._streams.items()):
            if skey not in wanted and skey.member == member and key in stream.subscribers:
                self._leave(skey, stream, key)

    def _open(self, target: MemberTarget, skey: _StreamKey, interest: Interest) -> _Stream | None:
        """A new stream of `interest` on `target`, or None past the bound of streams per member."""
        if not self._room_for(target.name):
            self.refused += 1
            return None
        stream = self._streams[skey] = _Stream()
        self._by_server.setdefault((target.pool_key(), interest.api_version, interest.kind), set()).add(skey)
        stream.server = target.pool_key()
        stream.task = asyncio.get_running_loop().create_task(
            self._stream(target, interest, _waker(stream, self._clock)),
            name=f"member watch {target.name} {interest.kind}",
        )
        return stream

    def release(self, key: Hashable) -> None:
        """`key` needs no more wake-ups (its judgement passed, or its object is gone)."""
        for skey, stream in list(self._streams.items()):
            if key in stream.subscribers:
                self._leave(skey, stream, key)

    def streams(self) -> int:
        return len(self._streams)

    def latest(self, server: Hashable, ref: ct.ObjectRef) -> Mapping[str, Any] | None:
        """The object as a stream on that server last saw it change (the newest, if several
        registrations of the server watch it); None when no stream saw it. Only as fresh as the
        watch: whoever applies over it finds out from the refusal if it changed since."""
        best: Mapping[str, Any] | None = None
        for skey in self._by_server.get((server, ref.api_version, ref.kind), ()):
            if skey.interest.namespace not in (None, ref.namespace):
                continue
            stream = self._streams.get(skey)
            found = None if stream is None else stream.seen.get((ref.namespace, ref.name))
            if found is not None and (best is None or _newer(found, best)):
                best = found
        return best

    async def close(self) -> None:
        tasks = [s.task for s in self._streams.values() if s.task is not None]
        self._streams.clear()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def _room_for(self, member: str) -> bool:
        if len(self._streams) >= self.total and not self._evict_lingering(None):
            return False
        if sum(1 for k in self._streams if k.member == member) < self.per_member:
            return True
        return self._evict_lingering(member)

    def _evict_lingering(self, member: str | None) -> bool:
        """End the longest-idle lingering stream (of `member`, or of any); False if there is none."""
        idle = [
            (s.idle_since, k)
            for k, s in self._streams.items()
            if s.idle_since is not None and (member is None or k.member == member)
        ]
        if not idle:
            return False
        _, skey = min(idle, key=lambda pair: pair[0])
        self._end(skey)
        return True

    def _end(self, skey: _StreamKey) -> None:
        stream = self._streams.pop(skey, None)
        if stream is None:
            return
        index = (stream.server, skey.interest.api_version, skey.interest.kind)
        self._by_server.get(index, set()).discard(skey)
        if not self._by_server.get(index, True):
            del self._by_server[index]
        if stream.task is not None:
            stream.task.cancel()

    def _expire(self, now: float) -> None:
        for skey, stream in list(self._streams.items()):
            for key, (_wake, renewed, _only, _note) in list(stream.subscribers.items()):
                if now - renewed > self.idle_seconds:
                    self._leave(skey, stream, key)
            if stream.idle_since is not None and now - stream.idle_since >= self.linger:
                self._end(skey)

    def _leave(self, skey: _StreamKey, stream: _Stream, key: Hashable) -> None:
        stream.subscribers.pop(key, None)
        if stream.subscribers:
            return
        if self.linger > 0:
            stream.idle_since = self._clock()
            asyncio.get_running_loop().call_later(self.linger, self._end_if_still_idle, skey, stream)
        else:
            self._end(skey)

    def _end_if_still_idle(self, skey: _StreamKey, stream: _Stream) -> None:
        idle = stream.idle_since
        if self._streams.get(skey) is stream and idle is not None and self._clock() - idle >= self.linger:
            self._end(skey)

    async def _watch(self, target: MemberTarget, interest: Interest, changed: Changed) -> None:
        """The stream: call `changed` on every change of `interest` on `target`, until cancelled."""
        failures, listed = 0, False
        while True:
            try:
                async with target.session() as client:
                    resource = await _resource(client, interest)
                    namespaced = internals.is_namespaced(resource)
                    namespace = (interest.namespace or ops.ALL_NAMESPACES) if namespaced else None
                    listing = client.list(resource, namespace=namespace, chunk_size=1)
                    async for _ in listing:
                        break  # one item is enough: only the list's resourceVersion is wanted
                    if failures or not listed:
                        changed()  # what changed before this list (or while the stream was down)
                    listed = True
                    stream_events = internals.watch_with_bookmarks(
                        client,
                        resource,
                        namespace=namespace,
                        labels=None,
                        resource_version=listing.resourceVersion,
                        server_timeout=self.server_timeout,
                    )
                    async for event_type, obj in stream_events:
                        failures = 0
                        if event_type == "DELETED":
                            changed()
                        elif event_type != "BOOKMARK":
                            changed({"apiVersion": interest.api_version, "kind": interest.kind, **dict(obj)})
            except asyncio.CancelledError:
                raise
            except (kinds.UnknownKind, MemberUnreachable, ops.HTTPError, ops.StatusError, OSError) as e:
                failures += 1
                log.debug("member watch %s %s: %s", target.name, interest.kind, type(e).__name__)
            except Exception:  # a stream must never take the controller down
                failures += 1
                log.exception("member watch %s %s failed", target.name, interest.kind)
            await asyncio.sleep(_BACKOFF.delay(max(failures, 1)))


def _waker(stream: _Stream, clock: Callable[[], float]) -> Changed:
    """Wakes every subscriber of `stream` the change concerns (as they are at the time of it)."""

    def wake_all(obj: Mapping[str, Any] | None = None) -> None:
        stream.events += 1
        stream.last_event = clock()
        _see(stream, obj)
        for wake, _renewed, only, note in list(stream.subscribers.values()):
            try:
                if note is not None:
                    note(obj)
                if obj is None or only is None or only(obj):
                    wake()
            except Exception:  # one faulty subscriber must not silence the others
                log.exception("member watch: a wake-up failed")

    return wake_all


def _see(stream: _Stream, obj: Mapping[str, Any] | None) -> None:
    """Keep what the stream saw; a change it cannot name (a deletion, a new list) forgets it all."""
    if obj is None:
        stream.seen.clear()
        return
    meta = obj.get("metadata") or {}
    key = (meta.get("namespace") or None, str(meta.get("name")))
    kept = ct.comparable(obj)
    kept["metadata"].update(resourceVersion=meta.get("resourceVersion"), uid=meta.get("uid"))
    stream.seen.pop(key, None)
    stream.seen[key] = kept
    if len(stream.seen) > SEEN_PER_STREAM:
        del stream.seen[next(iter(stream.seen))]  # the one unchanged the longest


def _newer(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    va, vb = ct.version_number(a), ct.version_number(b)
    return va is not None and vb is not None and va > vb


def _covering(interests: Iterable[Interest]) -> set[Interest]:
    """The streams that cover `interests`: a kind read in every namespace needs no per-namespace ones."""
    wanted = set(interests)
    everywhere = {(i.api_version, i.kind) for i in wanted if i.namespace is None}
    return {i for i in wanted if i.namespace is None or (i.api_version, i.kind) not in everywhere}


async def _resource(client: kubeclient.AsyncClient, interest: Interest) -> Any:
    """The dict-in, dict-out class of the kind: a stream never decodes into typed models, because a
    BOOKMARK of a typed kind carries an empty object (a Job's `containers: null`) that they refuse."""
    gvk = kinds.GVK(interest.api_version, interest.kind)
    info = kinds.builtin(gvk) or await kinds.AsyncKinds(client).resolve(gvk)
    return kinds.resource_class(info)
