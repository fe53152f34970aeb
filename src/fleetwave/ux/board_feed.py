"""The live source of `fleetwave ui`'s board: informers (list, then watch; relist after any break, so
deletions are never missed) on every kind the page draws, in every group fleetwave serves it in,
with the caller's own credentials. Each change bumps `version` and wakes whoever waits for one;
nothing is polled.

A group the management cluster does not serve is left out quietly; a kind the caller may not list
becomes a `problem` the page shows ("cannot list ...: forbidden"), and the rest still works.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fleetwave.api.families import Family
from fleetwave.kube import kinds, located, ops, selectors
from fleetwave.kube.client import AsyncClient
from fleetwave.runtime import watching
from fleetwave.ux import board
from fleetwave.ux import view as v
from fleetwave.ux.changes import Changes

# The kinds drawn, each listed in every namespace when namespaced; summaries only of stage profiles.
_KINDS = ("ClusterPromotion", "ClusterSummary", "ClusterStagedUpdateRun", "StagedUpdateRun", "MemberCluster")
SYNC_TIMEOUT = 30.0


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


@dataclass(frozen=True, slots=True)
class _Watched:
    kind: str
    family: Family
    informer: watching.Informer

    def objects(self) -> list[dict[str, Any]]:
        out = []
        for obj in self.informer.store.values():
            raw = obj.to_dict() if hasattr(obj, "to_dict") else dict(obj)
            out.append({**self.family.view(self.kind, raw), "kind": self.kind})
        return out


class BoardFeed(Changes):
    """Informers over the management cluster and the board built from their stores."""

    def __init__(self, client: AsyncClient, *, server: str = "", clock: Callable[[], dt.datetime] = _now):
        self._api = client
        self._server = server
        self._clock = clock
        self._watched: list[_Watched] = []
        self._tasks: list[asyncio.Task[None]] = []
        self.problems: list[str] = []
        super().__init__()

    async def start(self) -> None:
        """Find what is served and readable, start the informers, wait (bounded) for their first list."""
        for kind in _KINDS:
            for family in located.candidates(kind):
                resource = kinds.family_resource(family, kind)
                labels = selectors.exists(v.PROFILE_LABEL) if kind == "ClusterSummary" else None
                if not await self._readable(kind, family, resource, labels):
                    continue
                informer = watching.Informer(self._api, resource, labels=labels)
                informer.on_change(self._on_change)
                self._watched.append(_Watched(kind, family, informer))
                self._tasks.append(asyncio.create_task(informer.run()))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(watching.wait_synced([w.informer for w in self._watched]), SYNC_TIMEOUT)
        self._on_change("MODIFIED", None)

    async def _readable(self, kind: str, family: Family, resource: Any, labels: Any) -> bool:
        served = family.served(kind)
        namespace = ops.ALL_NAMESPACES if served.namespaced else None
        try:
            async for _ in self._api.list(resource, namespace=namespace, labels=labels, chunk_size=1):
                break
        except ops.StatusError as e:
            if ops.is_not_found(e):  # the group is not served here: nothing of it to show
                return False
            if ops.code_of(e) == 403:
                what = f"{served.plural}.{served.group}"
                self.problems.append(f"cannot list {what}: forbidden for your user (list and watch needed)")
                return False
            # Anything else passes (a new CRD's storage answers 429 for a moment): the informer
            # lists again with backoff until it is served.
        return True

    def _on_change(self, _kind: str, _obj: Any) -> None:
        self.bump()

    def _of(self, kind: str) -> list[dict[str, Any]]:
        return [o for w in self._watched if w.kind == kind for o in w.objects()]

    def board(self) -> dict[str, Any]:
        return board.build(
            self._of("ClusterPromotion"),
            self._of("ClusterSummary"),
            self._of("ClusterStagedUpdateRun") + self._of("StagedUpdateRun"),
            self._of("MemberCluster"),
            self._clock(),
            server=self._server,
            problems=self.problems,
        )

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
