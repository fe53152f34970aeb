"""What is derived from one version of a cached object, derived once.

A resourceVersion names an object's whole content, so anything computed from the object alone (and
a few other inputs, part of the key) holds for as long as that version is the cached one. Rollout
passes read every ClusterSummary of their stages at every pass: at 1,000 clusters re-deriving the
same facts from unchanged summaries was a tenth of the controller's time.

An object holds one entry (per extra input), replaced when its version changes: the memo holds what
is live, not every version seen. Keyed by version, each status update of a summary added an entry,
and a memo full of old versions was cleared and rebuilt over and over; once the live objects alone
outnumber its size, every read misses (`bench/bench_versioned_memo.py`). The size is a bound for
entries of deleted objects, which stay until it is reached: set it well above the live objects.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from typing import Any, Generic, TypeVar

T = TypeVar("T")

# For what is derived per ClusterSummary: above the 100,000 summaries the scale benchmarks reach,
# with room for those deleted since the last start-over (an entry is ~200 bytes besides its value).
PER_SUMMARY = 1 << 18


class VersionedMemo(Generic[T]):
    def __init__(self, size: int) -> None:
        self._size = size
        self._values: dict[tuple[Any, ...], tuple[str, T]] = {}

    def get(self, obj: Mapping[str, Any], extra: Hashable, derive: Callable[[Mapping[str, Any]], T]) -> T:
        """`derive(obj)` for `obj` as of its resourceVersion (and `extra`); an object without one (not
        from the API) is derived every time. Full, the memo starts over: deleted objects go with it."""
        meta = obj.get("metadata") or {}
        version = str(meta.get("resourceVersion") or "")
        if not version:
            return derive(obj)
        key = (meta.get("namespace"), meta.get("name"), meta.get("uid"), extra)
        found = self._values.get(key)
        if found is not None and found[0] == version:
            return found[1]
        if found is None and len(self._values) >= self._size:
            self._values.clear()
        value = derive(obj)
        self._values[key] = (version, value)
        return value

    def __len__(self) -> int:
        return len(self._values)
