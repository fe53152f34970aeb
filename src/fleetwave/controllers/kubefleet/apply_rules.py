"""What a placement's `strategy.applyStrategy` asks of every apply to a member (pure, ADR 0063).

ClientSideApply and ServerSideApply both end as a server-side apply that takes fields over (upstream's
client-side apply overwrites them too); `serverSideApplyConfig.force: false` and `whenToApply:
IfNotDrifted` apply without force, so an object someone else changed is reported drifted and left
alone; `whenToTakeOver` decides about objects fleetwave did not deploy; `ReportDiff` applies nothing
and reports how each member differs.
"""

from __future__ import annotations

from dataclasses import dataclass

from fleetwave.api.kubefleet import ApplyStrategy, PlacementSpec
from fleetwave.delivery.manifests import DEFAULT_POLICY, ApplyPolicy


@dataclass(frozen=True, slots=True)
class ApplyRules:
    policy: ApplyPolicy = DEFAULT_POLICY
    report_diff: bool = False


DEFAULT = ApplyRules()


def of(spec: PlacementSpec | None) -> ApplyRules:
    strategy = spec.strategy.apply_strategy if spec is not None else None
    if strategy is None:
        return DEFAULT
    return ApplyRules(
        ApplyPolicy(take_over=strategy.when_to_take_over, force=_forced(strategy)),
        report_diff=strategy.type == "ReportDiff",
    )


def _forced(strategy: ApplyStrategy) -> bool:
    if strategy.when_to_apply == "IfNotDrifted":
        return False
    if strategy.type == "ServerSideApply":
        # Upstream's force defaults to false: without it a field another manager owns is a conflict.
        return strategy.server_side_apply_config is not None and strategy.server_side_apply_config.force
    return True
