"""What every pass of an initialized run works with, and how a pass publishes what it decided.

A `Setting` is read once per reconcile from the cache: the frozen record's snapshot content, the
placement's current fleet, the engine spec. Each pass then renders the whole status from the record
and writes it once (guarded by the resourceVersion the pass started from), then announces events.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from fleetwave import translate
from fleetwave.api import conditions
from fleetwave.controllers.kubefleet import (
    apply_rules,
    overrides,
    parsed,
    run_rollback,
    run_status,
    snapshots,
)
from fleetwave.controllers.kubefleet import ledger as lg
from fleetwave.controllers.kubefleet import naming as nm
from fleetwave.controllers.kubefleet.run_record import RunRecord
from fleetwave.controllers.shared.context import Context, as_dict
from fleetwave.core import effects as fx
from fleetwave.core import model as m
from fleetwave.core import status as st
from fleetwave.core import timestamps as ts
from fleetwave.kube.status import StatusWrite, Versioned


@dataclass(frozen=True, slots=True)
class Setting:
    scope: nm.Scope
    obj: Any  # the run as last read: for events and owner references only
    run: parsed.Run
    frame: run_status.Frame
    spec: m.RolloutSpec
    fleet: m.Fleet
    content: lg.Content
    stuck_after: timedelta
    # Rolling back (ADR 0078): what a failure or a request would return to, a person's request, and
    # the content of the snapshot a rollback in progress returns to.
    target: m.RollbackTarget | None = None
    request: run_rollback.Request = run_rollback.NO_REQUEST
    back: lg.Content | None = None

    def delivering(self, rollout: st.RolloutStatus) -> lg.Content:
        """The content the engine's deliveries are of: the run's snapshot, or the rollback target's."""
        if rollout.rollback is not None:
            if self.back is None or self.back.hash != rollout.rollback.target:
                raise SnapshotGone(f"the snapshot rolled back to ({rollout.rollback.label}) was deleted")
            return self.back
        return self.content

    @property
    def seed_approval_names(self) -> dict[str, str]:
        """Seed 004's approval request names -> upstream's (ADR 0112)."""
        return translate.seed_approval_names(self.run.metadata.name, self.spec)


class SnapshotGone(Exception):
    """The run's resource snapshot was deleted: it cannot go on."""


def setting(ctx: Context, scope: nm.Scope, obj: Any, run: parsed.Run, record: RunRecord) -> Setting:
    namespace = run.metadata.namespace
    snap = ctx.cache.get(scope.snapshot, namespace, record.snapshot_name)
    if snap is None:
        raise SnapshotGone(f"resource snapshot {record.snapshot_name} was deleted")
    raw = ctx.cache.get(scope.placement, namespace, run.spec.placement_name)
    placement = parsed.placement(raw, scope.placement) if raw else None
    fleet, names = (
        parsed.fleet_of(ctx, placement)
        if placement
        else (m.Fleet.of(()), {})  # the placement is gone: nobody is awaited, the plan stays as frozen
    )
    content = lg.Content(
        index=record.index,
        hash=record.snapshot_hash,
        objects=snapshots.resources(snap),
        inventory=scope.inventory(namespace, run.spec.placement_name),
        rules=apply_rules.of(placement.spec if placement else None),
        overrides=overrides.pinned(ctx.cache, record.overrides, fleet),
        created=ts.parse_optional(placement.metadata.creation_timestamp) if placement else None,
    )
    frame = run_status.Frame(
        kind=scope.run,
        generation=run.metadata.generation,
        run=run.metadata.name,
        display=lambda c: names.get(c, c.partition("/")[2] or c),
    )
    spec = parsed.rollout_spec(
        run, scope, record.strategy, record.snapshot_hash, poll=timedelta(seconds=ctx.judge_poll)
    )
    stuck = parsed.stuck_after(run)
    where = Setting(scope, obj, run, frame, spec, fleet, content, stuck)
    return _rolling_back(ctx, where, record)


