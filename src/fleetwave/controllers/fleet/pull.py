"""Pull-mode members on the hub side (ADR 0106): where a member's work lives, writing it, reading
the agent's reports, and the member's liveness from its agent's lease.

The hub never opens a connection to a pull member. What the engine decided for it is written as
a MemberWork into the member's namespace on the hub (`fleet-member-<name>`); the member's agent
carries it out and reports in the work's status. A report is read only when it names the work's
current revision: a stale agent's report about an older revision is never taken for this one.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from fleetwave.api.objects import Obj
from fleetwave.api.pullmode import (
    LEASE_NAME,
    MEMBER_LABEL,
    hub_namespace,
    member_label,
)
from fleetwave.controllers.fleet import members
from fleetwave.controllers.shared.context import Context
from fleetwave.core import timestamps
from fleetwave.kube import kinds, ops
from fleetwave.translate.common import split_key

FIELD_MANAGER = "fleetwave-controller"


def is_pull(member: Obj) -> bool:
    """Sveltos' `spec.pullMode: true`, or (KubeFleet-group members, whose schema has no such field)
    fleetwave's annotation that `cluster register --pull` writes."""
    return members.from_object(member).pull


def is_pull_member(ctx: Context, cluster_key: str) -> bool:
    """Whether the registered member `namespace/name` is in pull mode (False when unregistered, and
    for a Cluster API cluster: the hub always holds its kubeconfig)."""
    capi_cluster, namespace, name = split_key(cluster_key)
    if capi_cluster:
        return False
    found = ctx.cache.get("MemberCluster", namespace, name)
    return found is not None and is_pull(found)


def revision_of(spec: Mapping[str, Any]) -> str:
    canonical = json.dumps(spec, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:32]


@dataclass(frozen=True, slots=True)
class Report:
    """An agent's report about the work's current revision."""

    outcome: Mapping[str, Any]
    withdrawn: bool
    agent: str
    reported_at: str


@dataclass(frozen=True, slots=True)
class Put:
    """A work as the hub wants it now: where it is, its revision, and what the cache holds of it."""

    namespace: str
    name: str
    revision: str
    current: Obj | None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


async def put(ctx: Context, cluster_key: str, name: str, owner: str, body: Mapping[str, Any]) -> Put:
    """Write the work (server-side apply) unless the cache shows it as wanted already."""
    namespace = hub_namespace(cluster_key)
    spec: dict[str, Any] = {"cluster": cluster_key, "owner": owner, **body}
    spec["revision"] = revision = revision_of(spec)
    current = ctx.cache.get("MemberWork", namespace, name) if "MemberWork" in ctx.cache.informers else None
    if current is None or (current.get("spec") or {}).get("revision") != revision:
        await ops.apply(
            ctx.client,
            {
                "apiVersion": f"{kinds.GROUP}/{kinds.VERSION}",
                "kind": "MemberWork",
                "metadata": {
                    "name": name,
                    "namespace": namespace,
                    "labels": {MEMBER_LABEL: member_label(cluster_key)},
                },
                "spec": spec,
            },
            resource=kinds.resource("MemberWork"),
            field_manager=FIELD_MANAGER,
        )
    return Put(namespace, name, revision, current)


def report(work: Put) -> Report | None:
    """The agent's report, when it is about the revision the hub wants now."""
    status = (work.current or {}).get("status") or {}
    if (work.current or {}).get("spec", {}).get("revision") != work.revision:
        return None
    if status.get("observedRevision") != work.revision:
        return None
    outcome = status.get("outcome")
    return Report(
        outcome if isinstance(outcome, Mapping) else {},
        bool(status.get("withdrawn")),
        str(status.get("agent") or ""),
        str(status.get("reportedAt") or ""),
    )


def waiting_message(cluster_key: str, work: Put, lease: Obj | None, now: datetime) -> str:
    """Why a pull member's delivery has no verdict yet, naming the member and its last report."""
    status = (work.current or {}).get("status") or {}
    last = status.get("reportedAt") or _renewed(lease)
    seen = f"its last report was at {last}" if last else "it has not reported yet"
    if not alive(lease, now):
        return f"cluster {cluster_key}: its agent is not connected ({seen}); waiting for it"
    return f"cluster {cluster_key}: waiting for its agent to carry out revision {work.revision[:12]} ({seen})"


async def delete(ctx: Context, namespace: str, name: str) -> None:
    await ops.delete_if_exists(ctx.client, kinds.resource("MemberWork"), name, namespace=namespace)


# How long after the lease's last renewal an agent still counts as connected: the lease's own
# duration, plus a moment for the hub's watch to deliver the renewal.
_GRACE_SECONDS = 5.0


def lease_of(ctx: Context, cluster_key: str) -> Obj | None:
    if "Lease" not in ctx.cache.informers:
        return None
    return ctx.cache.get("Lease", hub_namespace(cluster_key), LEASE_NAME)


def alive(lease: Obj | None, now: datetime) -> bool:
    """Whether the member's agent renewed its lease within the lease's duration."""
    left = seconds_left(lease, now)
    return left is not None and left > 0


def seconds_left(lease: Obj | None, now: datetime) -> float | None:
    """Seconds until the agent's lease expires (negative: expired; None: never held)."""
    spec = (lease or {}).get("spec") or {}
    renewed = _when(spec.get("renewTime"))
    if renewed is None or not spec.get("holderIdentity"):
        return None
    duration = float(spec.get("leaseDurationSeconds") or 0)
    return (renewed - now).total_seconds() + duration + _GRACE_SECONDS


def _when(value: Any) -> datetime | None:
    """A lease time as the cache holds it (a datetime, or RFC 3339 text); None when unreadable."""
    if isinstance(value, datetime):
        return value
    try:
        return timestamps.parse_optional(value)
    except ValueError:
        return None


def _renewed(lease: Obj | None) -> str:
    return str(((lease or {}).get("spec") or {}).get("renewTime") or "")
