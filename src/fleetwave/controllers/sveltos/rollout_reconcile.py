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
from fleetwave.controllers.shared import engine_state, requeue
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
        return Result(requeue_after=1.0)
    await common.parse_ahead(ctx, rollout.kind, raw)
    try:
        prepared = rollout.prepare(ctx, raw)
    except common.INVALID as e:
        return await common.report_invalid(ctx, obj, raw, rollout.kind, str(e))
    await common.ensure_snapshot(ctx, prepared.resolved)
    spec = getattr(prepared.parsed, "spec", None)
    local = await local_content.deploy(ctx, rollout.kind, obj, raw, prepared.resolved, _profile_spec(spec))
    run = _start(ctx, key, obj, raw, prepared)
    observation = await rollout.observe(ctx, run)
    decision = engine.step(run.spec, run.fleet, observation.engine, run.now)
    await rollout.act(ctx, run, observation.facts, decision)
    status = {**rollout.status(run, observation.facts, decision), **local}
    if rollout.progress_only(raw.get("status") or {}, status):
        left = ctx.progress_due_in(rollout.kind, key)
        if left is not None:
            return _sooner(requeue.after(decision, ctx.clock()), left)
    # The event of this write wakes us again, on purpose: what the next pass observes depends on the
    # status just written (a stage's post-delay checks are judged once it says they are due).
    written, _ = await ctx.write_status(rollout.kind, Versioned.of_cached(obj), status)
    if written is StatusWrite.CONFLICT:
        return Result(requeue=True)  # someone wrote newer state: decide again from it
    ctx.record_rollout(rollout.kind, key, run.previous, decision.status)
    await rollout.after_status(ctx, run, decision)
    # From the clock now, not the pass's start: under load a pass lasts a second, and a deadline
    # counted from its start would fire that much late.
    result = requeue.after(decision, ctx.clock())
    if (local.get(local_content.STATUS_FIELD) or {}).get("errors") and not result.requeue:
        # Local content is retried (an admin may grant the rights it lacks) without delaying the
        # rollout's own timers.
        wait = min(result.requeue_after or LOCAL_RETRY, LOCAL_RETRY)
        return Result(requeue_after=wait)
    return result


def _sooner(result: Result, seconds: float) -> Result:
    """`result`, run again within `seconds` at the latest."""
    if result.requeue or (result.requeue_after is not None and result.requeue_after <= seconds):
        return result
    return Result(requeue_after=seconds)


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
