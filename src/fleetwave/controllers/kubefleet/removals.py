"""The removal ledger (`status.deletions`): cluster -> when removal started, finished, and what it said.

Shared by a run's deletion stage and a RollingUpdate placement's departed clusters. Frozen values, as
in the delivery ledger; removing content is idempotent, so an entry written late is harmless.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from fleetwave.controllers.kubefleet import executor
from fleetwave.controllers.shared.context import Context
from fleetwave.core import status as st


@dataclass(frozen=True, slots=True)
class Removal:
    started_at: str
    message: str = ""
    done_at: str | None = None

    @classmethod
    def load(cls, raw: Mapping[str, Any]) -> Removal:
        done = raw.get("doneAt")
        return cls(
            str(raw.get("startedAt") or ""), str(raw.get("message") or ""), str(done) if done else None
        )

    def dump(self) -> dict[str, Any]:
        out: dict[str, Any] = {"startedAt": self.started_at, "message": self.message}
        if self.done_at:
            out["doneAt"] = self.done_at
        return out


Removals = Mapping[str, Removal]


def load(raw: Mapping[str, Any] | None) -> Removals:
    return {c: Removal.load(e) for c, e in (raw or {}).items() if isinstance(e, Mapping)}


def dump(removals: Removals) -> dict[str, dict[str, Any]]:
    return {c: r.dump() for c, r in sorted(removals.items())}


def pending(clusters: Iterable[str], removals: Removals) -> tuple[str, ...]:
    return tuple(c for c in clusters if not (c in removals and removals[c].done_at))


async def remove(
    ctx: Context,
    memory: executor.DeliveryMemory,
    clusters: Iterable[str],
    removals: Removals,
    inventory: str,
) -> Removals:
    """Remove `inventory` from `clusters`; the new entries (a failure keeps its start time, retried)."""
    todo = list(clusters)
    results = await asyncio.gather(*(executor.remove(ctx, memory, c, inventory=inventory) for c in todo))
    out: dict[str, Removal] = {}
    for cluster, result in zip(todo, results, strict=True):
        at = st.fmt(ctx.clock())
        began = removals[cluster].started_at if cluster in removals else at
        out[cluster] = Removal(began, result.message, at if result.ok else None)
    return out
