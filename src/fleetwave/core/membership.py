"""Fleet changes after the plan was frozen: departed members and late joiners.

The frozen plan is never reshuffled. A member that leaves is reported and no longer awaited. A
cluster that joins is reported and, once the stage it matches has succeeded (so the revision has
passed that stage's gates), is delivered under the same in-flight limit; it never holds a stage.
Set differences keep this O(fleet) in C, and O(joiners) in Python.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from fleetwave.core import batching
from fleetwave.core import effects as fx
from fleetwave.core import model as m
from fleetwave.core import status as st


def track(
    status: st.RolloutStatus, spec: m.RolloutSpec, fleet: m.Fleet, effects: list[fx.Effect]
) -> st.RolloutStatus:
    departed = tuple(sorted(status.members - fleet.names))
    for name in sorted(set(departed) - set(status.departed)):
        effects.append(
            fx.Event("ClusterLeft", f"cluster {name} left the fleet during the rollout; not awaited")
        )
    known = dict(status.late_joiners)
    joiners = []
    for name in sorted(fleet.names - status.members):
        index = known.get(name)
        if index is None:
            index = batching.stage_index_for(spec.stages, fleet.by_name[name].labels)
            # One that matches no stage concerns this rollout in no way: said nothing about (a stage
            # profile of a promotion re-plans at every batch, and most of the fleet matches none).
            if index >= 0:
                where = f"stage {spec.stages[index].name}"
                effects.append(
                    fx.Event(
                        "ClusterJoined", f"cluster {name} joined after the plan was frozen (matches {where})"
                    )
                )
        joiners.append((name, index))
    late_started = tuple(n for n in status.late_started if n in fleet.names)
    return replace(status, departed=departed, late_joiners=tuple(joiners), late_started=late_started)


def _eligible(status: st.RolloutStatus, index: int) -> bool:
    return index >= 0 and status.stages[index].phase is st.StagePhase.SUCCEEDED


def deliver_late(
    status: st.RolloutStatus, fleet: m.Fleet, delivery: Mapping[str, m.Delivery], effects: list[fx.Effect]
) -> st.RolloutStatus:
    if not status.late_joiners:
        return status
    stage_of = dict(status.late_joiners)
    started = list(status.late_started)
    in_flight: dict[int, int] = {}
    for name in started:
        if not delivery.get(name, m.PENDING).done:
            in_flight[stage_of[name]] = in_flight.get(stage_of[name], 0) + 1
    for name, index in status.late_joiners:
        if name in status.late_started or not _eligible(status, index) or not fleet.by_name[name].ready:
            continue
        if in_flight.get(index, 0) < max(status.stages[index].max_in_flight, 1):
            in_flight[index] = in_flight.get(index, 0) + 1
            started.append(name)
    for name in started:
        if delivery.get(name, m.PENDING).phase is m.DeliveryPhase.PENDING:
            effects.append(fx.Deliver(name, status.stages[stage_of[name]].name))
    return replace(status, late_started=tuple(started))


def late_in_flight(status: st.RolloutStatus, fleet: m.Fleet, delivery: Mapping[str, m.Delivery]) -> bool:
    """True while some eligible late joiner is not done yet (so the shell should keep polling)."""
    started = set(status.late_started)
    for name, index in status.late_joiners:
        if _eligible(status, index) and (name not in started or not delivery.get(name, m.PENDING).done):
            return True
    return False
