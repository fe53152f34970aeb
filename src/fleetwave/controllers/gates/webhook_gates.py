"""Facts for webhook gates (ADR 0080): call the current stage's webhooks and hand the engine verdicts.

Only while the stage's after-gates are judged. A verdict stands for the webhook's `interval`: the
reconcile passes in between (every few seconds while the engine waits on facts) reuse it instead of
calling again. Calls run with bounded concurrency across the controller.

Trust boundary of `headersFrom.secretRef`: a namespaced StagedUpdateRun reads only its own namespace;
a cluster-scoped object reads a namespace the controller watches, never the controller's own (its
notification sink and snapshots live there) — the same boundary as a cluster-scoped profile's
content (ADR 0046, 0074). For every owner, the Secret must be of type `fleetwave.io/webhook-headers`
(whoever may write a run could otherwise send any Secret of a namespace to a URL of their choice)
and is never a member's kubeconfig. Messages name the Secret, never a value.
"""

from __future__ import annotations

import asyncio
import base64
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from fleetwave.api.meta import parse_duration
from fleetwave.api.webhooks import CLUSTER_PLACEHOLDER, WebhookGate
from fleetwave.controllers.fleet.boundary import content_boundary
from fleetwave.controllers.shared.context import Context, as_dict
from fleetwave.core import model as m
from fleetwave.core import status as st
from fleetwave.runtime import webhook

MAX_HEADERS = 32
_HEADER_NAME = re.compile(r"^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,64}$")
_RESERVED = frozenset({"host", "content-length", "content-type", "transfer-encoding", "connection"})


class SecretProblem(ValueError):
    """The headers Secret cannot be used; the message names the Secret (and a key), never a value."""


@dataclass(frozen=True, slots=True)
class Owner:
    """The rollout a webhook belongs to, as the call and the trust boundary need it."""

    kind: str
    name: str
    namespace: str | None  # None: cluster-scoped
    revision: str  # the content hash: a new revision calls afresh


async def verdicts(
    ctx: Context,
    owner: Owner,
    stage: str,
    clusters: Sequence[str],
    hooks: Sequence[WebhookGate],
    now: datetime,
) -> dict[tuple[str, str], m.HealthVerdict]:
    """One verdict per webhook of the stage, keyed (stage, webhook name)."""
    results = await asyncio.gather(*(_verdict(ctx, owner, stage, clusters, hook, now) for hook in hooks))
    return {(stage, hook.name): verdict for hook, verdict in zip(hooks, results, strict=True)}


async def _verdict(
    ctx: Context, owner: Owner, stage: str, clusters: Sequence[str], hook: WebhookGate, now: datetime
) -> m.HealthVerdict:
    try:
        headers = secret_headers(ctx, owner, hook)
    except SecretProblem as e:
        return m.HealthVerdict(False, message=str(e))
    targets: Sequence[str | None] = list(clusters) if hook.per_cluster else [None]
    outcomes = await asyncio.gather(
        *(_one(ctx, owner, stage, clusters, hook, headers, cluster, now) for cluster in targets)
    )
    failing = tuple(
        (cluster or "", why) for cluster, (ok, why) in zip(targets, outcomes, strict=True) if not ok
    )
    if not failing:
        return m.HealthVerdict(True)
    return m.HealthVerdict(False, failing[0][0], failing[0][1], failing)


async def _one(
    ctx: Context,
    owner: Owner,
    stage: str,
    clusters: Sequence[str],
    hook: WebhookGate,
    headers: Mapping[str, str],
    cluster: str | None,
    now: datetime,
) -> tuple[bool, str]:
    key = (owner.kind, owner.namespace or "", owner.name, owner.revision, stage, hook.name, cluster or "")
    memo = ctx.webhooks.recall(key, now)
    if memo is not None:
        return memo.ok, memo.message
    request = _request(owner, stage, clusters, hook, headers, cluster)
    answer = await ctx.webhooks.call(request)
    ok, why = webhook.judge_status(answer)
    if ok and hook.success_condition:
        assert answer.status is not None
        ok, why = await ctx.health.webhook_condition(
            hook.success_condition,
            answer.status,
            answer.body,
            owner=f"{owner.kind}/{owner.namespace or ''}/{owner.name}",
        )
    interval: timedelta = parse_duration(hook.interval)
    ctx.webhooks.remember(key, webhook.Memo(ok, why, now + interval))
    return ok, why


