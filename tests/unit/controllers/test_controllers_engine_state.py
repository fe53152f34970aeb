"""The engine's status survives a trip through the API object's status.rollout unchanged."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from fleetwave.controllers.shared import engine_state
from fleetwave.core import engine
from fleetwave.core import model as m

T0 = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)


def _spec() -> m.RolloutSpec:
    def stage(name: str, env: str, after: tuple[m.Gate, ...]) -> m.StageSpec:
        return m.StageSpec(name, m.Selector(match_labels=(("env", env),)), after=after)

    return m.RolloutSpec(
        name="p",
        revision=m.Revision("c1", "s1"),
        stages=(
            stage("dev", "dev", (m.Delay(timedelta(minutes=5)),)),
            stage("prod", "prod", (m.Approval("prod"),)),
        ),
    )


def test_a_mid_rollout_status_round_trips_through_json() -> None:
    fleet = m.Fleet.of([m.Cluster("a", {"env": "dev"}), m.Cluster("b", {"env": "prod"})])
    spec = _spec()
    first = engine.step(spec, fleet, m.Observed(), T0)
    done = {"a": m.Delivery(m.DeliveryPhase.APPLIED, ready=True)}
    observed = m.Observed(delivery=done, previous=first.status)
    second = engine.step(spec, fleet, observed, T0 + timedelta(seconds=5))
    status = second.status
    assert status.stages[0].gates, "the delay gate should be recorded as waiting"

    restored = engine_state.load(json.loads(json.dumps(engine_state.dump(status))))

    assert restored == status
    # And the restored status drives the engine to the same decision as the original.
    later = T0 + timedelta(minutes=6)
    assert engine.step(spec, fleet, m.Observed(delivery=done, previous=restored), later) == engine.step(
        spec, fleet, m.Observed(delivery=done, previous=status), later
    )
