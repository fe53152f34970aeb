"""The one reconcile skeleton of the Sveltos-style rollout controllers (ClusterPromotion, ClusterProfile).

One pass: read the object from the cache -> parse and pin its content (an invalid spec is reported
in status and not retried) -> freeze what the engine decides from (fleet, previous record, now) ->
observe the kind's facts -> engine step (pure) -> carry out the effects -> one status write guarded
by resourceVersion -> after-write effects -> the requeue the decision asks for (`requeue.after`).

A kind plugs in through `Rollout`: how it parses, what it observes, how it acts, what its status says.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Generic, Protocol, TypeVar

from fleetwave.api.families import Family
from fleetwave.controllers.shared import engine_state, passes, requeue
from fleetwave.controllers.shared.context import Context, as_dict
from fleetwave.controllers.shared.status_writer import Whose
from fleetwave.controllers.sveltos import content, local_content
from fleetwave.controllers.sveltos import rollout_common as common
from fleetwave.core import effects as fx
from fleetwave.core import engine
from fleetwave.core import model as m
from fleetwave.core import status as st
from fleetwave.kube.status import StatusWrite, Versioned
from fleetwave.runtime.controller import Result

LOCAL_RETRY = 30.0  # seconds between attempts at Local content that failed
P = TypeVar("P")  # the kind's parsed API object
F = TypeVar("F")  # what the kind's effects and status need besides the engine's facts


@dataclass(frozen=True, slots=True)
class Prepared(Generic[P]):
    """A valid spec: the parsed object, its pinned content and the engine's view of it."""

    parsed: P
    resolved: content.Resolved
    spec: m.RolloutSpec
    # Clusters this rollout must not start on yet, and why (a profile's unmet dependsOn): the engine
    # sees them as not ready.
    held: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Pass(Generic[P]):
    """Everything one reconcile pass decides from, frozen at its start."""

    key: str
    obj: Any  # the cached version: its resourceVersion guards the status write
    raw: Mapping[str, Any]
    parsed: P
    resolved: content.Resolved
    spec: m.RolloutSpec
    fleet: m.Fleet
    previous: st.RolloutStatus | None
    now: datetime
    family: Family  # the API family the object is served in (its status names clusters that way)
    held: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def generation(self) -> int | None:
        generation: int | None = self.raw["metadata"].get("generation")
        return generation


@dataclass(frozen=True, slots=True)
class Observation(Generic[F]):
    engine: m.Observed
    facts: F


