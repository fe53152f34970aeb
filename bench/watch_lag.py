"""How far one watch stream of the management API server runs behind another, from what a client
receives: every event carries the resourceVersion (the etcd revision) of the write it reports, and
a stream whose writes are frequent (the promotions') shows when the server had reached a revision.

An event of the followed stream (the stage profiles') at revision r, received at t, is late by
t minus when the reference stream first delivered an event at r or later. Both streams reach the
same client, so the lag is the server's (its watch cache of that resource falling behind) or the
client's reading of that one stream, never the time the write itself took.

    .venv/bin/python bench/watch_lag.py RAW_FILE [CONTROLLER_LOG]

RAW_FILE is what `bench_scale.py --watch-lag-file` wrote (the benchmark's own streams);
CONTROLLER_LOG is `controller.log` of a run with `bench/passes_logged.py` and `--keep-logs` (the
controller's informers). Each is printed per 10 s of the batch: events, p50 and p99 lag (ms).
"""

from __future__ import annotations

import argparse
import bisect
import datetime as dt
import json
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

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


WINDOW = 10.0  # seconds per line of the report

_INFORMER = re.compile(r"^(\S+ \S+) DEBUG fleetwave\.bench\.passes: informer event (\S+) (\S+) (\d+)$")


def read_controller_log(path: Path) -> tuple[list[Seen], list[Seen]]:
    """(promotion events, profile events) the controller's informers received, from its log."""
    promotions: list[Seen] = []
    profiles: list[Seen] = []
    for line in path.read_text().splitlines():
        found = _INFORMER.match(line)
        if found is None:
            continue
        stamp, kind, _name, revision = found.groups()
        at = dt.datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").replace(tzinfo=dt.UTC).timestamp()
        (promotions if kind == "ClusterPromotion" else profiles).append((at, int(revision)))
    return promotions, profiles


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def report(what: str, reference: Sequence[Seen], followed: Iterable[Seen], since: float) -> None:
    reached = first_reached(reference)
    windows: dict[int, list[float]] = {}
    for event in followed:
        late = lag(reached, event)
        if late is not None and event[0] >= since:
            windows.setdefault(int((event[0] - since) // WINDOW), []).append(late)
    print(f"{what}: the profiles' stream behind the promotions' (window start s: events, p50 / p99 ms)")
    for index, lags in sorted(windows.items()):
        p50, p99 = _quantile(lags, 0.5) * 1000, _quantile(lags, 0.99) * 1000
        print(f"  {index * WINDOW:5.0f}: {len(lags):5d}, {p50:7.0f} / {p99:7.0f}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("raw", type=Path)
    parser.add_argument("controller_log", type=Path, nargs="?")
    args = parser.parse_args()
    raw = json.loads(args.raw.read_text())
    promotions = [(float(t), int(rv)) for t, rv in raw["promotions"]]
    profiles = [(float(t), int(rv)) for t, rv, _ in raw["profiles"]]
    since = min(t for t, _ in promotions + profiles)
    report("the benchmark's watches", promotions, profiles, since)
    if args.controller_log is not None:
        theirs = read_controller_log(args.controller_log)
        report("the controller's informers", *theirs, since)


if __name__ == "__main__":
    main()
