"""A revision just applied whose health is still pending keeps its status unwritten for a few seconds
(ADR 0130).

Right after an apply, a Deployment is rarely Available yet: the summary used to write "applied,
waiting for health" and, a few tens of milliseconds later, "deployed and healthy". Only the second
is news to anyone (a promotion waits for it); the first was a third management write per cluster
and revision, where the shape needs two. So the first is kept in this process's memory instead,
for up to `UNWRITTEN_FOR` seconds:
- the next pass of the summary (woken by the member's watch, or the poll) reads it in place of the
  stored status, so it judges health only and does not apply again;
- a verdict (healthy, failed, unreachable) is written at once, over the stored status;
- a revision still unhealthy after `UNWRITTEN_FOR` is written as before.

What is kept is valid only for the summary's version it was decided from: any other write of the
summary (a new revision, a spec edit, another writer's status) drops it, and the summary is
delivered again (applies are idempotent). A restart or another replica loses it the same way: the
stored status says the older revision, so the content is applied again. Nothing a decision of
another object reads is held: a promotion moves on a delivery's end, not on its start.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from fleetwave.controllers.shared.keys import SummaryKey
from fleetwave.controllers.shared.status_writer import PROGRESS_EVERY

# As long as a waiting judgement's changing message is held back (ADR 0068): a delivery whose
# health is pending is progress; its verdict is not.
UNWRITTEN_FOR = PROGRESS_EVERY


@dataclass(frozen=True)
class _Held:
    version: str  # the summary's resourceVersion the status was decided from
    content_hash: str
    status: Mapping[str, Any]
    since: datetime


class PendingStatuses:
    """Per summary, the status of a revision applied and not yet healthy, not written yet."""

    def __init__(self, clock: Callable[[], datetime]) -> None:
        self._clock = clock
        self._held: dict[SummaryKey, _Held] = {}

    def status_of(
        self, key: SummaryKey, raw: Mapping[str, Any], content_hash: str
    ) -> Mapping[str, Any] | None:
        """The unwritten status of `raw` at `content_hash`, if one is kept for this very version."""
        held = self._held.get(key)
        if held is None:
            return None
        if held.version != _version(raw) or held.content_hash != content_hash:
            del self._held[key]  # the summary changed since: what was kept says nothing of it
            return None
        return held.status

    def hold(
        self, key: SummaryKey, raw: Mapping[str, Any], content_hash: str, status: Mapping[str, Any]
    ) -> float:
        """Keep `status` unwritten; seconds it may stay so (0: write it now)."""
        now = self._clock()
        held = self._held.get(key)
        since = held.since if held is not None and held.version == _version(raw) else now
        left = UNWRITTEN_FOR - (now - since).total_seconds()
        if left <= 0:
            self._held.pop(key, None)
            return 0.0
        self._held[key] = _Held(_version(raw), content_hash, status, since)
        return left

    def release(self, key: SummaryKey) -> None:
        """The summary's status was written (or it is gone): nothing is kept for it."""
        self._held.pop(key, None)

    def clear(self) -> None:
        self._held.clear()

    def __len__(self) -> int:
        return len(self._held)


def _version(raw: Mapping[str, Any]) -> str:
    return str((raw.get("metadata") or {}).get("resourceVersion") or "")
