"""What a readiness judgement last saw of its objects, so its next run need not read them again
(ADR 0068, addendum bf5b632).

A judgement that is not yet ready is woken by the member watch when one of its objects turns ready;
it used to read every object again, a round trip on the critical path of each stage. Here it keeps
what it saw (the delivery's apply responses, its own reads) and what the watch delivered since, and
judges on those while they are fresh:

- every sighting is trusted for `fresh_seconds` at most, the window a staged run already judges its
  just-applied objects in (`executor.JUST_APPLIED_SECONDS`): a slower rollout reads as before;
- an object from the watch replaces a sighting only when it is the same object (uid) at a later
  resourceVersion (comparable since Kubernetes 1.35, KEP-5504): an event still in flight from before
  the apply cannot pass for the object after it; an object whose versions cannot be compared is
  not taken, and the judgement reads it;
- a change the watch cannot name (a deletion, a stream listing again, a change missed while the
  judgement ran) forgets everything the judgement saw.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from fleetwave.delivery import content as ct

ObjectId = tuple[str, str, str | None, str]  # apiVersion, kind, namespace, name

FRESH_SECONDS = 1.0


@dataclass(slots=True)
class _Seen:
    ids: frozenset[ObjectId]
    objects: dict[ObjectId, tuple[float, Mapping[str, Any]]] = field(default_factory=dict)


def object_id(obj: Mapping[str, Any]) -> ObjectId:
    meta = obj.get("metadata") or {}
    return (
        str(obj.get("apiVersion")),
        str(obj.get("kind")),
        meta.get("namespace") or None,
        str(meta.get("name")),
    )


def _matching(ids: frozenset[ObjectId], seen: ObjectId) -> ObjectId | None:
    """The id of `ids` naming the object the watch saw: a judgement names a namespaced object
    without a namespace when its manifest had none (the member put it in the default one)."""
    if seen in ids:
        return seen
    unplaced = (seen[0], seen[1], None, seen[3])
    return unplaced if seen[2] is not None and unplaced in ids else None


def _uid(obj: Mapping[str, Any]) -> Any:
    return (obj.get("metadata") or {}).get("uid")


class Sightings:
    def __init__(
        self, *, fresh_seconds: float = FRESH_SECONDS, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.fresh_seconds = fresh_seconds
        self._clock = clock
        self._seen: dict[Hashable, _Seen] = {}
        self._swept_at = 0

    def remember(self, key: Hashable, ids: Iterable[ObjectId], fresh: Mapping[ObjectId, Any]) -> None:
        """Judgement `key` judges `ids`, of which it just got `fresh` from the member (applied or
        read; anything but a mapping, e.g. an absent object, is not kept). What it judged on from
        earlier sightings keeps the time it was seen: judging on a sighting does not renew it."""
        now = self._clock()
        before = self._seen.get(key)
        entry = self._seen[key] = _Seen(frozenset(ids))
        for oid in entry.ids:
            obj = fresh.get(oid)
            if isinstance(obj, Mapping):
                entry.objects[oid] = (now, obj)
            elif oid not in fresh and before is not None and oid in before.objects:
                entry.objects[oid] = before.objects[oid]
        if len(self._seen) > 2 * max(self._swept_at, 512):
            self._sweep(now)

    def note(self, key: Hashable, obj: Mapping[str, Any] | None) -> None:
        """The member watch's change of `obj` (None: a change it cannot name)."""
        if obj is None:
            self._seen.pop(key, None)
            return
        entry = self._seen.get(key)
        if entry is None:
            return
        oid = _matching(entry.ids, object_id(obj))
        if oid is None:
            return
        held = entry.objects.get(oid)
        if held is not None:
            mine, theirs = ct.version_number(held[1]), ct.version_number(obj)
            if mine is None or theirs is None or _uid(held[1]) != _uid(obj):
                del entry.objects[oid]  # cannot tell which is newer: the next judgement reads it
                return
            if theirs <= mine:
                return  # an event from before what was seen
        entry.objects[oid] = (self._clock(), obj)

    def forget(self, key: Hashable) -> None:
        self._seen.pop(key, None)

    def usable(self, key: Hashable, ids: Iterable[ObjectId]) -> dict[ObjectId, Mapping[str, Any]]:
        """The objects of `ids` seen recently enough to judge without reading them."""
        entry = self._seen.get(key)
        if entry is None:
            return {}
        now = self._clock()
        return {
            oid: held[1]
            for oid in ids
            if (held := entry.objects.get(oid)) is not None and now - held[0] <= self.fresh_seconds
        }

    def __len__(self) -> int:
        return len(self._seen)

    def _sweep(self, now: float) -> None:
        """Judgements whose sightings are all stale hold nothing worth keeping (their next run reads)."""
        for key, entry in list(self._seen.items()):
            if all(now - at > self.fresh_seconds for at, _ in entry.objects.values()):
                del self._seen[key]
        self._swept_at = len(self._seen)
