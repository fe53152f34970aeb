"""validateHealths[].featureID: a check runs after its feature and its failure names it (ADR 0113)."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, cast

from fleetwave.api.sveltos import ValidateHealth
from fleetwave.controllers.shared.context import Context, HealthOutcome
from fleetwave.controllers.sveltos import summary, summary_health
from fleetwave.controllers.sveltos import summary_status as ss
from fleetwave.delivery.target import MemberTarget

NOW = dt.datetime(2026, 11, 29, 12, 0, tzinfo=dt.UTC)
LATER = NOW + dt.timedelta(hours=1)


def _check(name: str, feature: str | None = None) -> ValidateHealth:
    body: dict[str, Any] = {"name": name, "version": "v1", "kind": "ConfigMap", "namespace": "x"}
    if feature:
        body["featureID"] = feature
    return ValidateHealth.model_validate(body)


@dataclass
class FakeHealth:
    """Fails the judgement that lists a check named in `failing`; records each judgement."""

    failing: set[str] = field(default_factory=set)
    calls: list[tuple[list[str], int]] = field(default_factory=list)

    async def check(self, target: Any, checks_: Iterable[ValidateHealth], **kw: Any) -> HealthOutcome:
        names = [c.name for c in checks_]
        self.calls.append((names, len(list(kw.get("objects") or ()))))
        bad = [n for n in names if n in self.failing]
        if bad:
            return HealthOutcome(False, f"health check {bad[0]} failing: not there")
        return HealthOutcome(True, "ready; health checks passing: " + ", ".join(names))


@dataclass
class FakeContext:
    health: FakeHealth


def _judge(
    health: FakeHealth, checks: list[ValidateHealth], deployed: Iterable[str]
) -> summary_health.Verdict:
    ctx = cast(Context, FakeContext(health))
    target = MemberTarget("dev/one", b"")
    objects = [("v1", "ConfigMap", "x", "a")]
    features = [ss.Feature(f, "Provisioned", "h") for f in deployed]
    return asyncio.run(summary_health.judge(ctx, target, checks, features, objects=objects, wake=None))


def test_each_featureid_check_runs_after_its_feature_and_only_when_that_feature_was_deployed() -> None:
    checks = [
        _check("every"),
        _check("helm-up", "Helm"),
        _check("res-up", "Resources"),
        _check("k", "Kustomize"),
    ]
    health = FakeHealth()
    verdict = _judge(health, checks, ["Resources", "Helm"])
    assert verdict.ok
    # Readiness of the delivered objects and the unattributed check first, then Resources, then Helm;
    # the Kustomize check never runs (the profile has no Kustomize content).
    assert health.calls == [(["every"], 1), (["res-up"], 0), (["helm-up"], 0)]


def test_a_failing_helm_check_is_attributed_to_helm_and_stops_the_judgement() -> None:
    checks = [_check("helm-up", "Helm"), _check("res-up", "Resources")]
    health = FakeHealth(failing={"helm-up"})
    verdict = _judge(health, checks, ["Resources", "Helm"])
    assert (verdict.ok, verdict.feature) == (False, "Helm")
    assert verdict.message.startswith("feature Helm: health check helm-up failing")
    unattributed = _judge(
        FakeHealth(failing={"every"}), [_check("every"), _check("helm-up", "Helm")], ["Helm"]
    )
    assert (unattributed.ok, unattributed.feature) == (False, "")
    assert "feature" not in unattributed.message


def test_a_profile_without_featureids_is_judged_once_as_before() -> None:
    health = FakeHealth()
    assert _judge(health, [_check("a"), _check("b")], ["Resources", "Helm"]).ok
    assert health.calls == [(["a", "b"], 1)]


def _features() -> tuple[ss.Feature, ...]:
    return (
        ss.Feature(ss.FEATURE_RESOURCES, "Provisioned", "r1"),
        ss.Feature(ss.FEATURE_HELM, "Provisioned", "h1"),
    )


def test_the_failure_shows_on_that_features_summary_only_and_the_summary_stays_unhealthy() -> None:
    message = "feature Helm: health check helm-up failing: Deployment web is Progressing"
    outcome = ss.Outcome("c1", _features(), health_message=message, health_feature="Helm")
    status = ss.status_body(outcome, generation=1, now=NOW, previous={})
    by_feature = {f["featureID"]: f for f in status["featureSummaries"]}
    assert (by_feature["Helm"]["status"], by_feature["Helm"]["failureMessage"]) == ("Failed", message)
    assert "consecutiveFailures" not in by_feature["Helm"]  # not a delivery failure
    assert by_feature["Resources"]["status"] == "Provisioned"
    assert "failureMessage" not in by_feature["Resources"]
    ready = status["conditions"][0]
    # A promotion keeps waiting out its grace on an Unhealthy cluster; Failed would fail it at once.
    assert (ready["reason"], ready["message"]) == ("Unhealthy", message)
    assert status["failureMessage"] is None


def test_a_health_failed_feature_counts_as_deployed_so_only_health_is_judged_again() -> None:
    outcome = ss.Outcome("c1", _features(), health_message="feature Helm: x", health_feature="Helm")
    status = ss.status_body(outcome, generation=1, now=NOW, previous={})
    raw = {
        "metadata": {"generation": 1, "annotations": {}},
        "spec": {"clusterProfileSpec": {"syncMode": "Continuous"}},
        "status": status,
    }
    assert summary.settled(raw, "c1") == "judge"  # nothing re-applied while unhealthy
    healed = ss.status_body(
        ss.Outcome("c1", _features(), healthy=True), generation=1, now=LATER, previous=status
    )
    helm = next(f for f in healed["featureSummaries"] if f["featureID"] == "Helm")
    assert helm["status"] == "Provisioned"
    assert "failureMessage" not in helm
    # The flip back is not a new application of the feature.
    assert helm["lastAppliedTime"] == status["featureSummaries"][1]["lastAppliedTime"]
    # A real deploy failure is still a failure.
    broken = ss.Outcome("c1", (ss.Feature(ss.FEATURE_HELM, "Failed", "h1", "chart not found"),))
    failed = ss.status_body(broken, generation=1, now=NOW, previous={})
    assert failed["conditions"][0]["reason"] == "Failed"
    assert ss.carried_status(failed, failed["featureSummaries"][0]) == "Failed"
