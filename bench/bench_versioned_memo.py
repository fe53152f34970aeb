"""How often a rollout pass finds a summary's facts already derived, at 51,000 and 101,000 summaries.

    .venv/bin/python bench/bench_versioned_memo.py [--sizes 51000,101000] [--rounds 3]

Rollout passes derive facts from every ClusterSummary of their stages (`rollout_facts.delivery_of`,
`rollout_common.summaries_of`), memoised per resourceVersion (`controllers/shared/versioned_memo.py`).
This replays the shape of N rollouts over 1,000 clusters: per round, every run's pass reads its
1,000 summaries, and one summary in ten has a new version since the last round (a status update).
It runs the memo as shipped beside the policy it replaced (an entry per version, the whole memo
cleared at 65,536 entries), and prints each one's hit rate and time per read, side by side.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Hashable, Mapping
from typing import Any

from fleetwave.controllers.shared.versioned_memo import PER_SUMMARY, VersionedMemo

CLUSTERS_PER_RUN = 1_000
UPDATED_PER_ROUND = 10  # one summary in ten has a new version each round


class VersionKeyedMemo:
    """The former policy, for comparison: an entry per version, cleared whole at `size`."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._values: dict[tuple[Any, ...], Any] = {}

    def get(self, obj: Mapping[str, Any], extra: Hashable, derive: Callable[[Mapping[str, Any]], Any]) -> Any:
        meta = obj["metadata"]
        key = (meta["namespace"], meta["name"], meta["uid"], meta["resourceVersion"], extra)
        found = self._values.get(key)
        if found is None:
            if len(self._values) >= self._size:
                self._values.clear()
            found = self._values[key] = derive(obj)
        return found


def _summary(i: int, version: int) -> dict[str, Any]:
    conditions = [{"type": t, "status": "True", "reason": "Applied"} for t in ("Applied", "Healthy", "Ready")]
    return {
        "metadata": {
            "namespace": "fleet",
            "name": f"s-{i}",
            "uid": f"u-{i}",
            "resourceVersion": f"{version}",
        },
        "status": {"observedContentHash": "h", "conditions": conditions},
    }


def _derive(summary: Mapping[str, Any]) -> str:
    """What a delivery read does: find a condition, compare the content hash."""
    ready = next((c for c in summary["status"]["conditions"] if c["type"] == "Ready"), None)
    return "done" if ready and summary["status"]["observedContentHash"] == "h" else "applying"


def replay(memo: Any, summaries: int, rounds: int) -> tuple[float, float]:
    """(hit rate, microseconds per read) over `rounds` rounds of every run's pass."""
    fleet = [_summary(i, 1) for i in range(summaries)]
    derived = [0]

    def counted(obj: Mapping[str, Any]) -> str:
        derived[0] += 1
        return _derive(obj)

    reads, started = 0, time.perf_counter()
    for round_ in range(rounds):
        for i in range(round_ % UPDATED_PER_ROUND, summaries, UPDATED_PER_ROUND):
            fleet[i] = _summary(i, round_ + 2)
        for first in range(0, summaries, CLUSTERS_PER_RUN):  # each run's pass, in turn
            for summary in fleet[first : first + CLUSTERS_PER_RUN]:
                memo.get(summary, "h", counted)
                reads += 1
    took = time.perf_counter() - started
    return 1 - derived[0] / reads, took / reads * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="51000,101000")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print("summaries  policy                         hit rate  us/read")
    for size in (int(s) for s in args.sizes.split(",")):
        for label, memo in (
            ("per version, cleared at 65,536", VersionKeyedMemo(65_536)),
            (f"per object (shipped, {PER_SUMMARY:,})", VersionedMemo[str](PER_SUMMARY)),
        ):
            hits, per_read = replay(memo, size, args.rounds)
            print(f"{size:>9,}  {label:<30} {hits:8.1%} {per_read:8.2f}")


if __name__ == "__main__":
    main()
