"""Property-based invariants of the engine, driven by random fleets, specs and fact sequences."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from core_helpers import DONE, T0
from croniter import croniter
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hs

from fleetwave.core import batching, engine, windows
from fleetwave.core import effects as fx
from fleetwave.core import model as m
from fleetwave.core import status as st

ENVS = ("a", "b", "c")
WINDOWS = (
    m.Window("0 */3 * * *", "30 */3 * * *"),
    m.Window("15 9 * * *", "0 10 * * *", tz="Europe/Berlin"),
    m.Window("0 10 * * 6", "0 22 * * 0"),
)
PROFILE = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])

labels_st = hs.fixed_dictionaries(
    {"env": hs.sampled_from((*ENVS, "x"))},
    optional={"order": hs.one_of(hs.integers(-3, 20).map(str), hs.sampled_from(("blue", "green")))},
)
clusters_st = hs.lists(hs.tuples(labels_st, hs.booleans()), max_size=18).map(
    lambda rows: [m.Cluster(f"c{i:02d}", lab, ready or i % 4 != 0) for i, (lab, ready) in enumerate(rows)]
)
limit_st = hs.one_of(
    hs.integers(0, 5).map(m.MaxInFlight),
    hs.integers(0, 100).map(lambda p: m.MaxInFlight(p, percent=True)),
)


@hs.composite
def gates_st(draw: hs.DrawFn, stage: str) -> tuple[m.Gate, ...]:
    gates: list[m.Gate] = []
    if draw(hs.booleans()):
        gates.append(m.Delay(timedelta(minutes=draw(hs.integers(0, 90)))))
    if draw(hs.booleans()):
        gates.append(m.HealthChecks(("smoke",)))
    if draw(hs.booleans()):
        gates.append(draw(hs.sampled_from(WINDOWS)))
    if draw(hs.booleans()):
        gates.append(m.Approval(f"{stage}-ok", auto_reset=draw(hs.booleans())))
    return tuple(gates)


@hs.composite
def spec_st(draw: hs.DrawFn) -> m.RolloutSpec:
    stages = []
    for name in ENVS[: draw(hs.integers(1, 3))]:
        selector = m.Selector(match_expressions=(m.Requirement("env", m.Operator.IN, (name,)),))
        before = (m.Approval(f"{name}-pre"),) if draw(hs.booleans()) else ()
        stages.append(
            m.StageSpec(
                name,
                selector,
                sorting_key=draw(hs.sampled_from((None, "order"))),
                max_in_flight=draw(limit_st),
                before=before,
                after=draw(gates_st(name)),
                skip_gates_when_empty=draw(hs.booleans()),
            )
        )
    stage_tuple = tuple(stages)
    revision = m.Revision("v1", batching.compute_stages_hash(stage_tuple))
    return m.RolloutSpec(
        "r", revision, stage_tuple, progress_deadline=draw(hs.sampled_from((None, timedelta(hours=3))))
    )


def window_open_brute_force(window: m.Window, now: datetime) -> bool:
    """Minute by minute: the latest `from` fire at or before now has no `to` fire after it yet."""
    tz = ZoneInfo(window.tz)
    t = now.replace(second=0, microsecond=0)
    for _ in range(8 * 24 * 60):
        local = t.astimezone(tz)
        if croniter.match(window.from_cron, local):
            return True
        if croniter.match(window.to_cron, local):
            return False
        t -= timedelta(minutes=1)
    return False


class World:
    def __init__(self, spec: m.RolloutSpec, fleet: m.Fleet) -> None:
        self.spec, self.fleet, self.now = spec, fleet, T0
        self.delivery: dict[str, m.Delivery] = {}
        self.health: dict[tuple[str, str], m.HealthVerdict] = {}
        self.approvals: dict[str, datetime] = {}
        self.status: st.RolloutStatus | None = None
        self.history: list[tuple[datetime, dict[tuple[str, str], m.HealthVerdict]]] = []

    def observed(self) -> m.Observed:
        return m.Observed(dict(self.delivery), dict(self.health), dict(self.approvals), self.status)


def _check_delivers(decision: fx.Decision) -> None:
    """No cluster of stage k+1 is touched before stage k succeeded (its after-gates open)."""
    status = decision.status
    for effect in decision.effects:
        if not isinstance(effect, fx.Deliver):
            continue
        k = next(i for i, s in enumerate(status.stages) if s.name == effect.stage)
        assert all(s.phase is st.StagePhase.SUCCEEDED for s in status.stages[:k]), effect
        stage = status.stages[k]
        assert stage.started_at is not None
        assert effect.cluster in stage.clusters or (effect.cluster, k) in status.late_joiners


def _check_in_flight(world: World) -> None:
    assert world.status is not None
    for stage in world.status.stages:
        in_flight = [
            c for c in stage.started if c in world.fleet.names and not world.delivery.get(c, m.PENDING).done
        ]
        assert len(in_flight) <= max(stage.max_in_flight, 0), (stage.name, in_flight, stage.max_in_flight)
        assert len(stage.started) == len(set(stage.started))


def _check_gates_of_succeeded(
    world: World, health_at: dict[str, dict[tuple[str, str], m.HealthVerdict]]
) -> None:
    assert world.status is not None
    for i, stage in enumerate(world.status.stages):
        if stage.phase is not st.StagePhase.SUCCEEDED or (
            not stage.clusters and world.spec.stages[i].skip_gates_when_empty
        ):
            continue
        assert stage.succeeded_at is not None
        assert stage.delivered_at is not None
        for gate in world.spec.stages[i].after:
            if isinstance(gate, m.Delay):
                assert stage.succeeded_at >= stage.delivered_at + gate.duration  # never cut short
            elif isinstance(gate, m.Approval):
                granted = world.approvals.get(gate.id)
                assert granted is not None
                assert granted <= stage.succeeded_at
                assert not gate.auto_reset or granted >= world.status.started_at
            elif isinstance(gate, m.Window):
                assert window_open_brute_force(gate, stage.succeeded_at)
            elif isinstance(gate, m.HealthChecks):
                verdict = health_at[stage.name].get((stage.name, "smoke"))
                assert verdict is not None
                assert verdict.ok


def _check_determinism(world: World, observed: m.Observed, decision: fx.Decision) -> None:
    again = engine.step(world.spec, world.fleet, observed, world.now)
    assert again == decision
    reversed_fleet = m.Fleet(dict(reversed(list(world.fleet.by_name.items()))), world.fleet.names)
    assert engine.step(world.spec, reversed_fleet, observed, world.now) == decision


def _mutate_world(world: World, data: hs.DataObject) -> None:
    world.now += timedelta(minutes=data.draw(hs.sampled_from((0, 1, 7, 30, 61, 200)), label="advance"))
    assert world.status is not None
    for stage in world.status.stages:
        for name in stage.started:
            state = world.delivery.get(name, m.PENDING)
            if not state.done:
                roll = data.draw(hs.integers(0, 9), label="delivery")
                world.delivery[name] = (
                    DONE
                    if roll < 6
                    else state
                    if roll < 8
                    else m.Delivery(m.DeliveryPhase.FAILED, message="boom")
                )
    for s in world.spec.stages:
        world.health[(s.name, "smoke")] = m.HealthVerdict(
            data.draw(hs.booleans(), label="health"), "c00", "bad"
        )
        for approval in (f"{s.name}-ok", f"{s.name}-pre"):
            if approval not in world.approvals and data.draw(hs.integers(0, 3), label="approve") == 0:
                world.approvals[approval] = world.now


@PROFILE
@given(spec=spec_st(), clusters=clusters_st, data=hs.data())
def test_invariants_hold_over_random_rollouts(
    spec: m.RolloutSpec, clusters: list[m.Cluster], data: hs.DataObject
) -> None:
    world = World(spec, m.Fleet.of(clusters))
    health_at: dict[str, dict[tuple[str, str], m.HealthVerdict]] = {}
    for _ in range(data.draw(hs.integers(1, 25), label="steps")):
        observed = world.observed()
        decision = engine.step(spec, world.fleet, observed, world.now)
        _check_determinism(world, observed, decision)
        for s in decision.status.stages:
            if s.succeeded_at == world.now and s.name not in health_at:
                health_at[s.name] = dict(world.health)
        world.status = decision.status
        for effect in decision.effects:
            if isinstance(effect, fx.Deliver):
                world.delivery.setdefault(effect.cluster, m.Delivery(m.DeliveryPhase.APPLYING))
        _check_delivers(decision)
        _check_in_flight(world)
        _check_gates_of_succeeded(world, health_at)
        if decision.requeue_at is not None:
            assert decision.requeue_at >= world.now
        _mutate_world(world, data)


@PROFILE
@given(clusters=clusters_st, limit=limit_st)
def test_plan_is_independent_of_fleet_listing_order(clusters: list[m.Cluster], limit: m.MaxInFlight) -> None:
    stages = tuple(
        m.StageSpec(
            e, m.Selector(match_expressions=(m.Requirement("env", m.Operator.IN, (e,)),)), "order", limit
        )
        for e in ENVS
    )
    spec = m.RolloutSpec("r", m.Revision("v", "s"), stages)
    forward = batching.freeze_plan(spec, m.Fleet.of(clusters), T0)
    backward = batching.freeze_plan(spec, m.Fleet.of(list(reversed(clusters))), T0)
    assert forward == backward
    for stage in forward.stages:
        assert sum(len(b) for b in stage.batches) == len(stage.clusters)
        assert all(len(b) <= max(stage.max_in_flight, 1) for b in stage.batches)


@settings(max_examples=200, deadline=None)
@given(value=hs.integers(0, 100), members=hs.integers(0, 500), percent=hs.booleans(), up=hs.booleans())
def test_max_in_flight_is_at_least_one_and_never_above_the_stage(
    value: int, members: int, percent: bool, up: bool
) -> None:
    limit = batching.resolve_max_in_flight(m.MaxInFlight(value, percent, round_up=up), members)
    if members == 0:
        assert limit == 0
    else:
        assert 1 <= limit <= members
        if value == 0:
            assert limit == members
        elif percent:
            exact = value * members / 100
            assert limit == max(1, math.ceil(exact) if up else math.floor(exact))


@settings(max_examples=60, deadline=None)
@given(minute=hs.integers(0, 14 * 24 * 60), window=hs.sampled_from(WINDOWS))
def test_window_state_agrees_with_a_minute_by_minute_reference(minute: int, window: m.Window) -> None:

    now = datetime(2026, 3, 20, tzinfo=UTC) + timedelta(minutes=minute)
    state = windows.window_state(window, now)
    assert state.open == window_open_brute_force(window, now)
    assert state.changes_at is not None
    assert state.changes_at > now
