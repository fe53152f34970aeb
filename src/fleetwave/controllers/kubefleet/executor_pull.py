"""A placement's delivery to a pull-mode member (ADR 0106): written as MemberWork for the member's
agent, whose report about the work's current revision is the apply's and the availability's
outcome. The hub never connects to the member.

The work carries what `executor.apply` and `executor.available` would use: the objects rendered
for the cluster (overrides applied), the inventory, the apply strategy and the kinds a prune
searches. The agent applies, prunes and judges availability in the member, and reports each.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fleetwave.api import pullmode
from fleetwave.controllers.fleet import pull
from fleetwave.controllers.kubefleet import apply_rules
from fleetwave.controllers.shared.context import Context, Wake
from fleetwave.delivery.manifests import ApplyPolicy

WORK_PREFIX = "placement"


@dataclass(frozen=True, slots=True)
class Outcome:
    ok: bool
    message: str
    diffs: tuple[dict[str, Any], ...] = ()  # ReportDiff: upstream's diffedPlacements entries
    # `available` only: the apply itself failed (a pull member's agent reported it), not "not yet".
    failed: bool = False


def work_name(inventory: str) -> str:
    return pullmode.work_name(WORK_PREFIX, inventory)


def rules_body(rules: apply_rules.ApplyRules) -> dict[str, Any]:
    policy = rules.policy
    return {
        "stopOnError": policy.stop_on_error,
        "stopOnConflict": policy.stop_on_conflict,
        "takeOver": policy.take_over,
        "force": policy.force,
        "reportDiff": rules.report_diff,
    }


def rules_of(body: Mapping[str, Any]) -> apply_rules.ApplyRules:
    """The apply strategy a work carries (the agent's side of `rules_body`)."""
    policy = ApplyPolicy(
        stop_on_error=bool(body.get("stopOnError", False)),
        stop_on_conflict=bool(body.get("stopOnConflict", False)),
        take_over=body.get("takeOver") or "Always",
        force=bool(body.get("force", True)),
    )
    return apply_rules.ApplyRules(policy, report_diff=bool(body.get("reportDiff", False)))


def work_body(
    objects: Sequence[Mapping[str, Any]],
    inventory: str,
    rules: apply_rules.ApplyRules,
    kind_names: list[list[str]],
    *,
    withdraw: bool = False,
) -> dict[str, Any]:
    placement = {
        "inventory": inventory,
        "objects": [dict(o) for o in objects],
        "rules": rules_body(rules),
        "kinds": kind_names,
    }
    return {"placement": placement, "withdraw": withdraw}


async def _exchange(
    ctx: Context, cluster: str, body: Mapping[str, Any], inventory: str
) -> tuple[pull.Put, pull.Report | None]:
    work = await pull.put(ctx, cluster, work_name(inventory), f"placement/{inventory}", body)
    return work, pull.report(work)


async def apply(
    ctx: Context,
    cluster: str,
    objects: Sequence[Mapping[str, Any]],
    inventory: str,
    rules: apply_rules.ApplyRules,
    kind_names: list[list[str]],
) -> Outcome:
    """Hand the objects to the member's agent: "applied" as far as the hub goes until the agent
    reports (its verdict on the apply is read by `available`)."""
    body = work_body(objects, inventory, rules, kind_names)
    _work, got = await _exchange(ctx, cluster, body, inventory)
    if got is None:
        return Outcome(True, f"handed to the agent of cluster {cluster}")
    return _applied(got)


def _applied(got: pull.Report) -> Outcome:
    applied = got.outcome.get("applied")
    applied = applied if isinstance(applied, Mapping) else {}
    diffs = applied.get("diffs")
    entries = tuple(d for d in diffs if isinstance(d, dict)) if isinstance(diffs, list) else ()
    return Outcome(bool(applied.get("ok")), str(applied.get("message") or "no report of the apply"), entries)


async def available(
    ctx: Context,
    cluster: str,
    objects: Sequence[Mapping[str, Any]],
    inventory: str,
    rules: apply_rules.ApplyRules,
    kind_names: list[list[str]],
    wake: Wake | None,
) -> Outcome:
    """The agent's verdict about the current revision: its apply failed (`failed`), or whether every
    object is available; "not yet" with the member's last report while it has not reported."""
    work, got = await _exchange(ctx, cluster, work_body(objects, inventory, rules, kind_names), inventory)
    if wake is not None:
        ctx.reports.wait(work.key, wake.key, wake.call)
    if got is None:
        return Outcome(False, pull.waiting_message(cluster, work, pull.lease_of(ctx, cluster), ctx.clock()))
    applied = _applied(got)
    if not applied.ok:
        return Outcome(False, applied.message, applied.diffs, failed=True)
    verdict = got.outcome.get("available")
    verdict = verdict if isinstance(verdict, Mapping) else {}
    return Outcome(bool(verdict.get("ok")), str(verdict.get("message") or "waiting for availability"))


async def remove(ctx: Context, cluster: str, inventory: str, kind_names: list[list[str]]) -> Outcome:
    """The agent removes the placement's content; the work goes once it reported that. An agent that
    is not connected leaves it in place, as a member that left the fleet does."""
    name, namespace = work_name(inventory), pullmode.hub_namespace(cluster)
    if not pull.alive(pull.lease_of(ctx, cluster), ctx.clock()):
        await pull.delete(ctx, namespace, name)
        ctx.reports.forget(f"{namespace}/{name}")
        return Outcome(True, f"cluster {cluster}: its agent is not connected; its content was left in place")
    body = work_body((), inventory, apply_rules.DEFAULT, kind_names, withdraw=True)
    work, got = await _exchange(ctx, cluster, body, inventory)
    if got is not None and got.withdrawn:
        await pull.delete(ctx, namespace, name)
        ctx.reports.forget(work.key)
        return Outcome(True, str(got.outcome.get("message") or "removed"))
    return Outcome(False, pull.waiting_message(cluster, work, pull.lease_of(ctx, cluster), ctx.clock()))
