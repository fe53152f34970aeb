"""Pauses of Python's cyclic garbage collector, which stop the one event loop while they run: a full
collection walks every tracked object (the informer caches of a large fleet are millions of them)."""

from __future__ import annotations

import gc
import time
from typing import Any, Protocol


class _Labelled(Protocol):
    def labels(self, *values: str) -> Any: ...


class GcPauses:
    """Records each collection's duration by generation while installed."""

    def __init__(self, pauses: _Labelled) -> None:
        self._pauses = pauses
        self._started = 0.0

    def __enter__(self) -> GcPauses:
        gc.callbacks.append(self._on)
        return self

    def __exit__(self, *_: object) -> None:
        if self._on in gc.callbacks:
            gc.callbacks.remove(self._on)

    def _on(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self._pauses.labels(str(info.get("generation", "?"))).observe(time.perf_counter() - self._started)
