"""Which ClusterSummary events wake the promotion of the summary's stage profile, and how soon.

A promotion decides from its summaries' deliveries: whose they are, at which revision, done, failed
or in flight (ADR 0117). Some of that news can change what it does next — a summary's spec or
owner, a failure, the last delivery of a stage done (the stage can succeed and the next one start),
any delivery done while a stage runs with fewer clusters in flight than it has (a slot is free) —
and wakes it at once. The rest only moves a stage's count of clusters done: it wakes the promotion
within PROGRESS_FOLDS seconds, so that a stage of 60 deliveries finishing over half a second costs
a few passes and status writes instead of one per delivery (ADR 0120).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import Any, Protocol

from fleetwave.api.conditions import find
from fleetwave.controllers.shared.context import Cache, as_dict
from fleetwave.controllers.sveltos import rollout_facts
from fleetwave.controllers.sveltos import summary_status as ss
from fleetwave.runtime.controller import besides_status
from fleetwave.runtime.watching import EventType, object_key

PROGRESS_FOLDS = 0.25  # seconds within which a delivery's progress wakes its promotion


class Promotions(Protocol):
    def enqueue(self, key: str, delay: float = 0.0, *, urgent: bool = False) -> None: ...


Mapper = Callable[[Any], Iterable[str]]  # a summary -> the promotions it concerns


class OpenDeliveries:
    """Per stage profile, its summaries, and those whose delivery is not done at the revision each
    carries. `update` says whether an event closed the last open one of those seen."""

    def __init__(self) -> None:
        self._open: dict[str, set[str]] = {}
        self._profile_of: dict[str, str] = {}  # summary -> its profile
        self._seen: dict[str, int] = {}  # profile -> its summaries

    def update(self, event: EventType, name: str, profile: str | None, done: bool) -> bool:
        was = self._profile_of.pop(name, None)
        was_open = was is not None and name in self._open.get(was, ())
        if was is not None:
            self._forget(was, name)
        if event != "DELETED" and profile is not None:
            self._profile_of[name] = profile
            self._seen[profile] = self._seen.get(profile, 0) + 1
            if not done:
                self._open.setdefault(profile, set()).add(name)
        return was_open and was is not None and not self._open.get(was)

    def seen(self, profile: str) -> int:
        return self._seen.get(profile, 0)

    def _forget(self, profile: str, name: str) -> None:
        left = self._seen[profile] - 1
        if left:
            self._seen[profile] = left
        else:
            del self._seen[profile]
        still = self._open.get(profile)
        if still is not None:
            still.discard(name)
            if not still:
                del self._open[profile]


class DeliveryNews:
    """The ClusterSummary informer's listener that wakes promotions (`on_change`). Per summary a
    hash of what a promotion reads is kept, not the fields (100,000 summaries); a collision
    (2**-64) costs one wake, which the promotion's poll while it waits on facts makes up."""

    def __init__(self, promotions: Promotions, promotion_of_summary: Mapper, cache: Cache) -> None:
        self._promotions, self._promotion_of, self._cache = promotions, promotion_of_summary, cache
        self._marks: dict[str, tuple[int, int]] = {}  # summary -> (spec and metadata, delivery)
        self._open = OpenDeliveries()

    def on_change(self, event: EventType, obj: Any) -> None:
        name, raw = object_key(obj), as_dict(obj)
        profile = _profile_of(raw)
        closed = self._open.update(event, name, profile, _done(raw)) and self._all_written(profile)
        woken = list(self._promotion_of(obj))
        if event == "DELETED" or not woken:
            self._marks.pop(name, None)
            decisive = True
        else:
            mark, before = (hash(besides_status(obj)), hash(_delivery_reads(raw))), self._marks.get(name)
            self._marks[name] = mark
            if mark == before or (before is None and not _delivering(raw)):
                return
            decisive = before is None or before[0] != mark[0] or closed or _failed(raw)
        for key in woken:
            now = decisive or self._slots_freed(key)
            self._promotions.enqueue(key, 0.0 if now else PROGRESS_FOLDS)

    def _all_written(self, profile: str | None) -> bool:
        """Whether every cluster the stage profile lists has its summary (a profile writes a stage's
        summaries a few at a time, and those written first can all be done before the rest exist)."""
        if profile is None:
            return False
        found = self._cache.get("ClusterProfile", None, profile) or {}
        return self._open.seen(profile) >= len((found.get("spec") or {}).get("clusterRefs") or [])

    def _slots_freed(self, promotion: str) -> bool:
        """Whether a stage of the promotion runs with fewer clusters in flight than it has: there a
        delivery done lets the next cluster start."""
        found = self._cache.get("ClusterPromotion", None, promotion) or {}
        rollout = (found.get("status") or {}).get("rollout") or {}
        return any(_capped(stage) for stage in rollout.get("stages") or [] if isinstance(stage, Mapping))


def _capped(stage: Mapping[str, Any]) -> bool:
    if stage.get("phase") != "Progressing":
        return False
    limit, clusters = stage.get("maxInFlight"), stage.get("clusters") or []
    return isinstance(limit, int) and 0 < limit < len(clusters)


def _profile_of(raw: Mapping[str, Any]) -> str | None:
    labels = (raw.get("metadata") or {}).get("labels") or {}
    profile = labels.get(ss.PROFILE_LABEL)
    return str(profile) if profile else None


def _wanted(raw: Mapping[str, Any]) -> str:
    annotations = (raw.get("metadata") or {}).get("annotations") or {}
    return str(annotations.get(ss.CONTENT_HASH_ANNOTATION, ""))


def _done(raw: Mapping[str, Any]) -> bool:
    """Done as the promotion counts it: delivered and Ready at the revision the summary carries."""
    return rollout_facts.delivery_of(raw, _wanted(raw)).done


def _failed(raw: Mapping[str, Any]) -> bool:
    ready = find(raw.get("status") or {}, "Ready") or {}
    return ready.get("reason") == "Failed"


def _delivery_reads(raw: Mapping[str, Any]) -> Hashable:
    """What a promotion reads of a summary's delivery (`rollout_facts.delivery_of`), less the
    progress messages that only describe a delivery in flight (a failure's message is the
    promotion's status)."""
    status = raw.get("status") or {}
    ready = find(status, "Ready") or {}
    message = ready.get("message") if ready.get("reason") == "Failed" else None
    return (status.get("observedContentHash"), ready.get("status"), ready.get("reason"), message)


def _delivering(raw: Mapping[str, Any]) -> bool:
    """Whether a summary says anything of its delivery yet (a revision it holds, a Ready verdict)."""
    status = raw.get("status") or {}
    return bool(status.get("observedContentHash")) or find(status, "Ready") is not None
