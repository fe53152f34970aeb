"""What the ClusterSummary controller of one API family remembers of its own deliveries between
passes (ADR 0102). Built with the controller (`app`) and handed to its reconcile alone; in memory
only, so a restart or another replica starts without it and does the work again.

- The credentials each summary was last delivered with: Continuous content is delivered again when
  this process has not delivered it to the cluster's present credentials (a re-registered or rebuilt
  cluster, or a controller restart; `summary.settled`).
- What each summary's inventory was last pruned down to (`manifests.prune_unless_done`): the same
  delivery again has nothing left behind to look for. Forgotten when a shard is taken over, as
  another replica may have delivered in the meantime.
- Which summaries this process began delivering, and since when it delivers alone: a summary
  created after that, which this process never delivered nor saw deleted, was delivered by nobody,
  so its first delivery has nothing left behind to search for (ADR 0121).
- The status of a revision applied whose health is pending, not written yet (`summary_pending`,
  ADR 0130).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from fleetwave.controllers.shared.first_deliveries import FirstDeliveries, wall_clock
from fleetwave.controllers.shared.keys import SummaryKey
from fleetwave.controllers.sveltos.summary_pending import PendingStatuses
from fleetwave.delivery import manifests


class SummaryMemory:
    def __init__(
        self, clock: Callable[[], datetime] = wall_clock, started: Callable[[], datetime | None] | None = None
    ) -> None:
        """`started`: when the controllers began (`FirstDeliveries`)."""
        self._delivered_with: dict[SummaryKey, str] = {}  # -> the credentials' fingerprint
        self.prunes: manifests.PruneMemo[SummaryKey] = {}
        self._firsts = FirstDeliveries[SummaryKey](clock, started or (lambda: None))
        self.pending = PendingStatuses(clock)

    def delivered(self, summary: SummaryKey, credentials: str) -> None:
        """`summary` was delivered with the credentials of fingerprint `credentials`."""
        self._delivered_with[summary] = credentials

    def delivered_with(self, summary: SummaryKey, credentials: str) -> bool:
        """Whether this process last delivered `summary` with the credentials `credentials`."""
        return self._delivered_with.get(summary) == credentials

    def first_alone(self, summary: SummaryKey, created: datetime | None) -> bool:
        """Whether nobody can have delivered `summary` before the delivery about to begin
        (`FirstDeliveries.first_alone`, with the summary's creationTimestamp)."""
        return self._firsts.first_alone(summary, created)

    def forget(self, summary: SummaryKey) -> None:
        """`summary` is gone: nothing about it is kept but that it was deleted."""
        self._delivered_with.pop(summary, None)
        self.prunes.pop(summary, None)
        self._firsts.gone(summary)
        self.pending.release(summary)

    def forget_prunes(self) -> None:
        """A shard was taken over: what was pruned no longer says nothing was left behind, and
        summaries created until now may have been delivered by the replica that held it."""
        self.prunes.clear()
        self._firsts.taken_over()
        self.pending.clear()
