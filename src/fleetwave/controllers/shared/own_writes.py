"""Our own status writes that the informer cache has not shown yet.

A reconcile woken right after this controller wrote an object's status (by a member watch, a timer)
would read the cache from before that write and redo what the write recorded as done — for a
ClusterSummary, re-apply its content to the member. `behind` says so; the informer event of the write
wakes the key again once the cache holds it (for a kind whose controller ignores its own status
events, `caught_up` says when to wake it). Resource versions are compared for equality, and as
numbers where both are (etcd's are); an entry older than `horizon` seconds is trusted no longer.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable


class OwnWrites:
    def __init__(self, horizon: float = 10.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.horizon = horizon
        self._clock = clock
        self._written: dict[Hashable, tuple[str, float]] = {}
        self._deferred: set[Hashable] = set()  # keys a reconcile was put off for by `behind`

    def record(self, key: Hashable, resource_version: str | None) -> None:
        if resource_version:
            self._written[key] = (resource_version, self._clock())

    def behind(self, key: Hashable, cached_version: str | None) -> bool:
        """Whether the cached object predates our last write of `key`."""
        entry = self._written.get(key)
        if entry is None:
            self._deferred.discard(key)
            return False
        written, at = entry
        if (
            self._clock() - at > self.horizon
            or cached_version == written
            or later_version(cached_version, written)
        ):
            del self._written[key]
            self._deferred.discard(key)
            return False
        self._deferred.add(key)
        return True

    def caught_up(self, key: Hashable, cached_version: str | None) -> bool:
        """Whether a reconcile `behind` put off may go on now that the cache shows `cached_version`
        (once: the caller wakes the key)."""
        if key not in self._deferred:
            return False
        entry = self._written.get(key)
        if entry is not None and not (cached_version == entry[0] or later_version(cached_version, entry[0])):
            return False
        self._deferred.discard(key)
        return True


def later_version(version: str | None, than: str | None) -> bool:
    """Whether `version` is a later resourceVersion of the same object than `than`. Opaque strings by
    the API conventions; etcd's are increasing integers, and anything else is never later here."""
    if version is None or than is None or not (version.isdigit() and than.isdigit()):
        return False
    return int(version) > int(than)
