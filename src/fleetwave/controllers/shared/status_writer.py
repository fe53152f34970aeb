"""The one writer of rollout objects' status (ADR 0101): every promotion, profile, summary, staged
run and rolling placement status this process writes goes through `StatusWriter.write`.

A write is guarded by the resourceVersion the pass started from (a conflict means someone wrote
newer state: the caller decides again from it). A write this process made is remembered twice:
as its own (`behind`: a reconcile woken before the cache shows it waits for it, ADR 0068) and by
when (`progress_due_in`: a status that only reports progress is held back for PROGRESS_EVERY
seconds after the last write, since each write wakes the rollout and whoever follows it).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from fleetwave.controllers.shared.own_writes import OwnWrites
from fleetwave.kube.client import AsyncClient
from fleetwave.kube.status import StatusWrite, Versioned, write_versioned

# Seconds between writes of a waiting judgement's changing message (ADR 0068): each status write
# wakes the rollout and whoever follows it again.
PROGRESS_EVERY = 5.0


class Whose(NamedTuple):
    """The object a status belongs to: its native kind and its key ("namespace/name", or the name
    of a cluster-scoped object). One key shape for every kind."""

    kind: str
    key: str

    @classmethod
    def of(cls, kind: str, namespace: str | None, name: str) -> Whose:
        return cls(kind, f"{namespace}/{name}" if namespace else name)


class StatusWriter:
    def __init__(self, clock: Callable[[], float] = time.monotonic, own: OwnWrites | None = None) -> None:
        self._clock = clock
        self.own = own if own is not None else OwnWrites(clock=clock)
        self._written_at: dict[Whose, float] = {}

    async def write(
        self,
        client: AsyncClient,
        resource: type[Any],
        whose: Whose,
        current: Versioned,
        body: Mapping[str, Any],
    ) -> tuple[StatusWrite, Versioned]:
        """Write `body` over `current` (the version the pass decided from); the version written."""
        written, after = await write_versioned(client, resource, current, body)
        if written is StatusWrite.WRITTEN:
            self.own.record(whose, after.resource_version)
            self._written_at[whose] = self._clock()
        return written, after

    def behind(self, whose: Whose, cached_version: str | None) -> bool:
        """Whether the cached object predates this process's last status write of it."""
        return self.own.behind(whose, cached_version)

    def caught_up(self, whose: Whose, cached_version: str | None) -> bool:
        """Whether a reconcile `behind` put off may go on now (once: the caller wakes the key)."""
        return self.own.caught_up(whose, cached_version)

    def progress_due_in(self, whose: Whose) -> float | None:
        """Seconds until a progress-only status change is due; None: due now (not written by this
        process within PROGRESS_EVERY seconds, e.g. after a restart)."""
        last = self._written_at.get(whose)
        left = PROGRESS_EVERY - (self._clock() - last) if last is not None else 0.0
        return left if left > 0 else None

    def forget(self, whose: Whose) -> None:
        """The object is gone: nothing of its writes is held any longer."""
        self._written_at.pop(whose, None)
