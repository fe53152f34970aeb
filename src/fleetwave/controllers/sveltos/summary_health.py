"""validateHealths attributed to features (`featureID`, ADR 0113).

Sveltos runs a check after the feature its `featureID` names (Resources, Helm, Kustomize) is
deployed, and a failing check fails that feature: its featureSummary says `Failed` with a message
naming the check. fleetwave judges in this order, stopping at the first failure (a later check's
verdict would be stale by the time the first is fixed):

1. the delivered objects' readiness and the checks without a featureID (after every feature);
2. then, for each feature the delivery deployed, in Resources, Kustomize, Helm order, its checks.

A check whose feature has no content in the profile never runs, as upstream. A health failure
does not make the delivery fail: the summary's Ready condition stays `Unhealthy` (judged again on
member watches, nothing re-applied, a promotion's grace applies), and only the attributed
featureSummary turns `Failed`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fleetwave.api.sveltos import ValidateHealth
from fleetwave.controllers.shared.context import Context, HealthOutcome, Wake
from fleetwave.controllers.sveltos import summary_status as ss
from fleetwave.delivery.target import MemberTarget

ORDER = (ss.FEATURE_RESOURCES, ss.FEATURE_KUSTOMIZE, ss.FEATURE_HELM)
ObjectId = tuple[str, str, str | None, str]


@dataclass(frozen=True, slots=True)
class Step:
    """One judgement: `feature` is "" for readiness and the checks after every feature."""

    feature: str
    checks: tuple[ValidateHealth, ...]


@dataclass(frozen=True, slots=True)
class Verdict:
    ok: bool
    message: str
    feature: str = ""  # the feature a failing check is attributed to ("" when none)


def plan(checks: Sequence[ValidateHealth] | None, deployed: Iterable[str]) -> tuple[Step, ...]:
    """The judgements to make, in order, for `checks` after a delivery that deployed the features
    `deployed`. The first step always runs (it judges the objects' readiness too)."""
    listed, present = list(checks or ()), set(deployed)
    steps = [Step("", tuple(c for c in listed if c.feature_id is None))]
    for feature in ORDER:
        mine = tuple(c for c in listed if c.feature_id == feature)
        if mine and feature in present:
            steps.append(Step(feature, mine))
    return tuple(steps)


def failure_message(feature: str, message: str) -> str:
    """What a feature's failing check says: the feature, then the check's own message (which names
    the check)."""
    return f"feature {feature}: {message}"


async def judge(
    ctx: Context,
    target: MemberTarget,
    checks: Sequence[ValidateHealth] | None,
    features: Iterable[ss.Feature],
    *,
    objects: Sequence[ObjectId],
    wake: Wake | None,
    seen: Mapping[ObjectId, Mapping[str, Any]] | None = None,
    delivered: bool = False,
    owner: str = "",
) -> Verdict:
    """Judge the summary's health step by step (see `plan`) after a delivery that reported
    `features`; the first failure ends it. A profile
    without featureIDs makes exactly one judgement, as before featureIDs were honoured."""
    outcome = HealthOutcome(True, "")
    passed: list[str] = []
    for step in plan(checks, deployed_features(features)):
        first = step.feature == ""
        outcome = await ctx.health.check(
            target,
            step.checks,
            objects=objects if first else (),
            wake=wake,
            seen=seen if first else None,
            delivered=delivered and first,
            owner=owner,
        )
        if not outcome.ok:
            text = failure_message(step.feature, outcome.message) if step.feature else outcome.message
            return Verdict(False, text, step.feature)
        passed.append(outcome.message)
    return Verdict(True, passed[0] if len(passed) == 1 else "; ".join(passed))


def deployed_features(features: Iterable[ss.Feature]) -> tuple[str, ...]:
    """The features a delivery deployed (their checks may run)."""
    return tuple(f.feature_id for f in features if f.status == "Provisioned")
