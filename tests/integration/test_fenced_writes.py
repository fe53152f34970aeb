"""Two replicas never both act (ADR 0115): the leader is paused (SIGSTOP) past its lease, the follower
takes over, and once the old leader is resumed (SIGCONT) it writes nothing — no request that changes
the management cluster or a member, no helm install — before it finds the lease gone and exits.

The follower is killed before the old leader resumes, and nothing else writes meanwhile, so every
write after the resume could only be the old leader's: the members' API servers log every request
(`local.audit`), and on the management cluster every object fleetwave writes records, per field
manager, the time of its last change (managedFields). The promotion is approved while the old
leader is stopped: on resuming it finds the approval in its watch and would start production.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from lightkube import Client
from lightkube.resources.coordination_v1 import Lease
from lightkube.resources.core_v1 import Event
from lightkube.types import PatchType
from promotion_support import (
    ControllerProcess,
    chart_version,
    controller_replicas,
    deleted_after,
    registered,
    stage_phases,
    wait_for,
)

from fleetwave.kube import kinds
from fleetwave.local import audit, binaries, chartrepo, fleet
from fleetwave.mgmt import install, manifests

CHARTS = Path(__file__).resolve().parents[1] / "charts"
LEASE_SECONDS = 3
WRITES = frozenset({"create", "update", "patch", "delete", "deletecollection"})


@pytest.fixture(scope="module")
def setup(local_fleet: fleet.FleetState, management: Client) -> Iterator[None]:
    with registered(management, local_fleet):
        yield


@pytest.fixture(scope="module")
def repo(bins: binaries.Binaries, tmp_path_factory: pytest.TempPathFactory) -> Iterator[chartrepo.ChartRepo]:
    with chartrepo.serve(
        bins.path("helm"), tmp_path_factory.mktemp("fence-charts"), [(CHARTS / "hello", "1.0.0")]
    ) as r:
        yield r


@pytest.fixture
def replicas(
    setup: None, local_fleet: fleet.FleetState, bins: binaries.Binaries, tmp_path: Path
) -> Iterator[list[ControllerProcess]]:
    extra = ("--lease-duration", str(LEASE_SECONDS))
    with controller_replicas(local_fleet, bins.path("helm"), tmp_path, ("fence-a", "fence-b"), extra) as pair:
        yield pair


def holder(management: Client) -> str | None:
    try:
        lease = management.get(Lease, "fleetwave-controller", namespace=install.NAMESPACE)
    except Exception:  # not yet created, or the server is warming up
        return None
    return lease.spec.holderIdentity if lease.spec else None


def doc(name: str, url: str) -> dict[str, Any]:
    chart = {
        "repositoryURL": url,
        "repositoryName": "local",
        "chartName": "local/hello",
        "chartVersion": "1.0.0",
        "releaseName": name,
        "releaseNamespace": name,
    }
    return {
        "apiVersion": "fleetwave.io/v1alpha1",
        "kind": "ClusterPromotion",
        "metadata": {"name": name},
        "spec": {
            "profileSpec": {"helmCharts": [chart]},
            "stages": [
                {"name": "dev", "clusterSelector": {"matchLabels": {"env": "dev"}}},
                {
                    "name": "staging",
                    "clusterSelector": {"matchLabels": {"env": "staging"}},
                    "trigger": {"manual": {"approved": False}},
                },
                {"name": "production", "clusterSelector": {"matchLabels": {"env": "prod"}}},
            ],
        },
    }


def stages_started(management: Client, name: str) -> set[str]:
    profiles = management.list(kinds.resource("ClusterProfile"), labels={"fleetwave.io/promotion": name})
    return {p.metadata.labels["fleetwave.io/stage"] for p in profiles}


def member_writes(state: fleet.FleetState, since: dt.datetime) -> list[str]:
    """Completed requests that change something, on any member, received at or after `since`
    (the API server's own bookkeeping, as system:apiserver, and kwok's node heartbeats left out)."""
    found = []
    for member in state.members:
        log = member.audit_log
        if not log.exists():
            continue
        for line in log.read_text(errors="replace").splitlines():
            try:
                event = json.loads(line)
                received = dt.datetime.fromisoformat(event["requestReceivedTimestamp"])
                user = event["user"]["username"]
            except (ValueError, KeyError, TypeError):
                continue
            if event.get("stage") != audit.COMPLETE or received < since or event.get("verb") not in WRITES:
                continue
            agent = str(event.get("userAgent", ""))
            if user.startswith("system:apiserver") or agent.startswith("kwok"):
                continue
            uri = event.get("requestURI")
            found.append(f"{member.name}: {event['verb']} {uri} by {user} ({agent}) at {received}")
    return found


def fleetwave_changes(management: Client, since: float) -> list[str]:
    """Objects whose fields fleetwave (any field manager of its own) changed at or after `since`."""
    cutoff = dt.datetime.fromtimestamp(math.floor(since), dt.UTC)
    objects: list[Any] = [
        o for k in ("ClusterPromotion", "ClusterProfile") for o in management.list(kinds.resource(k))
    ]
    for namespaced in ("ClusterSummary", "MemberCluster"):
        objects += list(management.list(kinds.resource(namespaced), namespace="*"))
    objects += list(management.list(Event, namespace="*"))
    found = []
    for obj in objects:
        for entry in obj.metadata.managedFields or []:
            manager = entry.manager if hasattr(entry, "manager") else entry.get("manager")
            when = entry.time if hasattr(entry, "time") else entry.get("time")
            if isinstance(when, str):
                when = dt.datetime.fromisoformat(when.replace("Z", "+00:00"))
            if manager and manager.startswith("fleetwave") and when is not None and when >= cutoff:
                found.append(f"{type(obj).__name__} {obj.metadata.name} by {manager} at {when}")
    return found


def test_a_leader_paused_past_its_lease_writes_nothing_once_resumed(
    replicas: list[ControllerProcess],
    management: Client,
    members: dict[str, Client],
    repo: chartrepo.ChartRepo,
    local_fleet: fleet.FleetState,
) -> None:
    name = "fenced"
    by_identity = {r.current_identity: r for r in replicas}
    first = wait_for(lambda: holder(management) in by_identity and holder(management), what="a leader")
    old, follower = by_identity[first], next(r for r in replicas if r.current_identity != first)
    manifests.apply(management, manifests.documents(yaml.safe_dump(doc(name, repo.url))))
    with deleted_after(management, name):
        wait_for(lambda: stage_phases(management, name).get("staging") == "WaitingAfter", what="staging gate")
        assert old.proc is not None
        assert follower.proc is not None
        os.kill(old.proc.pid, signal.SIGSTOP)
        wait_for(lambda: holder(management) == follower.current_identity, what="the follower taking over")
        follower.kill()
        patch = [{"op": "replace", "path": "/spec/stages/1/trigger/manual/approved", "value": True}]
        management.patch(kinds.resource("ClusterPromotion"), name, patch, patch_type=PatchType.JSON)
        time.sleep(2)  # the approval reaches the paused leader's watch; writes before here are not its
        resumed_at = time.time()
        resumed_wall = dt.datetime.now(dt.UTC)
        os.kill(old.proc.pid, signal.SIGCONT)
        try:
            code = old.proc.wait(60)
            log = old.log.read_text(errors="replace")
            assert code != 0, log[-3000:]
            assert "lost the lease" in log, log[-3000:]
            assert member_writes(local_fleet, resumed_wall) == []
            assert fleetwave_changes(management, resumed_at) == []
            assert "production" not in stages_started(management, name), "production was started"
            assert chart_version(members["member-3"], name, name) is None, "helm installed on production"
        finally:
            follower.start()  # a fresh replica finishes the rollout (and the clean-up)
        wait_for(
            lambda: stage_phases(management, name).get("production") == "Succeeded",
            timeout=180,
            what="production done by the new leader",
        )
        assert chart_version(members["member-3"], name, name) == "1.0.0"
    print(f"fenced writes refused by the resumed leader: {log.count('fenced write refused')}")
