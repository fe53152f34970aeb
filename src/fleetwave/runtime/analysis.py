"""Analysis gates' measurement series, kept in the controller's memory (ADR 0081).

Keyed by rollout, revision, stage, analysis and cluster; a new revision starts new series. A restart
or a new leader starts every series again (conservative: an analysis is never passed on
measurements nobody can show). At most MAX_SERIES are kept; the oldest go first.
"""

from __future__ import annotations

from fleetwave.core import model as m

MAX_SERIES = 4096

Key = tuple[str, ...]


class Series:
    def __init__(self, limit: int = MAX_SERIES) -> None:
        self._limit = limit
        self._series: dict[Key, m.Measurements] = {}

    def get(self, key: Key) -> m.Measurements | None:
        return self._series.get(key)

    def put(self, key: Key, value: m.Measurements) -> None:
        self._series.pop(key, None)
        self._series[key] = value
        while len(self._series) > self._limit:
            del self._series[next(iter(self._series))]