def _rolling_back(ctx: Context, where: Setting, record: RunRecord) -> Setting:
    """The rollback side of a setting, read only when a rollback may happen (it lists runs)."""
    request = run_rollback.request_of(as_dict(where.obj).get("metadata") or {})
    rollback = record.rollout.rollback
    if rollback is None and not request.reason and where.spec.on_failure is not m.OnFailure.ROLLBACK:
        return where
    namespace, placement = where.run.metadata.namespace, where.run.spec.placement_name
    existing = snapshots.of_placement(ctx.cache.list(where.scope.snapshot), placement, namespace)
    if rollback is not None:
        snap = run_rollback.by_hash(existing, rollback.target)
        return replace(where, request=request, back=_content_of(where, snap) if snap else None)
    if request.to_index is not None:
        target = run_rollback.by_index(existing, request.to_index, record.snapshot_hash)
    else:
        everywhere = ctx.cache.list(where.scope.run)
        runs = [r for r in everywhere if (r.get("metadata") or {}).get("namespace") == namespace]
        target = run_rollback.last_good(runs, existing, placement, record.snapshot_hash)
    if target is None:
        return replace(where, request=request)
    # The target's content too: a rollback that begins in this reconcile delivers in it.
    snap = snapshots.find(existing, target.index)
    back = _content_of(where, snap) if snap else None
    return replace(where, request=request, target=target.engine(), back=back)


def _content_of(where: Setting, snapshot: Mapping[str, Any]) -> lg.Content:
    """A snapshot's content, delivered under the run's inventory and apply rules."""
    return replace(
        where.content,
        index=str(snapshots.index_of(snapshot)),
        hash=snapshots.hash_of(snapshot),
        objects=snapshots.resources(snapshot),
    )


async def publish(
    ctx: Context, where: Setting, current: Versioned, body: Mapping[str, Any], events: Iterable[fx.Event]
) -> tuple[StatusWrite, Versioned]:
    """Write a one-pass status (a stopped or held run); once written, announce what it decided."""
    written, after = await ctx.write_status(where.scope.run, current, body)
    if written is not StatusWrite.CONFLICT:
        await announced(ctx, where, events, current.status, body)
    return written, after


async def announced(
    ctx: Context,
    where: Setting,
    events: Iterable[fx.Event],
    old: Mapping[str, Any],
    new: Mapping[str, Any],
    before: Callable[[], Awaitable[None]] | None = None,
) -> None:
    """Once a pass's status `new` (over `old`) is written: what `before` announces (an
    initialization the write carried), the pass's events, and a run newly stuck."""
    if before is not None:
        await before()
    for event in events:
        await ctx.event(where.obj, event.warning, event.reason, event.message)
    was, now = _progressing(old), _progressing(new)
    if now.get("reason") == "UpdateRunStuck" and was.get("reason") != "UpdateRunStuck":
        await ctx.event(where.obj, True, "UpdateRunStuck", str(now.get("message", "")))


def _progressing(status: Mapping[str, Any]) -> Mapping[str, Any]:
    return conditions.get(status, "Progressing")


def in_flight(rollout: st.RolloutStatus, ledger: lg.Ledger, fleet: m.Fleet) -> bool:
    """Clusters of the current stage that were started and are not done yet."""
    stage = rollout.current_stage
    if stage is None:
        return False
    return any(c in fleet.names and not (c in ledger and ledger[c].done_at) for c in stage.started)


def stuck(where: Setting, rollout: st.RolloutStatus, ledger: lg.Ledger, now: datetime) -> str:
    """Why the current stage makes no progress, or "" (a failed cluster, or one slow to be available)."""
    stage = rollout.current_stage
    if stage is None or stage.phase is not st.StagePhase.PROGRESSING:
        return ""
    if stage.failed:
        cluster, why = stage.failed[0]
        return f"cluster {cluster} failed: {why}; retrying"
    for cluster in stage.started:
        entry = ledger.get(cluster)
        if entry is None or entry.done_at or not entry.applied_at:
            continue
        if now - ts.parse(entry.applied_at) >= where.stuck_after:
            limit = where.stuck_after
            return f"cluster {cluster} has not become available for more than {limit}: {entry.message}"
    return ""
