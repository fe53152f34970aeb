"""The agent's reconcile of one MemberWork: check it is this member's and untampered, deliver it with
the controller's own delivery code, report in the work's status (ADR 0106).

A report names the revision it is about; the hub reads no other. The agent's previous report is its
memory of what it delivered (as a summary's status is the controller's), so a restarted agent picks
up where it was: what it delivered is re-applied once (server-side apply, idempotent), and judged.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from fleetwave.api import pullmode
from fleetwave.api.sveltos import ClusterProfileSpec
from fleetwave.controllers.agent import work_checks
from fleetwave.controllers.agent.member import Member, MemberConfigError
from fleetwave.controllers.kubefleet import executor, executor_pull
from fleetwave.controllers.shared.context import Context, Wake, as_dict
from fleetwave.controllers.shared.keys import SummaryKey
from fleetwave.controllers.shared.status_writer import Whose
from fleetwave.controllers.sveltos import summary
from fleetwave.controllers.sveltos import summary_status as ss
from fleetwave.controllers.sveltos.summary_memory import SummaryMemory
from fleetwave.core import timestamps
from fleetwave.delivery.target import MemberTarget
from fleetwave.kube import kinds
from fleetwave.kube.status import StatusWrite, Versioned
from fleetwave.runtime.controller import Result

log = logging.getLogger(__name__)


@dataclass
class Agent:
    """What the agent's reconciles share: the hub context (its client, the work cache, the member-side
    ports), the member it delivers to, and what it remembers of its deliveries."""

    ctx: Context
    member: Member
    namespace: str  # the member's namespace on the hub
    identity: str
    allowed_kinds: frozenset[str] | None = None  # --allow-kind; None: any the member's RBAC allows
    summaries: SummaryMemory = field(default_factory=SummaryMemory)
    deliveries: executor.DeliveryMemory = field(default_factory=executor.DeliveryMemory)
    enqueue: Callable[[str], None] = lambda _key: None

    def work_key_of_summary(self, summary_key: str) -> str:
        return f"{self.namespace}/{pullmode.work_name('summary', summary_key)}"


@dataclass(frozen=True, slots=True)
class Report:
    outcome: Mapping[str, Any]
    result: Result
    withdrawn: bool = False


async def reconcile(agent: Agent, key: str) -> Result:
    ctx = agent.ctx
    namespace, _, name = key.partition("/")
    obj = ctx.cache.obj("MemberWork", namespace, name)
    if obj is None:
        return Result()
    raw = as_dict(obj)
    if ctx.statuses.behind(_whose(key), raw["metadata"].get("resourceVersion")):
        return Result(requeue_after=1.0)  # our last report is not in the cache yet: its event wakes us
    refused = work_checks.refusal(raw, namespace=agent.namespace, cluster=agent.member.cluster)
    refused = refused or work_checks.kinds_refused(raw, agent.allowed_kinds)
    if refused:
        log.warning("MemberWork %s refused: %s", key, refused)
        outcome = work_checks.refused_outcome(refused, timestamps.fmt(ctx.clock()))
        return await _write(agent, obj, raw, Report(outcome, Result()))
    try:
        target = agent.member.target()
    except MemberConfigError as e:
        log.error("MemberWork %s: %s", key, e)
        return Result(requeue_after=summary.UNREACHABLE_RETRY)
    spec = raw["spec"]
    if spec.get("summary"):
        report = await _summary(agent, obj, raw, target)
    else:
        report = await _placement(agent, key, raw, target)
    return await _write(agent, obj, raw, report) if report is not None else Result()


def _whose(key: str) -> Whose:
    return Whose("MemberWork", key)


def _previous(raw: Mapping[str, Any]) -> dict[str, Any]:
    """The agent's last report of this work (whatever revision): its memory of what it delivered."""
    outcome = (raw.get("status") or {}).get("outcome")
    return dict(outcome) if isinstance(outcome, Mapping) else {}


async def _summary(agent: Agent, obj: Any, raw: Mapping[str, Any], target: MemberTarget) -> Report | None:
    """A ClusterSummary's delivery, exactly as the controller's for a push member."""
    ctx, spec = agent.ctx, raw["spec"]
    handed = spec["summary"]
    previous = _previous(raw)
    wanted_raw = {
        "metadata": handed.get("metadata") or {},
        "spec": handed.get("spec") or {},
        "status": previous,
    }
    body = handed.get("content") or {}
    if spec.get("withdraw"):
        waiting = await summary.withdraw(ctx, obj, wanted_raw, target, body)
        if waiting is None:
            return Report({**previous, "failureMessage": None}, Result(), withdrawn=True)
        return Report({**previous, "failureMessage": "deletion waits for its delete checks"}, waiting)
    meta = wanted_raw["metadata"]
    wanted = str((meta.get("annotations") or {}).get(ss.CONTENT_HASH_ANNOTATION, ""))
    generation = meta.get("generation")
    if ss.gave_up(previous, content_hash=wanted, generation=generation):
        return None  # maxConsecutiveFailures reached: a new revision retries
    same = agent.summaries.delivered_with(_summary_key(meta), summary.fingerprint(target))
    if _reported(raw) and summary.settled(wanted_raw, wanted, same_target=same) == "done":
        return None
    profile = ClusterProfileSpec.model_validate(wanted_raw["spec"].get("clusterProfileSpec") or {})
    outcome = await summary.deliver_body(ctx, agent.summaries, wanted_raw, target, profile, body, wanted)
    limit = profile.max_consecutive_failures
    status = ss.status_body(
        outcome, generation=generation, now=ctx.clock(), previous=previous, max_failures=limit
    )
    return Report(status, summary.requeue_for(ctx, wanted_raw, outcome))


