"""The version of each object this process's last apply returned, per member API server and
credentials: the next apply of that object goes over it without reading the object first.

Safe because the version is the apply's precondition (`manifests._read_at`): an object anyone
changed since is refused by the API server and read again, so ownership is still judged on exactly
what is there. Only objects without status are kept: a controller writing an object's status moves
its version after every apply, and the refusal would then cost a round trip more than the read it
saves. A Namespace's `Active` phase is the exception: nothing moves it. Bounded (least recently
used out first) and kept in memory only: a restart reads again. Applies of one object on one server
take turns (`turn`), so that each goes over the version the one before it returned.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import AsyncIterator, Hashable, Mapping
from contextlib import asynccontextmanager
from typing import Any

from fleetwave.delivery import content as ct

LIMIT = 50_000  # objects, across all members (each entry is the object without its managedFields)


class KnownVersions:
    def __init__(self, limit: int = LIMIT) -> None:
        self.limit = limit
        self._entries: OrderedDict[tuple[Hashable, object], dict[str, Any]] = OrderedDict()
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
        """The object as this process's last apply of it on `server` left it, if kept."""
        key = (server, ref.identity)
        found = self._entries.get(key)
        if found is not None:
            self._entries.move_to_end(key)
        return found

    def keep(self, server: Hashable, ref: ct.ObjectRef, live: Mapping[str, Any]) -> None:
        """Remember what an apply returned (or forget the object when it carries status)."""
        key = (server, ref.identity)
        version = (live.get("metadata") or {}).get("resourceVersion")
        if not _status_is_settled(live) or not version:
            self._entries.pop(key, None)
            return
        kept = ct.comparable(live)
        kept["metadata"]["resourceVersion"] = version
        kept["metadata"]["uid"] = (live.get("metadata") or {}).get("uid")
        self._entries[key] = kept
        self._entries.move_to_end(key)
        while len(self._entries) > self.limit:
            self._entries.popitem(last=False)

    def forget(self, server: Hashable, ref: ct.ObjectRef) -> None:
        self._entries.pop((server, ref.identity), None)

    def __len__(self) -> int:
        return len(self._entries)


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
