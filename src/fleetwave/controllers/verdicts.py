"""Summary statuses decided and being written, for the rollouts that wait on them (ADR 0068, stop 38).

A summary's pass delivers, judges, and then writes its status; a promotion waiting for its stage
used to learn of the verdict from that write's event, one management round trip later at every stage
boundary. The pass records here the status it is about to write, against the resourceVersion it
decided from, and wakes the rollouts reading the summary: they read the summary with that status for
as long as the cache still holds the version it was decided from. Once the cache moves on (the write
landed, or someone else wrote) the cache is the truth again. What is recorded is a fact about the
member (delivered, judged ready), true whether the write lands or not; a crash loses it, and the
summary's next pass decides it again.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from fleetwave.kube import status as kstatus

HORIZON_SECONDS = 10.0  # a write not seen by then is not waited for: the summary decides again


class Verdicts:
    def __init__(self, horizon: float = HORIZON_SECONDS, clock: Callable[[], float] = time.monotonic) -> None:
        self.horizon = horizon
        self._clock = clock
        self._decided: dict[tuple[str, str], tuple[str, Mapping[str, Any], float]] = {}
        self._swept_at = clock()
        # Called with the summary (as cached) whose verdict was recorded: wakes the rollouts reading it.
        self.readers: list[Callable[[Any], None]] = []

    def record(self, summary: Any, status: Mapping[str, Any]) -> None:
        """`summary` (the cached object its pass decided from) is about to be written with `status`."""
        meta = summary.metadata
        if not meta.resourceVersion:
            return
        now = self._clock()
        self._sweep(now)
        self._decided[(str(meta.namespace), str(meta.name))] = (meta.resourceVersion, status, now)
        for read in self.readers:
            read(summary)

    def overlay(self, summary: Mapping[str, Any]) -> Mapping[str, Any]:
        """`summary` as its pass decided it, while the cache holds the version the decision was
        made from (without its resourceVersion: no memo keyed by versions takes it for that one)."""
        meta = summary.get("metadata") or {}
        key = (str(meta.get("namespace")), str(meta.get("name")))
        entry = self._decided.get(key)
        if entry is None:
            return summary
        version, status, at = entry
        if meta.get("resourceVersion") != version or self._clock() - at > self.horizon:
            del self._decided[key]
            return summary
        kept = {k: v for k, v in meta.items() if k != "resourceVersion"}
        return {**summary, "metadata": kept, "status": status}

    def told(self, summary: Any) -> bool:
        """Whether the event of `summary` brings the status its readers were woken for already (the
        write landed as decided): their wake-up came with the verdict. Once: the entry goes."""
        meta = summary.metadata
        key = (str(meta.namespace), str(meta.name))
        entry = self._decided.get(key)
        if entry is None:
            return False
        del self._decided[key]
        status = getattr(summary, "status", None)
        return isinstance(status, Mapping) and kstatus.normalized(status) == kstatus.normalized(entry[1])

    def _sweep(self, now: float) -> None:
        """Entries nobody read again once their write landed go after `horizon`."""
        if now - self._swept_at < self.horizon:
            return
        self._swept_at = now
        for key in [k for k, (_, _, at) in self._decided.items() if now - at > self.horizon]:
            del self._decided[key]

    def __len__(self) -> int:
        return len(self._decided)


__all__ = ["HORIZON_SECONDS", "Verdicts"]
