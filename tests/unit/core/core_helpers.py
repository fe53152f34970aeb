"""Builders shared by the core tests (a plain module: tests import it by name)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from fleetwave.core import batching, engine
from fleetwave.core import effects as fx
from fleetwave.core import model as m
from fleetwave.core import status as st

T0 = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
DONE = m.Delivery(m.DeliveryPhase.APPLIED, ready=True)
APPLYING = m.Delivery(m.DeliveryPhase.APPLYING)


def minutes(n: float) -> timedelta:
    return timedelta(minutes=n)


def env(value: str) -> m.Selector:
    return m.Selector(match_labels=(("env", value),))


def fleet(**envs: int) -> m.Fleet:
    """fleet(dev=2, prod=3) -> clusters dev-0, dev-1, prod-0.. labelled env=<key>."""
    return m.Fleet.of(m.Cluster(f"{e}-{i}", {"env": e}) for e, n in envs.items() for i in range(n))


def stage(name: str, **kw: object) -> m.StageSpec:
    return m.StageSpec(name, env(name), **kw)  # type: ignore[arg-type]


def spec(*stages: m.StageSpec, content: str = "v1", **kw: object) -> m.RolloutSpec:
    return m.RolloutSpec("r", m.Revision(content, batching.compute_stages_hash(stages)), stages, **kw)  # type: ignore[arg-type]


def delivered(names: Iterable[str], state: m.Delivery = DONE) -> dict[str, m.Delivery]:
    return dict.fromkeys(names, state)


@dataclass
class Driver:
    """Steps the engine like the shell would, remembering the status between steps."""

    spec: m.RolloutSpec
    fleet: m.Fleet
    now: datetime = T0
    delivery: dict[str, m.Delivery] = field(default_factory=dict)
    health: dict[tuple[str, str], m.HealthVerdict] = field(default_factory=dict)
    approvals: dict[str, datetime] = field(default_factory=dict)
    status: st.RolloutStatus | None = None
    webhooks: dict[tuple[str, str], m.HealthVerdict] = field(default_factory=dict)
    observed_analyses: dict[tuple[str, str], dict[str, m.Measurements]] = field(default_factory=dict)
    last: fx.Decision | None = None

    def step(self, at: datetime | None = None) -> fx.Decision:
        if at is not None:
            self.now = at
        observed = m.Observed(
            self.delivery,
            self.health,
            self.approvals,
            self.status,
            webhooks=self.webhooks,
            analyses=self.observed_analyses,
        )
        self.last = engine.step(self.spec, self.fleet, observed, self.now)
        self.status = self.last.status
        return self.last

    def complete_in_flight(self) -> None:
        assert self.status is not None
        for s in self.status.stages:
            for name in s.started:
                self.delivery[name] = DONE

    def stage(self, name: str) -> st.StageStatus:
        assert self.status is not None
        return next(s for s in self.status.stages if s.name == name)

    def with_spec(self, new: m.RolloutSpec) -> None:
        self.spec = new


def delivers(decision: fx.Decision) -> list[str]:
    return [e.cluster for e in decision.effects if isinstance(e, fx.Deliver)]


def events(decision: fx.Decision) -> list[str]:
    return [e.reason for e in decision.effects if isinstance(e, fx.Event)]


def run_until_stage(d: Driver, name: str, limit: int = 50) -> None:
    """Complete deliveries step by step until stage `name` is the current stage."""
    for _ in range(limit):
        d.step()
        cur = d.status.current_stage if d.status else None
        if cur is not None and cur.name == name:
            return
        d.complete_in_flight()
    raise AssertionError(f"never reached stage {name}")
