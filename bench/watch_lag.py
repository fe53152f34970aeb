"""How far one watch stream of the management API server runs behind another, from what a client
receives: every event carries the resourceVersion (the etcd revision) of the write it reports, and
a stream whose writes are frequent (the promotions') shows when the server had reached a revision.

An event of the followed stream (the stage profiles') at revision r, received at t, is late by
t minus when the reference stream first delivered an event at r or later. Both streams reach the
same client, so the lag is the server's (its watch cache of that resource falling behind) or the
client's reading of that one stream, never the time the write itself took.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

# (receive time, resourceVersion as an integer) of one event.
Seen = tuple[float, int]


def first_reached(reference: Sequence[Seen]) -> tuple[list[int], list[float]]:
    """The reference stream as (revisions, when first reached), both ascending: a stream delivers
    its events in revision order, so each revision above all before it marks a new moment."""
    revisions: list[int] = []
    times: list[float] = []
    for at, revision in sorted(reference):
        if not revisions or revision > revisions[-1]:
            revisions.append(revision)
            times.append(at)
    return revisions, times


def lag(reached: tuple[list[int], list[float]], event: Seen) -> float | None:
    """Seconds `event` came after the reference stream first showed its revision (0 when it came
    first); None when the reference never reached it."""
    revisions, times = reached
    at, revision = event
    index = bisect.bisect_left(revisions, revision)
    if index == len(revisions):
        return None
    return max(0.0, at - times[index])