def _summary_key(meta: Mapping[str, Any]) -> SummaryKey:
    return SummaryKey(str(meta.get("namespace")), str(meta.get("name")))


def _reported(raw: Mapping[str, Any]) -> bool:
    status = raw.get("status") or {}
    return bool(status.get("observedRevision")) and status.get("observedRevision") == raw["spec"].get(
        "revision"
    )


async def _placement(agent: Agent, key: str, raw: Mapping[str, Any], target: MemberTarget) -> Report | None:
    """A placement's delivery: apply and prune (once per revision), then availability."""
    ctx, spec = agent.ctx, raw["spec"]
    handed = spec["placement"]
    cluster, inventory = agent.member.cluster, str(handed.get("inventory") or "")
    found = frozenset(kinds.GVK(str(a), str(k)) for a, k in handed.get("kinds") or [])
    if spec.get("withdraw"):
        out = await executor.remove_from(agent.deliveries, target, cluster, inventory=inventory, kinds_=found)
        outcome = {"message": out.message}
        return Report(outcome, Result() if out.ok else Result(requeue=True), withdrawn=out.ok)
    objects = list(handed.get("objects") or [])
    rules = executor_pull.rules_of(handed.get("rules") or {})
    previous = _previous(raw) if _reported(raw) else {}
    if (previous.get("available") or {}).get("ok"):
        return None  # applied and available at this revision: nothing to do until the hub writes anew
    applied = previous.get("applied") if (previous.get("applied") or {}).get("ok") else None
    if applied is None:
        done = await executor.apply_to(
            ctx, agent.deliveries, target, cluster, objects, inventory=inventory, rules=rules, kinds_=found
        )
        applied = {"ok": done.ok, "message": done.message, "diffs": list(done.diffs)}
        if not done.ok:
            return Report({"applied": applied}, Result(requeue=True))
    if rules.report_diff:
        return Report(
            {"applied": applied, "available": {"ok": True, "message": applied["message"]}}, Result()
        )
    wake = Wake(("MemberWork", key), lambda: agent.enqueue(key))
    verdict = await executor.available_at(
        ctx, agent.deliveries, target, cluster, objects, wake=wake, inventory=inventory
    )
    available = {"ok": verdict.ok, "message": verdict.message}
    return Report(
        {"applied": applied, "available": available},
        Result(requeue_after=None if verdict.ok else ctx.judge_poll),
    )


async def _write(agent: Agent, obj: Any, raw: Mapping[str, Any], report: Report) -> Result:
    """Report in the work's status, unless it says what the last report said."""
    previous = raw.get("status") or {}
    revision = raw["spec"].get("revision")
    unchanged = (
        previous.get("observedRevision") == revision
        and previous.get("outcome") == dict(report.outcome)
        and bool(previous.get("withdrawn")) == report.withdrawn
    )
    if unchanged:
        return report.result
    key = f"{raw['metadata']['namespace']}/{raw['metadata']['name']}"
    held = _held_back(agent, key, previous, revision, report)
    if held is not None:
        return Result(requeue_after=held)
    status = {
        "observedRevision": revision,
        "agent": agent.identity,
        "reportedAt": timestamps.fmt(agent.ctx.clock()),
        "outcome": dict(report.outcome),
        "withdrawn": report.withdrawn or None,
    }
    written, _ = await agent.ctx.write_status("MemberWork", Versioned.of(obj), status)
    if written is StatusWrite.CONFLICT:
        return Result(requeue=True)
    return report.result


def _held_back(
    agent: Agent, key: str, previous: Mapping[str, Any], revision: Any, report: Report
) -> float | None:
    """A progress-only change of a summary's report (a health message while its verdict stays) is
    written at most every few seconds, as the controller does for push members (ADR 0068)."""
    old = previous.get("outcome")
    if (
        previous.get("observedRevision") != revision
        or not isinstance(old, Mapping)
        or "conditions" not in old
    ):
        return None
    if not ss.progress_only(old, report.outcome):
        return None
    return agent.ctx.progress_due_in("MemberWork", key)
