"""A RollingUpdate placement carries its newest snapshot to every picked cluster itself, on the same
shape as a staged run: pass after pass, observe -> decide (pure) -> write status -> act.

One stage holding every picked cluster, at most maxUnavailable (rounded up) in flight; clusters no
longer picked lose the content right away. The ledgers are the runs' (`ledger`, `removals`), so the
placement's Available condition reads runs and rolling updates alike.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from fleetwave.controllers.kubefleet import apply_rules, history, parsed, snapshots
from fleetwave.controllers.kubefleet import ledger as lg
from fleetwave.controllers.kubefleet import overrides as ov
from fleetwave.controllers.kubefleet import removals as rm
from fleetwave.controllers.kubefleet.executor import DeliveryMemory
from fleetwave.controllers.shared import engine_state, passes, requeue
from fleetwave.controllers.shared.context import Context
from fleetwave.controllers.shared.status_writer import Whose
from fleetwave.core import batching, engine, timestamps
from fleetwave.core import effects as fx
from fleetwave.core import model as m
from fleetwave.core import overrides as co
from fleetwave.core import status as st
from fleetwave.kube.status import StatusWrite, Versioned
from fleetwave.runtime.controller import Result

PASSES = 2  # as a staged run's (run_execute.PASSES, ADR 0101)
Render = Callable[[Mapping[str, Any], datetime], dict[str, Any]]  # (status so far, now) -> full status


@dataclass(frozen=True, slots=True)
class Rolling:
    rollout: st.RolloutStatus | None
    ledger: lg.Ledger
    removals: rm.Removals

    def dump(self, content: lg.Content) -> dict[str, Any]:
        out = {"deliveries": lg.dump(self.ledger), "deletions": rm.dump(self.removals)}
        if self.rollout is not None:
            out["rollout"] = engine_state.dump(self.rollout)
        return {**out, "observedResourceIndex": content.index}


@dataclass(frozen=True, slots=True)
class Setting:
    kind: str
    spec: m.RolloutSpec
    fleet: m.Fleet
    content: lg.Content


def setting(
    kind: str,
    placement: parsed.Placement,
    latest: Mapping[str, Any],
    fleet: m.Fleet,
    inventory: str,
    *,
    poll: timedelta,
    overrides: ov.PerCluster = ov.NONE,
) -> Setting:
    rules = apply_rules.of(placement.spec)
    # An override edit is a new revision: the rollout goes round again (clusters it does not touch
    # keep their hash and are re-applied unchanged).
    digest = _revision(co.revision(snapshots.hash_of(latest), overrides.every), rules)
    rolling = placement.spec.strategy.rolling_update
    limit = max_unavailable(rolling.max_unavailable if rolling else "25%", len(fleet.names))
    spec = m.RolloutSpec(
        name=placement.metadata.name,
        revision=m.Revision(content_hash=digest, stages_hash=batching.compute_stages_hash(())),
        stages=(m.StageSpec("rollout", m.Selector(), max_in_flight=m.MaxInFlight(limit)),),
        poll_interval=poll,
    )
    index = str(snapshots.index_of(latest))
    created = timestamps.parse_optional(placement.metadata.creation_timestamp)
    objects = snapshots.resources(latest)
    return Setting(
        kind, spec, fleet, lg.Content(index, digest, objects, inventory, rules, overrides, created)
    )


def _revision(snapshot_hash: str, rules: apply_rules.ApplyRules) -> str:
    """The snapshot's hash, folded with the apply rules when they are not the defaults: editing the
    applyStrategy re-delivers the same snapshot under the new rules (a ReportDiff placement switched
    to apply does apply), as a content edit would."""
    if rules == apply_rules.DEFAULT:
        return snapshot_hash
    return hashlib.sha256(f"{snapshot_hash}\n{rules!r}".encode()).hexdigest()


def max_unavailable(raw: int | str, clusters: int) -> int:
    """maxUnavailable of the picked clusters; a percentage rounds up (upstream), at least 1."""
    if isinstance(raw, str) and raw.endswith("%"):
        return max(1, math.ceil(int(raw[:-1]) * clusters / 100))
    return max(1, int(raw))


def load(status: Mapping[str, Any]) -> Rolling:
    raw = status.get("rollout")
    return Rolling(
        engine_state.load(raw) if raw else None,
        lg.load(status.get("deliveries")),
        rm.load(status.get("deletions")),
    )


def departed(state: Rolling, fleet: m.Fleet) -> tuple[str, ...]:
    """Clusters holding the content that are no longer picked (pure)."""
    ledgers = [{"deliveries": lg.dump(state.ledger), "deletions": rm.dump(state.removals)}]
    return tuple(sorted(c for c in history.holding(ledgers) if c not in fleet.names))


async def roll(
    ctx: Context, memory: DeliveryMemory, where: Setting, current: Versioned, render: Render
) -> Result:
    rolling = _RollingPasses(ctx, memory, where, load(current.status), render, current)
    return await passes.drive(ctx, rolling, current)


@dataclass(frozen=True, slots=True)
class _Step:
    state: Rolling  # as decided, before its effects
    targets: tuple[str, ...]  # clusters to deliver to
    gone: tuple[str, ...]  # clusters no longer picked, to clear


class _RollingPasses:
    """A RollingUpdate placement under the pass driver: write the step, then act on it."""

    policy = passes.Policy.WRITE_THEN_ACT
    max_passes = PASSES
    metered = False  # a placement's rollout is not one of the rollout metrics (ADR 0082)
    woken_by_every_change = False  # a placement wakes on its spec, not on another's status write

    def __init__(
        self,
        ctx: Context,
        memory: DeliveryMemory,
        where: Setting,
        state: Rolling,
        render: Render,
        current: Versioned,
    ) -> None:
        self.ctx, self.memory, self.where, self.state, self.render = ctx, memory, where, state, render
        self.kind, self.key = Whose.of(where.kind, current.namespace, current.name)

    async def observe(self, current: Versioned, now: datetime) -> lg.Observation:
        ctx, where, state = self.ctx, self.where, self.state
        wake = lg.wake_of(ctx, where.kind, current)
        return await lg.observe(
            ctx, self.memory, state.rollout, where.fleet, state.ledger, where.content, wake
        )

    def decide(self, seen: lg.Observation, current: Versioned, now: datetime) -> passes.Decided[_Step]:
        where, state = self.where, self.state
        observed = m.Observed(delivery=dict(seen.deliveries), previous=state.rollout)
        decision = engine.step(where.spec, where.fleet, observed, now)
        decided = Rolling(decision.status, seen.ledger, state.removals)
        step = _Step(decided, _targets(decision), departed(decided, where.fleet))
        body = self.render(decided.dump(where.content), now)
        return passes.Decided(step, decision, body, state.rollout, pending=bool(step.targets or step.gone))

    async def before_write(self, decided: passes.Decided[_Step]) -> None:
        return None

    async def after_write(self, decided: passes.Decided[_Step], written: StatusWrite) -> None:
        return None

    async def act(self, decided: passes.Decided[_Step]) -> bool:
        step = decided.step
        self.state = await _act(self.ctx, self.memory, self.where, step.state, step.targets, step.gone)
        return self.state != step.state

    def requeue(self, decided: passes.Decided[_Step], now: datetime) -> Result:
        return requeue.after(decided.decision, now)  # counted from now: the pass itself took time


def _targets(decision: fx.Decision) -> tuple[str, ...]:
    return tuple(sorted({e.cluster for e in decision.effects if isinstance(e, fx.Deliver)}))


async def _act(
    ctx: Context,
    memory: DeliveryMemory,
    where: Setting,
    state: Rolling,
    targets: tuple[str, ...],
    gone: tuple[str, ...],
) -> Rolling:
    delivered = await lg.deliver(ctx, memory, targets, where.content)
    removed = await rm.remove(ctx, memory, gone, state.removals, where.content.inventory)
    return Rolling(state.rollout, lg.merged(state.ledger, delivered), {**state.removals, **removed})
