"""Fleet changes after the plan was frozen: departed members and late joiners.

The frozen plan is never reshuffled. A member that leaves is reported and no longer awaited. A
cluster that joins is reported and, once the stage it matches has succeeded (so the revision has
passed that stage's gates), is delivered under the same in-flight limit; it never holds a stage.
A cluster outside the plan that matches no stage is not recorded (ADR 0144). Set differences keep
this O(fleet) in C, and O(joiners) in Python once the rollout's stages have been matched against
its fleet.
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
    known = {name: index for name, index in status.late_joiners if index >= 0}
    # Only a cluster that matches a stage concerns this rollout (a stage profile of a promotion
    # re-plans at every batch, and most of the fleet matches none): the others are neither said nor
    # kept, so the record does not grow with the fleet (ADR 0144). One that comes to match a stage
    # later joins then.
    outside = ((fleet.names & _staged(spec, fleet)) | (known.keys() & fleet.names)) - status.members
    joiners = []
    for name in sorted(outside):
        index = known.get(name)
        if index is None:
            index = batching.stage_index_for(spec.stages, fleet.by_name[name].labels)
            where = f"stage {spec.stages[index].name}"
            message = f"cluster {name} joined after the plan was frozen (matches {where})"
            effects.append(fx.Event("ClusterJoined", message))
        joiners.append((name, index))
    late_started = tuple(n for n in status.late_started if n in fleet.names)
    return replace(status, departed=departed, late_joiners=tuple(joiners), late_started=late_started)


def _staged(spec: m.RolloutSpec, fleet: m.Fleet) -> frozenset[str]:
    """The clusters of `fleet` some stage of `spec` matches. Memoised per rollout for as long as its
    fleet (the object: the shell rebuilds it only when a member changed) and its stages stay, so a
    pass is not a match of every cluster outside the plan."""
    found = _STAGED.get(spec.name)
    if found is not None and found[0] is fleet and found[1] == spec.stages:
        return found[2]
    if len(_STAGED) >= _STAGED_MOST:
        _STAGED.clear()
    staged = frozenset(
        name for name, c in fleet.by_name.items() if batching.stage_index_for(spec.stages, c.labels) >= 0
    )
    _STAGED[spec.name] = (fleet, spec.stages, staged)
    return staged


# One entry per rollout name: its fleet, its stages and the clusters they match.
_STAGED: dict[str, tuple[m.Fleet, tuple[m.StageSpec, ...], frozenset[str]]] = {}
_STAGED_MOST = 4096


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
