"""The deletion stage of a run: once every stage succeeded, clusters that held the placement's content
but are no longer picked lose it. Which clusters is decided purely from the record; removing is I/O.
"""

from __future__ import annotations

from dataclasses import replace

from fleetwave.controllers.kubefleet import removals as rm
from fleetwave.controllers.kubefleet.executor import DeliveryMemory
from fleetwave.controllers.kubefleet.run_record import RunRecord
from fleetwave.controllers.shared.context import Context
from fleetwave.core import status as st


def todo(record: RunRecord) -> tuple[str, ...]:
    """Clusters still to clear: none until the rollout succeeded, then those not cleared yet."""
    if record.rollout.phase is not st.RolloutPhase.SUCCEEDED:
        return ()
    return rm.pending(record.deletion_clusters, record.deletions)


async def run(
    ctx: Context, memory: DeliveryMemory, record: RunRecord, clusters: tuple[str, ...], inventory: str
) -> RunRecord:
    if not clusters:
        return record
    done = await rm.remove(ctx, memory, clusters, record.deletions, inventory)
    return replace(record, deletions={**record.deletions, **done})
