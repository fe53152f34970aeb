"""A run in state Stop (or Initialize): nothing new starts; the clusters in flight finish.

Stop observes the clusters already started until each is available, then reports Stopped (a
started cluster whose apply was never recorded is applied first: it was in flight); the
progress deadline is paused (the stop time is kept in the record and discounted on resume). State
Initialize shows the frozen plan and waits for Run. One pass, one write, no effects.
"""

from __future__ import annotations

from dataclasses import replace

from fleetwave.controllers.kubefleet import ledger as lg
from fleetwave.controllers.kubefleet import run_status
from fleetwave.controllers.kubefleet.executor import DeliveryMemory
from fleetwave.controllers.kubefleet.run_pass import Setting, in_flight, publish
from fleetwave.controllers.kubefleet.run_record import RunRecord
from fleetwave.controllers.shared.context import Context
from fleetwave.core import timestamps as ts
from fleetwave.kube.status import StatusWrite, Versioned
from fleetwave.runtime.controller import Result

IN_FLIGHT_POLL_SECONDS = 1.0


def unapplied(record: RunRecord, where: Setting) -> tuple[str, ...]:
    """Clusters started before the stop whose apply was not recorded (a crash, or a lost write)."""
    started = lg.started(record.rollout) & where.fleet.names
    ledger = record.ledger
    return tuple(sorted(c for c in started if c not in ledger or ledger[c].hash != where.content.hash_for(c)))


async def stop(
    ctx: Context, memory: DeliveryMemory, where: Setting, record: RunRecord, current: Versioned
) -> Result:
    # Started clusters are in flight: they finish, even one whose apply was never recorded.
    # A rollback being stopped starts nothing: its clusters keep what they have until it resumes.
    content = where.delivering(record.rollout)
    todo = () if record.rollout.rollback is not None else unapplied(record, where)
    delivered = await lg.deliver(ctx, memory, todo, content)
    record = replace(record, ledger=lg.merged(record.ledger, delivered))
    now = ctx.clock()
    seen = await lg.observe(
        ctx,
        memory,
        record.rollout,
        where.fleet,
        record.ledger,
        content,
        lg.wake_of(ctx, where.scope.run, current),
    )
    record = replace(record, ledger=seen.ledger, stopped_at=record.stopped_at or ts.fmt(now))
    flying = in_flight(record.rollout, record.ledger, where.fleet)
    body = run_status.render(
        where.frame, record, mode="Stop", previous=current.status, now=now, in_flight=flying
    )
    written, _ = await publish(ctx, where, current, body, ())
    if written is StatusWrite.CONFLICT:
        return Result(requeue=True)
    return Result(requeue_after=IN_FLIGHT_POLL_SECONDS) if flying else Result()


async def hold(ctx: Context, where: Setting, record: RunRecord, current: Versioned) -> Result:
    body = run_status.render(where.frame, record, mode="Initialize", previous=current.status, now=ctx.clock())
    written, _ = await publish(ctx, where, current, body, ())
    return Result(requeue=True) if written is StatusWrite.CONFLICT else Result()
