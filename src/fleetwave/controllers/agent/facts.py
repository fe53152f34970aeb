"""The member's facts the hub shows (Kubernetes version, node count), probed by the agent and carried
on its lease: the hub never asks the member (ADR 0106)."""

from __future__ import annotations

import logging

from fleetwave.api import pullmode
from fleetwave.controllers.agent.lease import AgentLease
from fleetwave.controllers.agent.member import Member, MemberConfigError
from fleetwave.mgmt import registration
from fleetwave.runtime.controller import Result

log = logging.getLogger(__name__)

KEY = "member"
EVERY_SECONDS = 60.0


async def refresh(member: Member, lease: AgentLease) -> Result:
    """Probe the member (`/readyz`, `/version`, one node listed) and note what it said on the lease,
    which its next renewal writes."""
    try:
        probe = await registration.probe_pooled(member.target())
    except MemberConfigError as e:
        log.error("cannot reach the member: %s", e)
        return Result(requeue_after=EVERY_SECONDS)
    if not probe.ready:
        log.warning("member %s: %s", member.cluster, probe.message)
    found = {}
    if probe.version:
        found[pullmode.VERSION_ANNOTATION] = probe.version
    if probe.nodes is not None:
        found[pullmode.NODES_ANNOTATION] = str(probe.nodes)
    lease.facts = {**lease.facts, **found}
    return Result(requeue_after=EVERY_SECONDS)
