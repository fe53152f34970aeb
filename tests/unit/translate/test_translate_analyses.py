"""Analysis gates through translation and the plan simulator (ADR 0081)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from pydantic import ValidationError

from fleetwave.api.kubefleet import StagedUpdateStrategySpec
from fleetwave.api.sveltos import Stage
from fleetwave.core import model as m
from fleetwave.core import timeline
from fleetwave.translate import kubefleet as tk
from fleetwave.translate import sveltos as ts

T0 = datetime(2026, 11, 25, 10, 0, tzinfo=UTC)
ANALYSIS = {
    "name": "errors",
    "prometheus": {"url": "http://prometheus.monitoring:9090"},
    "query": "sum(rate(errors[1m]))",
    "successCondition": "result < 0.05",
}


def test_a_promotion_stages_analyses_come_after_its_webhooks_with_their_defaults() -> None:
    stage = Stage.model_validate(
        {
            "name": "staging",
            "trigger": {"manual": {}},
            "webhooks": [{"name": "smoke", "url": "https://ci.example.com/ok"}],
            "analyses": [
                ANALYSIS,
                {**ANALYSIS, "name": "per", "perCluster": True, "count": 5, "interval": "1m"},
            ],
        }
    )
    gates = ts.trigger_gates(stage, "p")
    assert [type(g).__name__ for g in gates] == ["Webhook", "Analysis", "Analysis", "Approval"]
    assert gates[1] == m.Analysis("errors", 3, 0, timedelta(seconds=30))
    assert gates[2] == m.Analysis("per", 5, 0, timedelta(minutes=1), per_cluster=True)


def test_a_staged_strategy_stage_gets_its_analyses() -> None:
    strategy = StagedUpdateStrategySpec.model_validate(
        {
            "stages": [
                {
                    "name": "canary",
                    "labelSelector": {},
                    "afterStageTasks": [{"type": "Approval"}, {"type": "TimedWait", "waitTime": "1m"}],
                    "analyses": [{**ANALYSIS, "failureLimit": 1}],
                }
            ]
        }
    )
    gates = tk._after_gates(strategy.stages[0], "run")
    assert [type(g).__name__ for g in gates] == ["Delay", "Analysis", "Approval"]
    assert gates[1] == m.Analysis("errors", 3, 1, timedelta(seconds=30))


@pytest.mark.parametrize(
    ("fields", "said"),
    [
        ({"count": 0}, "count"),
        ({"count": 101}, "count"),
        ({"prometheus": {"url": "http://x:9090?q=1"}}, "url"),
        ({"prometheus": {"url": "http://x:9090", "path": "../x?y"}}, "path"),
        ({"query": ""}, "query"),
    ],
)
def test_invalid_analyses_are_refused_naming_what_is_wrong(fields: dict[str, object], said: str) -> None:
    with pytest.raises(ValidationError) as refused:
        Stage.model_validate({"name": "dev", "analyses": [{**ANALYSIS, **fields}]})
    assert said in str(refused.value)
    with pytest.raises(ValidationError, match="analyses"):
        Stage.model_validate({"name": "dev", "analyses": [ANALYSIS, ANALYSIS]})


def test_the_plan_assumes_an_analysis_passes_unless_told_it_fails() -> None:
    gate = m.Analysis("errors", count=3)
    stages = (
        m.StageSpec("dev", m.Selector(), after=(gate,)),
        m.StageSpec("prod", m.Selector(match_labels=(("env", "prod"),))),
    )
    spec = m.RolloutSpec("r", m.Revision("c", "s"), stages)
    fleet = m.Fleet.of([m.Cluster("a", {"env": "dev"})])
    passing = timeline.simulate(spec, fleet, T0, timeline.Assumptions())
    assert passing.outcome == "Succeeded"
    failing = timeline.simulate(spec, fleet, T0, timeline.Assumptions(failing_checks=frozenset({"errors"})))
    assert failing.outcome == "Blocked"
    assert "analysis errors failed: 1 of 1 measurements failed (limit 0): assumed failing" in failing.message


def test_the_plan_waits_out_an_analysis_measurements_count_minus_one_intervals_after_delivery() -> None:
    gate = m.Analysis("errors", count=3, interval=timedelta(minutes=5))
    stages = (
        m.StageSpec("dev", m.Selector(match_labels=(("env", "dev"),)), after=(gate,)),
        m.StageSpec("prod", m.Selector(match_labels=(("env", "prod"),))),
    )
    spec = m.RolloutSpec("r", m.Revision("c", "s"), stages)
    fleet = m.Fleet.of([m.Cluster("a", {"env": "dev"}), m.Cluster("b", {"env": "prod"})])
    plan = timeline.simulate(spec, fleet, T0, timeline.Assumptions())
    assert plan.outcome == "Succeeded"
    dev = next(s for s in plan.stages if s.name == "dev")
    assert dev.delivered_at is not None
    assert dev.succeeded_at == dev.delivered_at + timedelta(minutes=10)
    assert [w.description for w in dev.waits][
        -1
    ] == "after-gates: analysis errors: 2/3 measurements, 0 failed"
