"""Three controller replicas splitting rollouts over three shard Leases (ADR 0067), one SIGKILLed in the
middle of a rollout of its shard: the survivors take its shard over, every rollout completes, no
stage starts before the one before it succeeded and waited its delay, and every member's Helm
release stays at revision 1 (a release installed twice, or by two replicas at once, would not)."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from lightkube import Client
from lightkube.resources.coordination_v1 import Lease
from lightkube.resources.core_v1 import Secret
from promotion_support import (
    ControllerProcess,
    controller_replicas,
    deleted_after,
    registered,
    stage_phases,
    status,
    wait_for,
)

from fleetwave.local import binaries, chartrepo, fleet
from fleetwave.mgmt import install, manifests
from fleetwave.runtime import shards

CHARTS = Path(__file__).resolve().parents[1] / "charts"
SHARDS = 3
LEASE_SECONDS = 6
DEV_DELAY = 8


@pytest.fixture(scope="module")
def setup(local_fleet: fleet.FleetState, management: Client) -> Iterator[None]:
    with registered(management, local_fleet):
        yield


@pytest.fixture(scope="module")
def repo(bins: binaries.Binaries, tmp_path_factory: pytest.TempPathFactory) -> Iterator[chartrepo.ChartRepo]:
    with chartrepo.serve(
        bins.path("helm"), tmp_path_factory.mktemp("shard-charts"), [(CHARTS / "hello", "1.0.0")]
    ) as r:
        yield r


@pytest.fixture
def replicas(
    setup: None, local_fleet: fleet.FleetState, bins: binaries.Binaries, tmp_path: Path
) -> Iterator[list[ControllerProcess]]:
    extra = ("--shards", str(SHARDS), "--lease-duration", str(LEASE_SECONDS), "--health-workers", "2")
    names = [f"r{i}" for i in range(3)]
    with controller_replicas(local_fleet, bins.path("helm"), tmp_path, names, extra) as group:
        yield group


def holders(management: Client) -> dict[int, str]:
    out = {}
    for lease in management.list(Lease, namespace=install.NAMESPACE):
        for i in range(SHARDS):
            if lease.metadata.name == shards.lease_name("fleetwave", i, SHARDS) and lease.spec.holderIdentity:
                out[i] = lease.spec.holderIdentity
    return out


def names_covering_every_shard(per_shard: int) -> list[str]:
    picked: dict[int, list[str]] = {i: [] for i in range(SHARDS)}
    for n in range(100):
        name = f"sharded-{n}"
        bucket = picked[shards.shard_of(f"ClusterPromotion/{name}", SHARDS)]
        if len(bucket) < per_shard:
            bucket.append(name)
    return [name for bucket in picked.values() for name in bucket]


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
                {
                    "name": "dev",
                    "clusterSelector": {"matchLabels": {"env": "dev"}},
                    "trigger": {"auto": {"delay": f"{DEV_DELAY}s"}},
                },
                {
                    "name": "staging",
                    "clusterSelector": {"matchLabels": {"env": "staging"}},
                    "trigger": {"auto": {}},
                },
                {"name": "production", "clusterSelector": {"matchLabels": {"env": "prod"}}},
            ],
        },
    }


def release_revisions(member: Client, release: str) -> list[int]:
    """Revisions of a Helm release, from its storage Secrets (one per revision)."""
    found = member.list(Secret, namespace=release, labels={"owner": "helm", "name": release})
    return sorted(int(s.metadata.labels["version"]) for s in found)


def _time(value: str) -> dt.datetime:
    return dt.datetime.fromisoformat(value.replace("Z", "+00:00"))


def test_a_killed_replica_loses_its_shard_and_every_rollout_completes_in_stage_order(
    replicas: list[ControllerProcess],
    management: Client,
    members: dict[str, Client],
    repo: chartrepo.ChartRepo,
) -> None:
    spread = wait_for(
        lambda: (h := holders(management)) and len(h) == SHARDS and len(set(h.values())) == SHARDS and h,
        timeout=90,
        what="each replica holding one shard",
    )
    names = names_covering_every_shard(per_shard=1)
    victim_name = names[0]
    victim_shard = shards.shard_of(f"ClusterPromotion/{victim_name}", SHARDS)
    victim = next(r for r in replicas if r.current_identity == spread[victim_shard])
    docs = [manifests.documents(yaml.safe_dump(doc(n, repo.url))) for n in names]
    with contextlib.ExitStack() as cleanup:
        for name in names:
            cleanup.enter_context(deleted_after(management, name))
        for d in docs:
            manifests.apply(management, d)
        # Kill the holder of the first promotion's shard while its dev stage waits out its delay.
        wait_for(
            lambda: stage_phases(management, victim_name).get("dev") == "WaitingAfter",
            timeout=120,
            what=f"{victim_name}'s dev stage delivered and waiting out its delay",
        )
        victim.kill()
        killed_at = time.time()

        def taken_over() -> dict[int, str] | None:
            h = holders(management)
            return h if h.get(victim_shard) not in (None, victim.current_identity) else None

        after = wait_for(taken_over, timeout=60, what=f"shard {victim_shard} taken over by a survivor")
        took = time.time() - killed_at
        survivors = {r.current_identity for r in replicas if r is not victim}
        assert set(after.values()) <= survivors
        assert took < 2 * LEASE_SECONDS + 4, f"shard {victim_shard} was free only after {took:.1f}s"

        for name in names:
            wait_for(
                lambda name=name: stage_phases(management, name).get("production") == "Succeeded",
                timeout=240,
                what=f"{name} rolled out",
                explain=lambda name=name: json.dumps(status(management, name), indent=1, default=str),
            )
        for name in names:
            stages = {s["name"]: s for s in status(management, name)["rollout"]["stages"]}
            delivered = {k: _time(v["deliveredAt"]) for k, v in stages.items()}
            started = {k: _time(v["startedAt"]) for k, v in stages.items()}
            assert started["staging"] - delivered["dev"] >= dt.timedelta(seconds=DEV_DELAY), name
            assert started["production"] >= delivered["staging"], name
            for member in members.values():
                assert release_revisions(member, name) == [1], f"{name} was installed more than once"
    for replica in replicas:
        assert not replica.refusals(), replica.refusals()[:5]
