"""The one pass driver (ADR 0101): effect order by policy, one status write per pass, progress held
back, a conflict decided again, passes bounded."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest
from lightkube import ApiError
from lightkube.models import meta_v1

from fleetwave.controllers.shared import passes, requeue
from fleetwave.controllers.shared.context import Context
from fleetwave.controllers.shared.status_writer import PROGRESS_EVERY, StatusWriter
from fleetwave.core import effects as fx
from fleetwave.kube.status import StatusWrite, Versioned
from fleetwave.runtime.controller import Result

T0 = datetime(2026, 11, 28, 12, tzinfo=UTC)
LATER = Result(requeue_after=30.0)


class _Client:
    def __init__(self, conflict: bool = False) -> None:
        self.conflict = conflict
        self.bodies: list[Any] = []

    async def patch(self, resource: Any, name: str, body: Any, **_: Any) -> Any:
        if self.conflict:
            raise ApiError(status=meta_v1.Status(code=409, message="conflict"))
        self.bodies.append(body["status"])
        meta = SimpleNamespace(name=name, namespace=None, resourceVersion=str(len(self.bodies) + 1))
        return SimpleNamespace(metadata=meta, status=body["status"])


class _Kind:
    """Each pass's step is its number; passes up to `learns` teach something new when they act."""

    kind = "ClusterPromotion"
    key = "p"
    metered = False
    woken_by_every_change = False

    def __init__(
        self,
        policy: passes.Policy,
        max_passes: int = 1,
        learns: int = 0,
        quiet: bool = False,
        moves: bool = False,
    ) -> None:
        self.policy, self.max_passes, self.learns, self.quiet = policy, max_passes, learns, quiet
        self.moves = moves  # each pass's engine record differs from the one it started from
        self.log: list[str] = []

    async def observe(self, current: Versioned, now: datetime) -> int:
        return sum(1 for line in self.log if line.startswith("decide")) + 1

    def decide(self, number: int, current: Versioned, now: datetime) -> passes.Decided[int]:
        self.log.append(f"decide {number}")
        status, previous = (number, number - 1) if self.moves else (None, None)
        decision = fx.Decision(status, (), None, None, None, False)  # type: ignore[arg-type]
        pending = self.policy is passes.Policy.WRITE_THEN_ACT
        return passes.Decided(number, decision, {"pass": number}, previous, pending, self.quiet)  # type: ignore[arg-type]

    async def before_write(self, decided: passes.Decided[int]) -> None:
        self.log.append(f"before {decided.step}")

    async def after_write(self, decided: passes.Decided[int], written: StatusWrite) -> None:
        self.log.append(f"after {decided.step} {written.name}")

    async def act(self, decided: passes.Decided[int]) -> bool:
        self.log.append(f"act {decided.step}")
        return decided.step <= self.learns

    def requeue(self, decided: passes.Decided[int], now: datetime) -> Result:
        return LATER


def _ctx(client: _Client, statuses: StatusWriter | None = None) -> Context:
    return Context(
        client=client,  # type: ignore[arg-type]
        cache=SimpleNamespace(family=SimpleNamespace(native=True)),  # type: ignore[arg-type]
        recorder=None,  # type: ignore[arg-type]
        helm=None,  # type: ignore[arg-type]
        health=None,  # type: ignore[arg-type]
        namespace="fleetwave-system",
        clock=lambda: T0,
        statuses=statuses or StatusWriter(),
    )


CURRENT = Versioned("p", None, "1", {"pass": 0})


async def test_act_then_write_acts_before_its_one_write_and_runs_one_pass() -> None:
    client, kind = _Client(), _Kind(passes.Policy.ACT_THEN_WRITE, max_passes=1)
    assert await passes.drive(_ctx(client), kind, CURRENT) == LATER
    assert kind.log == ["decide 1", "before 1", "after 1 WRITTEN"]
    assert client.bodies == [{"pass": 1}]


