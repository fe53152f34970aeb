"""(Cluster)StagedUpdateRun reconcile: which phase the run is in, and nothing else.

A run is initialized once (`run_initialize`: the plan, snapshot and strategy are frozen into the
record in status), then driven in state Run (`run_execute`), halted in state Stop (`run_stop`), and
cleans up after its last stage (`run_delete`). Every phase starts from the record loaded from status
(`run_record`), so a restarted controller resumes where the last written pass left off.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from fleetwave.api import codec
from fleetwave.api.conditions import cond, find
from fleetwave.api.objects import Obj
from fleetwave.controllers.kubefleet import (
    approvals,
    parsed,
    run_execute,
    run_initialize,
    run_pass,
    run_record,
    run_rollback,
    run_stop,
    run_writes,
)
from fleetwave.controllers.kubefleet import naming as nm
from fleetwave.controllers.kubefleet.executor import DeliveryMemory
from fleetwave.controllers.shared.context import Context, as_dict
from fleetwave.core import status as st
from fleetwave.kube.status import StatusWrite, Versioned
from fleetwave.runtime.controller import Result


def terminal(status: Obj, meta: Obj | None = None) -> bool:
    """Over for good: initialization failed, or the run ended — unless a person asks to roll back a
    run that ended and has not been rolled back (ADR 0078)."""
    init, done = find(status, "Initialized"), find(status, "Succeeded")
    if init is not None and init.get("status") == "False":
        return True
    if done is None or done.get("status") not in ("True", "False"):
        return False
    wanted = run_rollback.request_of(meta or {}).reason
    return not wanted or done.get("reason") == "UpdateRunRolledBack"


async def reconcile(ctx: Context, memory: DeliveryMemory, scope: nm.Scope, key: str) -> Result:
    namespace, name = nm.split_key(key)
    obj = ctx.cache.obj(scope.run, namespace, name)
    if obj is None or obj.metadata.deletionTimestamp:
        ctx.forget_rollout(scope.run, key)
        return Result()  # approval requests are owned by the run: garbage collection removes them
    current = Versioned.of(obj)
    if run_writes.behind(ctx, scope, namespace, name, current.resource_version):
        # The cache predates our last status write: deciding from it would redeliver what that
        # write recorded as done, and its write would be refused. The write's informer event wakes
        # us; the timer is a safety net for a watch that is down.
        return Result(requeue_after=1.0)
    if terminal(current.status, as_dict(obj).get("metadata")):
        return Result()
    try:
        run = parsed.run(as_dict(obj), scope.run)
    except codec.ManifestError as e:
        return await run_initialize.failed(ctx, scope, obj, current, str(e))
    announce = None
    if not run_record.initialized(current.status):
        # A run that starts at once writes its plan with its first stage's start (one write).
        started = await run_initialize.start(ctx, scope, obj, run, current, defer=run.spec.state == "Run")
        if isinstance(started, Result):
            return started
        current, announce = started.current, (started.announce if started.deferred else None)
    return await _drive(ctx, memory, scope, obj, run, current, announce)


async def _drive(
    ctx: Context,
    memory: DeliveryMemory,
    scope: nm.Scope,
    obj: Any,
    run: parsed.Run,
    current: Versioned,
    announce: Callable[[], Awaitable[None]] | None = None,
) -> Result:
    try:
        record = run_record.load(current.status)
        where = run_pass.setting(ctx, scope, obj, run, record)
    except (run_record.Unreadable, run_pass.SnapshotGone) as e:
        return await _fail(ctx, scope, obj, current, str(e))
    if run.spec.state == "Stop":
        return await run_stop.stop(ctx, memory, where, record, current)
    if run.spec.state != "Run":
        return await run_stop.hold(ctx, where, record, current)
    raw = approvals.of_run(ctx, scope, run.metadata.namespace, run.metadata.name)
    try:
        return await run_execute.execute(
            ctx,
            memory,
            where,
            record,
            current,
            run_execute.requests_of(raw, where.seed_approval_names),
            announce=announce,
        )
    except run_pass.SnapshotGone as e:  # the snapshot a rollback returns to was pruned meanwhile
        return await _fail(ctx, scope, obj, current, str(e))


async def _fail(ctx: Context, scope: nm.Scope, obj: Any, current: Versioned, why: str) -> Result:
    """The run cannot go on (its snapshot was deleted, its record damaged): it fails for good."""
    gen, at, prev = obj.metadata.generation, st.fmt(ctx.clock()), current.status.get("conditions")
    conditions = [c for c in prev or [] if c.get("type") == "Initialized"]
    conditions += [
        cond(prev, "Progressing", "False", "UpdateRunFailed", why, gen, at),
        cond(prev, "Succeeded", "False", "UpdateRunFailed", why, gen, at),
    ]
    written, _ = await ctx.write_status(scope.run, current, {**current.status, "conditions": conditions})
    if written is StatusWrite.CONFLICT:
        return Result(requeue=True)  # judged on a status that moved on: judge again
    await ctx.event(obj, True, "UpdateRunFailed", why)
    return Result()
