"""What the ClusterSummary controller of one API family remembers of its own deliveries between
passes (ADR 0102). Built with the controller (`app`) and handed to its reconcile alone; in memory
only, so a restart or another replica starts without it and does the work again.

- The credentials each summary was last delivered with: Continuous content is delivered again when
  this process has not delivered it to the cluster's present credentials (a re-registered or rebuilt
  cluster, or a controller restart; `summary.settled`).
- What each summary's inventory was last pruned down to (`manifests.prune_unless_done`): the same
  delivery again has nothing left behind to look for. Forgotten when a shard is taken over, as
  another replica may have delivered in the meantime.
"""

from __future__ import annotations

from fleetwave.controllers.shared.keys import SummaryKey
from fleetwave.delivery import manifests


class SummaryMemory:
    def __init__(self) -> None:
        self._delivered_with: dict[SummaryKey, str] = {}  # -> the credentials' fingerprint
        self.prunes: manifests.PruneMemo[SummaryKey] = {}

    def delivered(self, summary: SummaryKey, credentials: str) -> None:
        """`summary` was delivered with the credentials of fingerprint `credentials`."""
        self._delivered_with[summary] = credentials

    def delivered_with(self, summary: SummaryKey, credentials: str) -> bool:
        """Whether this process last delivered `summary` with the credentials `credentials`."""
        return self._delivered_with.get(summary) == credentials

    def forget(self, summary: SummaryKey) -> None:
        """`summary` is gone: nothing about it is kept."""
        self._delivered_with.pop(summary, None)
        self.prunes.pop(summary, None)

    def forget_prunes(self) -> None:
        """A shard was taken over: what was pruned no longer says nothing was left behind."""
        self.prunes.clear()