async def test_write_then_act_writes_then_acts_and_goes_on_while_acts_teach_something() -> None:
    client, kind = _Client(), _Kind(passes.Policy.WRITE_THEN_ACT, max_passes=6, learns=2)
    assert await passes.drive(_ctx(client), kind, CURRENT) == LATER
    assert kind.log == [
        *("decide 1", "before 1", "after 1 WRITTEN", "act 1"),
        *("decide 2", "before 2", "after 2 WRITTEN", "act 2"),
        *("decide 3", "before 3", "after 3 WRITTEN", "act 3"),  # learnt nothing: the reconcile ends
    ]
    assert len(client.bodies) == 3  # one write per pass


async def test_the_last_pass_only_writes_and_leaves_its_effects_to_the_next_reconcile() -> None:
    client, kind = _Client(), _Kind(passes.Policy.WRITE_THEN_ACT, max_passes=2, learns=5)
    result = await passes.drive(_ctx(client), kind, CURRENT)
    assert result == Result(requeue_after=requeue.FLOOR_SECONDS)
    assert kind.log[-2:] == ["before 2", "after 2 WRITTEN"]
    assert "act 2" not in kind.log


async def test_a_last_pass_that_moved_the_rollout_on_hands_its_effects_on_at_once() -> None:
    """ADR 0127: a stage started by the last pass is applied by the next reconcile without the
    floor's wait; a last pass that moved nothing keeps the floor (the test above)."""
    client, kind = _Client(), _Kind(passes.Policy.WRITE_THEN_ACT, max_passes=2, learns=5, moves=True)
    result = await passes.drive(_ctx(client), kind, CURRENT)
    assert result == Result(requeue_after=requeue.AT_ONCE_SECONDS)
    assert requeue.AT_ONCE_SECONDS < requeue.FLOOR_SECONDS
    assert "act 2" not in kind.log


@pytest.mark.parametrize(
    ("woken", "then"),
    [
        (False, Result(requeue=True)),  # retried with backoff: its watch may not show the newer write
        (True, Result(requeue_after=passes.CONFLICT_NET, poll=True)),  # the newer version's event wakes it
    ],
)
async def test_a_conflict_stops_the_reconcile_to_decide_again_from_newer_state(
    woken: bool, then: Result
) -> None:
    kind = _Kind(passes.Policy.WRITE_THEN_ACT, max_passes=6, learns=5)
    kind.woken_by_every_change = woken
    assert await passes.drive(_ctx(_Client(conflict=True)), kind, CURRENT) == then
    assert kind.log == ["decide 1", "before 1"]


async def test_progress_only_is_held_back_after_a_recent_write_then_written_once_due() -> None:
    elapsed = [0.0]
    statuses = StatusWriter(clock=lambda: elapsed[0])
    client = _Client()
    first = _Kind(passes.Policy.ACT_THEN_WRITE)
    await passes.drive(_ctx(client, statuses), first, CURRENT)
    held = await passes.drive(
        _ctx(client, statuses), _Kind(passes.Policy.ACT_THEN_WRITE, quiet=True), CURRENT
    )
    assert held == Result(requeue_after=PROGRESS_EVERY)  # sooner than the kind's own 30 s
    assert len(client.bodies) == 1
    elapsed[0] += PROGRESS_EVERY
    await passes.drive(_ctx(client, statuses), _Kind(passes.Policy.ACT_THEN_WRITE, quiet=True), CURRENT)
    assert len(client.bodies) == 2


def test_a_requeue_for_a_gate_falling_due_is_a_deadline_and_one_polling_for_facts_is_a_poll() -> None:
    """ADR 0117: the promotion's work queue hands a deadline out before event-woken keys, a poll
    waits with them."""
    now = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
    gate, poll = now + timedelta(seconds=2), now + timedelta(seconds=1)

    def decision(requeue_at: datetime | None, wake_at: datetime | None) -> fx.Decision:
        return fx.Decision(None, (), requeue_at, None, wake_at, True)  # type: ignore[arg-type]

    assert requeue.after(decision(gate, gate), now) == Result(requeue_after=2.0, poll=False)
    assert requeue.after(decision(poll, gate), now) == Result(requeue_after=1.0, poll=True)
    assert requeue.after(decision(poll, None), now) == Result(requeue_after=1.0, poll=True)
    assert requeue.after(decision(None, None), now) == Result()
