"""The agent's lease on the hub (ADR 0106): one agent of a member acts at a time (a second one waits,
standing by), and its renewals are the member's heartbeat. The hub lists these leases by their
label, and reads the member's Kubernetes version and node count from their annotations: the hub
never asks the member itself."""

from __future__ import annotations

from typing import Any

from fleetwave.api import pullmode
from fleetwave.kube.objects import Lease, ObjectMeta
from fleetwave.runtime import leader

# Lease timing: a renewal every RETRY seconds is one write per member to the hub (100 members: six
# writes a second); an agent that stops renewing is taken for gone after DURATION.
DURATION = 40.0
RENEW_DEADLINE = 30.0
RETRY = 10.0


class AgentLease(leader.LeaderElector):
    """A leader lease that keeps fleetwave's label (the hub's informer selects by it) and carries the
    member's version and node count (`facts`, set by the agent's probe)."""

    def __init__(self, *args: Any, cluster: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.cluster = cluster
        self.facts: dict[str, str] = {}

    def _metadata(self, lease: Lease | None) -> dict[str, Any]:
        meta: dict[str, Any] = {
            "name": self.name,
            "namespace": self.namespace,
            "labels": {
                pullmode.LEASE_LABEL: "true",
                pullmode.MEMBER_LABEL: pullmode.member_label(self.cluster),
            },
            "annotations": dict(self.facts),
        }
        if lease is not None and lease.metadata is not None:
            meta["resourceVersion"] = lease.metadata.resourceVersion
        return meta

    async def _put(self, lease: Lease | None, spec: Any) -> Any:
        body = Lease(metadata=ObjectMeta(**self._metadata(lease)), spec=spec)
        if lease is None:
            return await self._api.create(body)
        return await self._api.replace(body)  # our resourceVersion: a concurrent writer gets a 409
