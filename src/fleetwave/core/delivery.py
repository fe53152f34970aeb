"""In-stage delivery: a sliding window of at most `max_in_flight` clusters, judged against the frozen plan.

A slot frees as soon as its cluster is done (Applied and ready). A failed cluster keeps its slot and
holds the stage: nothing new starts until it recovers. Members that left the fleet are skipped.
Cost is O(stage members) per step.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from fleetwave.core import effects as fx
from fleetwave.core import model as m
from fleetwave.core import status as st


@dataclass(frozen=True, slots=True)
class Progress:
    started: tuple[str, ...]
    completed: int
    complete: bool
    failed: tuple[tuple[str, str], ...]
    effects: tuple[fx.Effect, ...]
    message: str


def _scan(
    stage: st.StageStatus, fleet: m.Fleet, delivery: Mapping[str, m.Delivery], set_aside: frozenset[str]
) -> tuple[int, int, list[tuple[str, str]]]:
    """Count done (set-aside clusters count as finished) and in-flight started members; collect
    failures."""
    done = in_flight = 0
    failed: list[tuple[str, str]] = []
    for name in stage.started:
        if name not in fleet.names:
            continue
        if name in set_aside:
            done += 1
            continue
        state = delivery.get(name, m.PENDING)
        if state.done:
            done += 1
            continue
        in_flight += 1
        if state.phase is m.DeliveryPhase.FAILED:
            failed.append((name, state.message or "delivery failed"))
    return done, in_flight, failed


def _admit(stage: st.StageStatus, fleet: m.Fleet, slots: int) -> tuple[list[str], list[str]]:
    """Next members in plan order that may start now; also the not-ready ones passed over."""
    if slots <= 0:
        return [], []
    started = set(stage.started)
    admitted: list[str] = []
    not_ready: list[str] = []
    for name in stage.clusters:
        cluster = fleet.by_name.get(name)
        if name in started or cluster is None:
            continue
        if not cluster.ready:
            not_ready.append(name)
            continue
        admitted.append(name)
        if len(admitted) >= slots:
            break
    return admitted, not_ready


def advance(
    stage: st.StageStatus,
    fleet: m.Fleet,
    delivery: Mapping[str, m.Delivery],
    *,
    admit: bool = True,
    revision: str | None = None,
) -> Progress:
    """`admit=False` (a paused rollout): the started clusters go on, no new one starts. Clusters
    set aside by the failure budget count as finished and hold no slot. `revision`: the content
    hash being delivered; a cluster admitted now whose delivery the shell shows done at exactly it
    (a promotion wrote its stage profile's summaries ahead) counts as done in this step."""
    set_aside = frozenset(name for name, _ in stage.set_aside)
    done, in_flight, failed = _scan(stage, fleet, delivery, set_aside)
    slots = 0 if failed or not admit else stage.max_in_flight - in_flight
    admitted, not_ready = _admit(stage, fleet, slots)
    started = stage.started + tuple(admitted)
    if revision is not None:
        proven = sum(1 for name in admitted if delivery.get(name, m.PENDING).done_at(revision))
        done, in_flight = done + proven, in_flight - proven
    # Newly admitted clusters always get a Deliver, so none counts as done without having been
    # asked unless the shell proves it runs this revision; earlier ones are re-asked while the
    # shell still reports Pending.
    effects: list[fx.Effect] = [
        fx.Deliver(name, stage.name)
        for name in stage.started
        if name in fleet.names
        and name not in set_aside
        and delivery.get(name, m.PENDING).phase is m.DeliveryPhase.PENDING
    ]
    effects.extend(fx.Deliver(name, stage.name) for name in admitted)
    present = sum(1 for name in stage.clusters if name in fleet.names)
    complete = done == present  # done only counts started members still in the fleet
    waiting = [(n, fleet.by_name[n].why) for n in not_ready[:1]]
    message = _message(done, present, in_flight + len(admitted), failed, waiting)
    return Progress(started, done, complete, tuple(failed), tuple(effects), message)


def _message(
    done: int,
    present: int,
    in_flight: int,
    failed: list[tuple[str, str]],
    not_ready: list[tuple[str, str]],
) -> str:
    if failed:
        name, why = failed[0]
        more = f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""
        return f"cluster {name} failed{more}: {why}; stage held"
    text = f"delivering: {done}/{present} clusters done, {in_flight} in flight"
    if not_ready and in_flight == 0:
        name, why = not_ready[0]
        text += f"; waiting for cluster {name} to become ready" + (f": {why}" if why else "")
    return text
