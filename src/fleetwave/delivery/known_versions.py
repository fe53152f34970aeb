"""The version of each object this process's last apply returned, per member API server and
credentials: the next apply of that object goes over it without reading the object first.

Safe because the version is the apply's precondition (`manifests._read_at`): an object anyone
changed since is refused by the API server and read again, so ownership is still judged on exactly
what is there. Only objects without status are kept: a controller writing an object's status moves
its version after every apply, and the refusal would then cost a round trip more than the read it
saves. A Namespace's `Active` phase is the exception: nothing moves it. Bounded (least recently
used out first) and kept in memory only: a restart reads again. Applies of one object on one server
take turns (`turn`), so that each goes over the version the one before it returned.

An object with status is taken from a member watch instead (`watched`), when one follows it and
has seen it at the version our last apply returned or later: the watch saw the controller's status
writes that moved the version (a Deployment's, after every apply). One it has not seen is read.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Hashable, Mapping
from contextlib import asynccontextmanager
from typing import Any

from fleetwave.delivery import content as ct

LIMIT = 50_000  # objects, across all members (each entry is the object without its managedFields)

# What a member watch last saw of an object on a server (None: no watch follows it, or saw it).
Watched = Callable[[Hashable, ct.ObjectRef], Mapping[str, Any] | None]


class KnownVersions:
    def __init__(self, limit: int = LIMIT, watched: Watched | None = None) -> None:
        self.limit = limit
        self.watched = watched
        # (server, identity) -> (whether its status is settled, the object as our last apply left it)
        self._entries: OrderedDict[tuple[Hashable, object], tuple[bool, dict[str, Any]]] = OrderedDict()
        self._turns: dict[tuple[Hashable, object], tuple[asyncio.Lock, int]] = {}

    @asynccontextmanager
    async def turn(self, server: Hashable, ref: ct.ObjectRef) -> AsyncIterator[None]:
        """One apply of an object on a server at a time in this process. Two registrations of one
        cluster deliver the same object at once (ADR 0066): both went over the version known
        before, and all but the first were refused and read again (a read and an apply more each);
        in turn, each goes over the version the one before it returned."""
        key = (server, ref.identity)
        lock, users = self._turns.get(key) or (asyncio.Lock(), 0)
        self._turns[key] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._turns[key]
            if users == 1:
                del self._turns[key]
            else:
                self._turns[key] = (lock, users - 1)

    def get(self, server: Hashable, ref: ct.ObjectRef) -> dict[str, Any] | None:
        """The object as this process's last apply of it on `server` left it, if its status is
        settled; else as a member watch last saw it, if not older than that apply's result. A
        settled one that a member watch has seen change since is taken as the watch saw it: a
        Deployment or Job the API server has just created comes back with `status: {}`, and its
        controller writes the status next (over the creation's version the next apply would be
        refused, then read again)."""
        key = (server, ref.identity)
        found = self._entries.get(key)
        seen = self.watched(server, ref) if self.watched is not None else None
        if found is not None:
            self._entries.move_to_end(key)
            if found[0]:
                return _kept(seen) if seen is not None and _changed_since(seen, found[1]) else found[1]
        if seen is None or (found is not None and not _not_older(seen, found[1])):
            return None
        return _kept(seen)

    def keep(self, server: Hashable, ref: ct.ObjectRef, live: Mapping[str, Any]) -> None:
        """Remember what an apply returned."""
        key = (server, ref.identity)
        if not (live.get("metadata") or {}).get("resourceVersion"):
            self._entries.pop(key, None)
            return
        self._entries[key] = (_status_is_settled(live), _kept(live))
        self._entries.move_to_end(key)
        while len(self._entries) > self.limit:
            self._entries.popitem(last=False)

    def forget(self, server: Hashable, ref: ct.ObjectRef) -> None:
        self._entries.pop((server, ref.identity), None)

    def __len__(self) -> int:
        return len(self._entries)


def _kept(live: Mapping[str, Any]) -> dict[str, Any]:
    """The object without status and bookkeeping, with the version and uid an apply goes over."""
    meta = live.get("metadata") or {}
    kept = ct.comparable(live)
    kept["metadata"]["resourceVersion"] = meta.get("resourceVersion")
    kept["metadata"]["uid"] = meta.get("uid")
    return kept


def _not_older(seen: Mapping[str, Any], applied: Mapping[str, Any]) -> bool:
    """Whether the watch saw the object at the version our apply returned or later: versions of one
    object compare as integers (KEP-5504, Kubernetes 1.35); any other version only when equal."""
    mine, theirs = applied["metadata"], seen.get("metadata") or {}
    if mine.get("uid") != theirs.get("uid"):
        return False
    a, b = ct.version_number(applied), ct.version_number(seen)
    if a is not None and b is not None:
        return b >= a
    return str(mine.get("resourceVersion") or "") == str(theirs.get("resourceVersion") or "")


def _changed_since(seen: Mapping[str, Any], applied: Mapping[str, Any]) -> bool:
    """Whether the watch saw the object at a later version than our apply returned (the same
    object: its uid; versions compared as integers, else never later)."""
    if (seen.get("metadata") or {}).get("uid") != applied["metadata"].get("uid"):
        return False
    a, b = ct.version_number(applied), ct.version_number(seen)
    return a is not None and b is not None and b > a


# Statuses the API server sets when it creates the object and no controller moves while it lives:
# a Namespace is Active until it is deleted, and the deletion changes its version anyway.
_SETTLED = {("v1", "Namespace"): {"phase": "Active"}}


def _status_is_settled(live: Mapping[str, Any]) -> bool:
    """Whether nothing will move the object's version after our apply but another writer's change."""
    status = live.get("status")
    settled = _SETTLED.get((str(live.get("apiVersion")), str(live.get("kind"))))
    return not _has_status(status) or settled == status


def _has_status(status: Any) -> bool:
    """Whether a status says anything (`{"loadBalancer": {}}` of a ClusterIP Service does not)."""
    if isinstance(status, Mapping):
        return any(_has_status(v) for v in status.values())
    if isinstance(status, list):
        return bool(status)
    return status is not None and status != ""
