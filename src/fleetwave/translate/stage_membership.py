"""Every cluster a staged run picks must land in exactly one stage of its strategy (ADR 0112).

KubeFleet fails the run's initialization when a picked cluster matches no stage or more than one:
otherwise a run could end "succeeded" while a picked cluster was never updated, or the stage order
would silently depend on which selector is listed first. The check is pure: it sees the frozen
strategy's stages and the picked fleet, and returns the message to fail with (or "" when fine).
"""

from __future__ import annotations

from collections.abc import Mapping

from fleetwave.core import model as m
from fleetwave.core import selectors

SHOWN = 10  # names listed per problem: a fleet of thousands must not make a megabyte message


def _stages_of(stages: tuple[m.StageSpec, ...], labels: Mapping[str, str]) -> list[str]:
    return [s.name for s in stages if selectors.matches(s.selector, labels)]


def _listed(names: list[str]) -> str:
    return f"total {len(names)}, showing up to {SHOWN}: " + ", ".join(names[:SHOWN])


def problem(stages: tuple[m.StageSpec, ...], fleet: m.Fleet, shown_as: Mapping[str, str]) -> str:
    """Why this fleet cannot be split into these stages, naming the clusters and stages; "" if it can."""
    unplaced: list[str] = []
    doubled: list[str] = []
    for key, cluster in fleet.by_name.items():
        name = shown_as.get(key, key)
        matched = _stages_of(stages, cluster.labels)
        if not matched:
            unplaced.append(name)
        elif len(matched) > 1:
            doubled.append(f"`{name}` (stages {', '.join(matched)})")
    parts = []
    if doubled:
        parts.append(f"clusters appear in more than one stages, {_listed(sorted(doubled))}")
    if unplaced:
        every = ", ".join(s.name for s in stages)
        parts.append(f"some clusters are not placed in any stage ({every}), {_listed(sorted(unplaced))}")
    return "; ".join(parts)
