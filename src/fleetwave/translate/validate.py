"""Checks of a translated rollout against a fleet, as values with field paths (used by `plan`)."""

from __future__ import annotations

from collections.abc import Sequence

from fleetwave.core import model as m
from fleetwave.core import selectors
from fleetwave.translate.common import describe_selector
from fleetwave.translate.errors import Problem


def selector_problems(spec: m.RolloutSpec, fleet: m.Fleet, paths: Sequence[str]) -> list[Problem]:
    """A stage whose selector matches no cluster of the fleet is almost always a typo."""
    problems = []
    for stage, path in zip(spec.stages, paths, strict=True):
        if stage.selector is None:
            problems.append(Problem(path, f"is empty and matches no cluster (stage {stage.name})"))
        elif not any(selectors.matches(stage.selector, c.labels) for c in fleet.by_name.values()):
            what = describe_selector(stage.selector)
            problems.append(Problem(path, f"matches no cluster (stage {stage.name}: {what})"))
    return problems
