"""The one pass driver of every rollout kind (ADR 0101): promotions, profiles, staged update runs
and rolling placements.

A kind supplies its `Passes`: how one pass observes (I/O) and decides (pure: the engine step and the
status it makes), what it does before and after the status write, and how it acts. The driver alone
owns the order of a pass, the status write (through the one `StatusWriter`), holding back a status
that only reports progress, the metrics of the write and the requeue. Two effect orders, one per
kind, named in `Policy`:

- ACT_THEN_WRITE (promotions, profiles): the pass acts, then writes what it did; one pass per
  reconcile — the write's own event wakes the next.
- WRITE_THEN_ACT (staged runs, rolling placements): the status says what is about to happen (a
  stage Started) before it happens; what the effects learnt is written by the next pass. Passes go
  on within the reconcile while the effects keep teaching something new, up to the kind's
  `max_passes` (two: ADR 0101 measures why one is too few and more pay nothing), and the last pass
  only writes. When that pass moved the rollout on, the next reconcile follows at once (ADR 0127).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, Protocol, TypeVar

from fleetwave.controllers.shared import requeue
from fleetwave.controllers.shared.context import Context
from fleetwave.core import effects as fx
from fleetwave.core import status as st
from fleetwave.kube.status import StatusWrite, Versioned
from fleetwave.runtime.controller import Result

# Seconds before a pass whose status write conflicted is tried again, for a kind whose every change
# wakes its next pass (`Passes.woken_by_every_change`): the newer version's event wakes it sooner;
# this is the net for a watch that is down.
CONFLICT_NET = 1.0
S = TypeVar("S")  # the kind's own step: what its effects and announcements need
Seen = TypeVar("Seen")  # what the kind observes before it decides


class Policy(enum.Enum):
    ACT_THEN_WRITE = "act-then-write"
    WRITE_THEN_ACT = "write-then-act"


@dataclass(frozen=True, slots=True)
class Decided(Generic[S]):
    """One pass's outcome as the driver needs it."""

    step: S
    decision: fx.Decision
    body: Mapping[str, Any]  # the whole status to write
    previous: st.RolloutStatus | None  # the engine record the pass started from (metrics)
    pending: bool = False  # effects to carry out after the write (WRITE_THEN_ACT)
    progress_only: bool = False  # the body only reports progress over the stored status


class Passes(Protocol[Seen, S]):
    """One rollout object's reconcile, as the driver runs it."""

    kind: str  # the native kind whose status is written
    key: str
    policy: Policy
    max_passes: int
    metered: bool  # its status writes feed the rollout metrics (ADR 0082)
    # Its own-kind watch wakes a pass on every change of the object, another writer's included: a
    # conflicted status write then waits for the newer version's event instead of retrying at once.
    woken_by_every_change: bool

    async def observe(self, current: Versioned, now: datetime) -> Seen:
        """What the pass decides from, read from the cache, members and gates (I/O)."""
        ...

    def decide(self, observed: Seen, current: Versioned, now: datetime) -> Decided[S]:
        """Pure: the engine step over `observed`, and the status it makes of `current`'s."""
        ...

    async def before_write(self, decided: Decided[S]) -> None:
        """ACT_THEN_WRITE: the effects. WRITE_THEN_ACT: what must precede the record (approvals
        accepted before any status shows progress made on them)."""
        ...

    async def after_write(self, decided: Decided[S], written: StatusWrite) -> None:
        """Announcements (Events) and effects that edit the decision's own inputs."""
        ...

    async def act(self, decided: Decided[S]) -> bool:
        """WRITE_THEN_ACT: carry out the written step; whether it learnt something a next pass
        would write."""
        ...

    def requeue(self, decided: Decided[S], now: datetime) -> Result: ...


async def drive(ctx: Context, kind: Passes[Seen, S], current: Versioned) -> Result:
    for number in range(1, max(kind.max_passes, 1) + 1):
        now = ctx.clock()
        decided = kind.decide(await kind.observe(current, now), current, now)
        await kind.before_write(decided)
        held = _held_back(ctx, kind, decided)
        if held is not None:
            return sooner(kind.requeue(decided, ctx.clock()), held)
        written, current = await ctx.write_status(kind.kind, current, decided.body)
        if written is StatusWrite.CONFLICT:
            # Someone wrote newer state: decide again from it. Retried at once, the pass would find
            # the cache still behind that write and conflict again (hundreds of times per 100 x 100
            # run, stage profiles the promotions rewrote), unless it waits for its event.
            if kind.woken_by_every_change:
                return Result(requeue_after=CONFLICT_NET, poll=True)
            return Result(requeue=True)
        if kind.metered:
            ctx.record_rollout(kind.kind, kind.key, decided.previous, decided.decision.status)
        await kind.after_write(decided, written)
        if kind.policy is Policy.ACT_THEN_WRITE or not decided.pending:
            break
        if number == kind.max_passes:
            # Effects decided but not carried out: the next reconcile decides them again.
            return Result(requeue_after=_handed_on(decided))
        if not await kind.act(decided):
            break
    # From the clock now, not the pass's start: a pass under load lasts a second, and a deadline
    # counted from its start would fire that much late.
    return kind.requeue(decided, ctx.clock())


def _handed_on(decided: Decided[S]) -> float:
    """When the next reconcile carries out what the last pass decided: at once when that pass moved
    the rollout on (a stage or batch started, whose applies are the rollout's critical path), after
    the floor when it moved nothing (a retry that teaches nothing new must not spin; ADR 0127)."""
    moved = decided.previous is not None and decided.decision.status != decided.previous
    return requeue.AT_ONCE_SECONDS if moved else requeue.FLOOR_SECONDS


def _held_back(ctx: Context, kind: Passes[Seen, S], decided: Decided[S]) -> float | None:
    """Seconds until a progress-only status is due (None: write it now): a status this process
    wrote within PROGRESS_EVERY seconds keeps its last messages until then (ADR 0068), since each
    write wakes the rollout and whoever follows it."""
    if not decided.progress_only or decided.pending:
        return None
    return ctx.progress_due_in(kind.kind, kind.key)


def sooner(result: Result, seconds: float) -> Result:
    """`result`, run again within `seconds` at the latest."""
    if result.requeue or (result.requeue_after is not None and result.requeue_after <= seconds):
        return result
    return Result(requeue_after=seconds)
