"""The one rule that turns an engine decision into the controller's next wake-up (all rollout kinds).

The engine says when its decision may next change (`requeue_at`: a gate's deadline, or the poll
interval while it waits on facts). That instant becomes a delayed requeue; an instant already due is
re-run after a short floor rather than through the error backoff, so a gate that opens "now" never
waits on a retry schedule meant for failures. No instant means nothing but an event can change it.
`now` is the clock when the pass returns, not when it began: a pass under load lasts a second or
more, and a delay counted from its start fired that much late.
"""

from __future__ import annotations

from datetime import datetime

from fleetwave.core import effects as fx
from fleetwave.runtime.controller import Result

FLOOR_SECONDS = 0.05
# "Again now" for a reconcile that moved its rollout on and left that move's effects to the next
# reconcile (`passes.drive`): a timer, not the error backoff, and not the floor, which at 100
# clusters added 50 ms to every stage boundary of a staged run (ADR 0127).
AT_ONCE_SECONDS = 0.001


def seconds_until(decision: fx.Decision, now: datetime) -> float | None:
    if decision.requeue_at is None:
        return None
    return max((decision.requeue_at - now).total_seconds(), FLOOR_SECONDS)


def after(decision: fx.Decision, now: datetime) -> Result:
    """The requeue; a poll for facts (no time-based wake, or one later than the poll) is marked as
    one, so that it waits with event-woken keys and a gate falling due goes first (ADR 0117)."""
    return Result(requeue_after=seconds_until(decision, now), poll=polling(decision))


def polling(decision: fx.Decision) -> bool:
    """Whether the decision's next wake-up is a poll for facts rather than a deadline it keeps."""
    due = decision.requeue_at
    return due is not None and (decision.wake_at is None or due < decision.wake_at)
