"""Which deliveries nobody can have made before (ADR 0121).

A delivery searches the member for what earlier deliveries under the same inventory left behind,
because a process may have applied objects and died before recording them. That search lists every
kind the content may hold across all namespaces. A summary or placement created after this process
began delivering alone, that this process has not delivered nor seen deleted, was delivered by
nobody: its first delivery has nothing to search for.

"Alone since" is when this process's controllers began (`Manager.controllers_started`: they run
only once it leads, or contends for shards) and moves to the moment of every shard takeover: the
replica that held the shard may have delivered anything created until then.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from datetime import UTC, datetime, timedelta
from typing import Generic, TypeVar

# How much later than "alone since" an object must have been created for its first delivery to skip
# the search: the API server's clock may run ahead of ours. creationTimestamp is truncated to whole
# seconds, which only errs towards searching.
ALONE_MARGIN = timedelta(seconds=5)
# Deletions remembered (a name created again may find what the old one left on a cluster that could
# not be reached when it went); past this many they are dropped and "alone since" moves to now.
MAX_GONE = 100_000

K = TypeVar("K", bound=Hashable)


def wall_clock() -> datetime:
    """Wall time, not the controller's clock: it is compared with the API server's timestamps."""
    return datetime.now(UTC)


def _unknown() -> datetime | None:
    return None


class FirstDeliveries(Generic[K]):
    """`started`: when this process's controllers began (None: not known, and the first delivery's
    time stands in, later and so safe)."""

    def __init__(
        self, clock: Callable[[], datetime] = wall_clock, started: Callable[[], datetime | None] = _unknown
    ) -> None:
        self._clock, self._started = clock, started
        self._alone_since: datetime | None = None  # set by the first delivery, moved by a takeover
        self._begun: set[K] = set()
        self._gone: set[K] = set()

    def first_alone(self, key: K, created: datetime | None) -> bool:
        """Whether nobody can have delivered under `key` before the delivery about to begin: its
        owner was created well after this process began delivering alone, and this process neither
        began delivering it before nor saw it removed. Marks the delivery begun either way (before
        its apply: an apply that fails half-way has still left objects behind)."""
        if self._alone_since is None:
            self._alone_since = self._started() or self._clock()
        first = key not in self._begun and key not in self._gone
        self._begun.add(key)
        return first and created is not None and created >= self._alone_since + ALONE_MARGIN

    def gone(self, key: K) -> None:
        """What was delivered under `key` was removed, or its owner deleted."""
        self._begun.discard(key)
        self._gone.add(key)
        if len(self._gone) > MAX_GONE:
            self._gone.clear()
            self._alone_since = self._clock()

    def taken_over(self) -> None:
        """A shard was taken over: anything created until now may have been delivered by another."""
        self._begun.clear()
        self._alone_since = self._clock()