class Rollout(Protocol[P, F]):
    @property
    def kind(self) -> str: ...

    def prepare(self, ctx: Context, raw: Mapping[str, Any]) -> Prepared[P]:
        """Parse and resolve; raises one of `rollout_common.INVALID` for a spec that cannot run."""
        ...

    async def observe(self, ctx: Context, run: Pass[P]) -> Observation[F]: ...

    async def act(self, ctx: Context, run: Pass[P], facts: F, decision: fx.Decision) -> None: ...

    def status(self, run: Pass[P], facts: F, decision: fx.Decision) -> dict[str, Any]: ...

    def progress_only(self, previous: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
        """Whether the status `new` only reports progress over `previous`, nothing a decision reads:
        held back up to PROGRESS_EVERY seconds after this process's last write of it."""
        ...

    async def after_status(self, ctx: Context, run: Pass[P], decision: fx.Decision) -> None:
        """Effects that edit the decision's own inputs: only once the decision is recorded."""
        ...


async def reconcile(ctx: Context, key: str, rollout: Rollout[P, F]) -> Result:
    obj = ctx.cache.obj(rollout.kind, None, key)
    if obj is None or obj.metadata.deletionTimestamp:
        ctx.forget_rollout(rollout.kind, key)
        return Result()  # what a rollout generates is owned by it: garbage collection takes it
    raw = as_dict(obj)
    if ctx.statuses.behind(Whose(rollout.kind, key), raw["metadata"].get("resourceVersion")):
        # The cache predates our last status write: deciding from it would act on an old record (a
        # stage profile cut back to an earlier batch, a finished stage's verification redeployed).
        # The write's own informer event wakes us; the timer is a safety net for a watch that is down.
        return Result(requeue_after=1.0, poll=True)
    await common.parse_ahead(ctx, rollout.kind, raw)
    await common.fetch_ahead(ctx, rollout.kind, raw)
    try:
        prepared = rollout.prepare(ctx, raw)
    except common.INVALID as e:
        return await common.report_invalid(ctx, obj, raw, rollout.kind, str(e))
    except content.ContentPending as e:
        return await common.report_pending(ctx, obj, raw, rollout.kind, str(e))
    await common.ensure_snapshot(ctx, prepared.resolved)
    spec = getattr(prepared.parsed, "spec", None)
    local = await local_content.deploy(ctx, rollout.kind, obj, raw, prepared.resolved, _profile_spec(spec))
    run = _start(ctx, key, obj, raw, prepared)
    return await passes.drive(ctx, _SveltosPasses(ctx, run, rollout, local), Versioned.of_cached(obj))


class _SveltosPasses(Generic[P, F]):
    """A promotion's or profile's pass under the pass driver: act, then write what was done."""

    policy = passes.Policy.ACT_THEN_WRITE
    max_passes = 1  # the write's own event wakes the next pass: what it observes depends on it
    metered = True
    woken_by_every_change = True  # `watches`: a promotion's and a profile's own watches take every change

    def __init__(self, ctx: Context, run: Pass[P], rollout: Rollout[P, F], local: Mapping[str, Any]) -> None:
        self.ctx, self.run, self.rollout, self.local = ctx, run, rollout, local
        self.kind, self.key = rollout.kind, run.key

    async def observe(self, current: Versioned, now: datetime) -> Observation[F]:
        return await self.rollout.observe(self.ctx, self.run)

    def decide(self, observation: Observation[F], current: Versioned, now: datetime) -> passes.Decided[F]:
        run, rollout = self.run, self.rollout
        decision = engine.step(run.spec, run.fleet, observation.engine, run.now)
        body = {**rollout.status(run, observation.facts, decision), **self.local}
        quiet = rollout.progress_only(run.raw.get("status") or {}, body)
        return passes.Decided(observation.facts, decision, body, run.previous, progress_only=quiet)

    async def before_write(self, decided: passes.Decided[F]) -> None:
        await self.rollout.act(self.ctx, self.run, decided.step, decided.decision)

    async def after_write(self, decided: passes.Decided[F], written: StatusWrite) -> None:
        await self.rollout.after_status(self.ctx, self.run, decided.decision)

    async def act(self, decided: passes.Decided[F]) -> bool:
        return False  # acted before the write

    def requeue(self, decided: passes.Decided[F], now: datetime) -> Result:
        result = requeue.after(decided.decision, now)
        if (self.local.get(local_content.STATUS_FIELD) or {}).get("errors") and not result.requeue:
            # Local content is retried (an admin may grant the rights it lacks) without delaying
            # the rollout's own timers.
            sooner = min(result.requeue_after or LOCAL_RETRY, LOCAL_RETRY)
            return Result(requeue_after=sooner, poll=result.poll or sooner == LOCAL_RETRY)
        return result


def _profile_spec(spec: Any) -> Any:
    """The profile spec whose tier and continueOn* govern Local content: a ClusterProfile's spec, a
    ClusterPromotion's profileSpec."""
    return getattr(spec, "profile_spec", None) or spec


def _start(ctx: Context, key: str, obj: Any, raw: Mapping[str, Any], prepared: Prepared[P]) -> Pass[P]:
    return Pass(
        key=key,
        obj=obj,
        raw=raw,
        parsed=prepared.parsed,
        resolved=prepared.resolved,
        spec=prepared.spec,
        fleet=_holding(common.fleet_of(ctx.cache), prepared.held),
        previous=engine_state.previous_of(raw),
        now=ctx.clock(),
        family=ctx.family,
        held=prepared.held,
    )


def _holding(fleet: m.Fleet, held: Mapping[str, tuple[str, ...]]) -> m.Fleet:
    if not held:
        return fleet
    return m.Fleet.of(replace(c, ready=False) if c.name in held else c for c in fleet.by_name.values())