def _request(
    owner: Owner,
    stage: str,
    clusters: Sequence[str],
    hook: WebhookGate,
    headers: Mapping[str, str],
    cluster: str | None,
) -> webhook.Request:
    """The call of `hook` for `stage` (for one `cluster` when the hook is per cluster)."""
    payload = {
        "rollout": {"kind": owner.kind, "name": owner.name, "namespace": owner.namespace},
        "stage": stage,
        "webhook": hook.name,
        "revision": owner.revision,
        "clusters": list(clusters),
        **({"cluster": cluster} if cluster is not None else {}),
    }
    url = hook.url.replace(CLUSTER_PLACEHOLDER, cluster) if cluster is not None else hook.url
    return webhook.Request(
        url=url,
        method=hook.method,
        headers=headers,
        payload=payload,
        timeout=parse_duration(hook.timeout).total_seconds(),
        retries=hook.retries,
    )


# The type a Secret must have to be sent as webhook headers: its creator's word that it is meant for that.
HEADERS_SECRET_TYPE = "fleetwave.io/webhook-headers"


def secret_headers(ctx: Context, owner: Owner, hook: WebhookGate) -> dict[str, str]:
    """The headers `headersFrom` names, read from the informer cache within the trust boundary."""
    if hook.headers_from is None:
        return {}
    ref = hook.headers_from.secret_ref
    namespace = ref.namespace or owner.namespace
    where = f"Secret {namespace}/{ref.name}" if namespace else f"Secret {ref.name}"
    if namespace is None:
        raise SecretProblem(f"headersFrom {where}: a cluster-scoped {owner.kind} must name its namespace")
    if owner.namespace is not None and namespace != owner.namespace:
        raise SecretProblem(
            f"headersFrom {where}: a namespaced {owner.kind} reads Secrets only in its own "
            f"namespace ({owner.namespace})"
        )
    boundary = content_boundary(ctx)
    problem = boundary.namespace_problem(namespace) if owner.namespace is None else ""
    if not problem and (namespace, ref.name) in boundary.kubeconfig_secrets:
        problem = "a member's kubeconfig Secret is never sent anywhere"
    if problem:
        raise SecretProblem(f"headersFrom {where}: {problem}")
    obj = ctx.cache.obj("Secret", namespace, ref.name)
    if obj is None:
        raise SecretProblem(f"headersFrom {where}: not found")
    if as_dict(obj).get("type") != HEADERS_SECRET_TYPE:
        raise SecretProblem(
            f"headersFrom {where}: only a Secret of type {HEADERS_SECRET_TYPE} is sent as headers "
            "(create it with that type to say its values are meant for a webhook)"
        )
    data = as_dict(obj).get("data") or {}
    if len(data) > MAX_HEADERS:
        raise SecretProblem(f"headersFrom {where}: more than {MAX_HEADERS} keys")
    return {name: _header(where, name, raw) for name, raw in sorted(data.items())}


def _header(where: str, name: str, raw: str) -> str:
    """One header's value from a Secret's data, refused when it is not a header fleetwave may send."""
    if not _HEADER_NAME.match(name) or name.lower() in _RESERVED:
        raise SecretProblem(f"headersFrom {where}: key {name[:64]} is not a header fleetwave may send")
    try:
        value = base64.b64decode(raw, validate=True).decode("utf-8")
    except (ValueError, UnicodeDecodeError):
        raise SecretProblem(f"headersFrom {where}: key {name} is not UTF-8 text") from None
    if "\r" in value or "\n" in value or len(value) > 8192:
        raise SecretProblem(f"headersFrom {where}: the value of key {name} has a line break or is too long")
    return value


def judged_stage(rollout: st.RolloutStatus | None) -> tuple[str, list[str]] | None:
    """The stage whose after-gates are being judged (not during a rollback: a stage rolled back waits
    on its health checks only) and its clusters, set-aside ones left out; None otherwise. Webhooks and
    analyses (ADR 0080, 0081) are called for it only."""
    current = rollout.current_stage if rollout is not None else None
    if rollout is None or rollout.rollback is not None or current is None:
        return None
    if current.phase is not st.StagePhase.WAITING_AFTER:
        return None
    aside = {name for name, _ in current.set_aside}
    return current.name, [c for c in current.clusters if c not in aside]
