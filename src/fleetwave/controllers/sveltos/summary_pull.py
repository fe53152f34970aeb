"""A ClusterSummary of a pull-mode member, on the hub (ADR 0106): the summary's delivery is written
as MemberWork for the member's agent, and the summary's status is the agent's report about the
work's current revision. The hub never connects to the member.

What the work carries is what the agent needs to deliver exactly as the controller would: the
summary's metadata and spec (its profile's spec, its revision's hash, its generation) and the
content rendered for this cluster. What the hub reads back is the summary's status, as the agent
computed it from its delivery (`summary_status.status_body`, run in the agent).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from fleetwave.api import pullmode
from fleetwave.controllers.fleet import pull, tenancy
from fleetwave.controllers.shared.context import Context
from fleetwave.controllers.shared.echoes import tracked
from fleetwave.controllers.sveltos import summary_status as ss
from fleetwave.kube.status import StatusWrite, Versioned, version_written
from fleetwave.runtime.controller import Result

log = logging.getLogger(__name__)

WORK_PREFIX = "summary"
# The safety net under the MemberWork watch (a report's event wakes the summary at once).
PULL_POLL_SECONDS = 30.0
# What of an agent's report becomes the summary's status: nothing else it might write.
STATUS_KEYS = (
    "dependencies",
    "observedContentHash",
    "featureSummaries",
    "deployedGVKs",
    "helmReleaseSummaries",
    "conditions",
    "failureMessage",
    "drift",
)

ContentOf = Callable[[Context, Mapping[str, Any], str], Awaitable[tuple[dict[str, Any], str] | ss.Outcome]]


def cluster_of(raw: Mapping[str, Any]) -> str:
    """The member key of the summary's cluster (a Cluster API cluster's is never a pull member's)."""
    return ss.cluster_of(raw.get("spec") or {})


def work_name(raw: Mapping[str, Any]) -> str:
    meta = raw["metadata"]
    return pullmode.work_name(WORK_PREFIX, f"{meta['namespace']}/{meta['name']}")


def owner(raw: Mapping[str, Any]) -> str:
    meta = raw["metadata"]
    return f"ClusterSummary/{meta['namespace']}/{meta['name']}"


def work_body(raw: Mapping[str, Any], body: Mapping[str, Any], *, withdraw: bool = False) -> dict[str, Any]:
    """The work for the summary `raw` delivering `body`: what the agent's delivery reads of the
    summary (never its status: the agent's own last report is its memory of what it delivered)."""
    summary = {
        "metadata": _handed_metadata(raw),
        "spec": raw.get("spec") or {},
        "content": dict(body),
    }
    return {"summary": summary, "withdraw": withdraw}


def _handed_metadata(raw: Mapping[str, Any]) -> dict[str, Any]:
    """What of the summary's metadata its agent reads (the rest is the hub's business)."""
    meta = raw["metadata"]
    return {
        "name": meta["name"],
        "namespace": meta["namespace"],
        "generation": meta.get("generation"),
        "labels": dict(meta.get("labels") or {}),
        "annotations": {
            k: v
            for k, v in (meta.get("annotations") or {}).items()
            if k.startswith(("projectsveltos.io/", "fleetwave.io/"))
        },
    }


def status_from(report: pull.Report, previous: Mapping[str, Any], rendered_for: str) -> dict[str, Any]:
    """The summary's status from the agent's report (known keys only), with the fingerprint of the
    cluster the hub rendered the content for (the agent does not know it)."""
    body = {k: report.outcome.get(k) for k in STATUS_KEYS}
    body["templateInputsHash"] = rendered_for or None
    if not isinstance(body.get("conditions"), list):
        body["conditions"] = previous.get("conditions")
    return body


TENANT_REFUSED = (
    "a tenant admin's profile is not delivered to pull members yet (ADR 0111): nothing was handed to "
    "the cluster's agent"
)


async def reconcile(
    ctx: Context, key: str, obj: Any, raw: Mapping[str, Any], wanted: str, content_of: ContentOf
) -> Result:
    """One pass for a pull member's summary: the work as wanted now, then the status its report says."""
    if tenancy.admin_of((raw.get("metadata") or {}).get("labels")) is not None:
        # Its agent would deliver with its own rights, not the tenant's: nothing is handed over.
        why = ss.Feature(ss.FEATURE_RESOURCES, "Failed", wanted, TENANT_REFUSED)
        outcome = ss.Outcome(wanted, features=(why,))
        return await _write(ctx, key, obj, raw, _status(ctx, raw, outcome), outcome.failed)
    if _reported_as_is(ctx, key, raw):
        return Result(requeue_after=PULL_POLL_SECONDS)
    found = await content_of(ctx, raw, wanted)
    if isinstance(found, ss.Outcome):  # no content to hand over: said as for any member
        return await _write(ctx, key, obj, raw, _status(ctx, raw, found), found.failed)
    body, rendered_for = found
    work = await pull.put(ctx, cluster_of(raw), work_name(raw), owner(raw), work_body(raw, body))
    _wait(ctx, key, work)
    got = pull.report(work)
    if got is None:
        return await _no_report(ctx, key, obj, raw, work)
    status = status_from(got, raw.get("status") or {}, rendered_for)
    failed = str(status.get("failureMessage") or "")
    result = await _write(ctx, key, obj, raw, status, failed)
    return result if result.requeue else Result(requeue_after=PULL_POLL_SECONDS)


