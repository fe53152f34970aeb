"""GC pause recording: each collection is observed under its generation, only while installed."""

from __future__ import annotations

import gc

from fleetwave.runtime.gc_pauses import GcPauses


class _Histogram:
    def __init__(self) -> None:
        self.seen: list[tuple[str, float]] = []

    def labels(self, generation: str) -> _Histogram.Child:
        return _Histogram.Child(self, generation)

    class Child:
        def __init__(self, parent: _Histogram, generation: str) -> None:
            self.parent, self.generation = parent, generation

        def observe(self, amount: float) -> None:
            self.parent.seen.append((self.generation, amount))


def test_a_full_collection_is_recorded_under_generation_2_and_nothing_after_removal() -> None:
    histogram = _Histogram()
    with GcPauses(histogram):
        gc.collect(2)
        assert ("2", histogram.seen[-1][1]) == histogram.seen[-1]
        assert histogram.seen[-1][1] >= 0.0
    seen = len(histogram.seen)
    gc.collect(2)
    assert len(histogram.seen) == seen
