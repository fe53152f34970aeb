"""Facts for analysis gates (ADR 0081): take the current stage's due measurements and hand the
engine every series.

Only while the stage's after-gates are judged (not while rolling back). The first measurement is
taken as soon as the stage is delivered, the next ones every `interval` (the engine wakes the
rollout when one is due); once a series passed (`count` taken, at most `failureLimit` failed) or
failed for good, no more are taken. A measurement — the query, then the successCondition — runs in
the sandbox worker; a query that cannot be answered is a failed measurement with its reason.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Sequence
from datetime import datetime
from typing import Any

from fleetwave.api.analyses import AnalysisGate
from fleetwave.api.meta import parse_duration
from fleetwave.api.webhooks import CLUSTER_PLACEHOLDER
from fleetwave.controllers.gates.webhook_gates import Owner
from fleetwave.controllers.shared.context import Context
from fleetwave.core import model as m

Facts = dict[tuple[str, str], dict[str, m.Measurements]]


async def measurements(
    ctx: Context,
    owner: Owner,
    stage: str,
    clusters: Sequence[str],
    gates: Sequence[AnalysisGate],
    now: datetime,
) -> Facts:
    """Every analysis of the stage, keyed (stage, name): its series by cluster ("" stage-wide)."""
    out: Facts = {}
    jobs: list[Coroutine[Any, Any, None]] = []
    for gate in gates:
        targets = list(clusters) if gate.per_cluster else [""]
        out[(stage, gate.name)] = {}
        jobs.extend(_series(ctx, owner, stage, gate, target, now, out) for target in targets)
    await asyncio.gather(*jobs)
    return out


async def _series(
    ctx: Context, owner: Owner, stage: str, gate: AnalysisGate, cluster: str, now: datetime, out: Facts
) -> None:
    key = (owner.kind, owner.namespace or "", owner.name, owner.revision, stage, gate.name, cluster)
    engine_gate = m.Analysis(gate.name, gate.count, gate.failure_limit, parse_duration(gate.interval))
    series = ctx.analyses.get(key) or m.Measurements(next_at=now)
    done = series.passed(engine_gate) or series.failed_for_good(engine_gate)
    if not done and series.next_at is not None and now >= series.next_at:
        query = gate.query.replace(CLUSTER_PLACEHOLDER, cluster) if gate.per_cluster else gate.query
        ok, why = await ctx.health.analysis_measurement(
            gate.prometheus.url,
            gate.prometheus.path,
            query,
            gate.success_condition,
            owner=f"{owner.kind}/{owner.namespace or ''}/{owner.name}",
        )
        taken, failed = series.taken + 1, series.failed + (0 if ok else 1)
        series = m.Measurements(taken, failed, series.last_failure if ok else why)
        more = not (series.passed(engine_gate) or series.failed_for_good(engine_gate))
        series = m.Measurements(
            taken, failed, series.last_failure, now + engine_gate.interval if more else None
        )
        ctx.analyses.put(key, series)
    out[(stage, gate.name)][cluster] = series