def _reported_as_is(ctx: Context, key: str, raw: Mapping[str, Any]) -> bool:
    """Whether the work the cache holds was handed over for this summary as it is now, and the summary
    already says what its agent's current report says: then nothing is read, rendered or written (the
    events of the hub's own writes and of unchanged reports cost no content read). Templated content
    always goes the long way: the cluster it was rendered for may have changed."""
    previous = raw.get("status") or {}
    if previous.get("templateInputsHash"):
        return False
    name, namespace = work_name(raw), pullmode.hub_namespace(cluster_of(raw))
    current = ctx.cache.get("MemberWork", namespace, name) if "MemberWork" in ctx.cache.informers else None
    spec = (current or {}).get("spec") or {}
    if spec.get("withdraw") or (spec.get("summary") or {}).get("metadata") != _handed_metadata(raw):
        return False
    got = pull.report(pull.Put(namespace, name, str(spec.get("revision") or ""), current))
    if got is None or not _same(previous, status_from(got, previous, "")):
        return False
    _wait(ctx, key, pull.Put(namespace, name, str(spec.get("revision")), current))
    return True


async def _no_report(ctx: Context, key: str, obj: Any, raw: Mapping[str, Any], work: pull.Put) -> Result:
    """No report about the current revision. While the agent is connected it is at work (a long helm
    install takes what it takes, as for a push member): the summary keeps its status. An agent that
    is not connected is said in status, naming the member and its last report."""
    lease = pull.lease_of(ctx, cluster_of(raw))
    if pull.alive(lease, ctx.clock()):
        left = pull.seconds_left(lease, ctx.clock()) or PULL_POLL_SECONDS
        return Result(requeue_after=min(PULL_POLL_SECONDS, max(left, 1.0)))
    message = pull.waiting_message(cluster_of(raw), work, lease, ctx.clock())
    previous = raw.get("status") or {}
    outcome = ss.Outcome(str(previous.get("observedContentHash") or ""), unreachable=message)
    result = await _write(ctx, key, obj, raw, _status(ctx, raw, outcome), "")
    return result if result.requeue else Result(requeue_after=PULL_POLL_SECONDS)


def _status(ctx: Context, raw: Mapping[str, Any], outcome: ss.Outcome) -> dict[str, Any]:
    return ss.status_body(
        outcome,
        generation=raw["metadata"].get("generation"),
        now=ctx.clock(),
        previous=raw.get("status") or {},
    )


def _wait(ctx: Context, key: str, work: pull.Put) -> None:
    wake = ctx.wake("ClusterSummary", key)
    if wake is not None:
        ctx.reports.wait(work.key, wake.key, wake.call)


async def _write(
    ctx: Context, key: str, obj: Any, raw: Mapping[str, Any], status: Mapping[str, Any], failed: str
) -> Result:
    """Write the status when it differs from what the summary says; a Warning Event when it failed."""
    if _same(raw.get("status") or {}, status):
        return Result()
    kind = "ClusterSummary"
    write = ctx.write_status(kind, Versioned.of_cached(obj), status)
    written, _ = await tracked(ctx.echoes, (kind, key), kind, write, version_written)
    if written is StatusWrite.CONFLICT:
        return Result(requeue=True)
    if written is StatusWrite.WRITTEN and failed:
        await ctx.event(obj, True, "DeliveryFailed", failed)
    return Result()


def _same(previous: Mapping[str, Any], status: Mapping[str, Any]) -> bool:
    return all(previous.get(k) == v for k, v in status.items() if v is not None) and all(
        previous.get(k) is None for k, v in status.items() if v is None
    )


async def withdraw(
    ctx: Context, obj: Any, raw: Mapping[str, Any], body: Mapping[str, Any], leave: bool
) -> Result | None:
    """A pull member's summary is being deleted: its agent withdraws what it delivered (unless
    `leave`: LeavePolicies, or not fleetwave's). None once that is done and the work is gone; a
    Result while the agent has not reported the withdrawal. An agent that is not connected is not
    waited for (as with a push member that does not answer): its content is left in place."""
    cluster = cluster_of(raw)
    name, namespace = work_name(raw), pullmode.hub_namespace(cluster)
    lease = pull.lease_of(ctx, cluster)
    if not leave and not pull.alive(lease, ctx.clock()):
        message = f"cluster {cluster}: its agent is not connected; its content was left in place"
        await ctx.event(obj, True, "WithdrawSkipped", message)
        leave = True
    if leave:
        await pull.delete(ctx, namespace, name)
        ctx.reports.forget(f"{namespace}/{name}")
        return None
    work = await pull.put(ctx, cluster, name, owner(raw), work_body(raw, body, withdraw=True))
    got = pull.report(work)
    if got is not None and got.withdrawn:
        await pull.delete(ctx, namespace, name)
        ctx.reports.forget(work.key)
        return None
    _wait(ctx, f"{raw['metadata']['namespace']}/{raw['metadata']['name']}", work)
    if got is not None:  # the agent waits for preDeleteChecks or postDeleteChecks: it says why
        log.info("ClusterSummary %s: %s", owner(raw), got.outcome.get("failureMessage") or "withdrawing")
    return Result(requeue_after=PULL_POLL_SECONDS)
