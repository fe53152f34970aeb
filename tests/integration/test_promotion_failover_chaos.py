"""The short version of `bench/chaos.py` (ADR 0115): three controller replicas on the leader Lease,
the leader SIGKILLed at a handful of seeded moments of a Helm promotion (each time another replica
takes the Lease over), and the management API server killed and restarted mid-rollout. The rollout
completes; no gate is skipped, no stage starts out of order, every member's release is installed
once (revision 1).

The suite's fleet keeps the management cluster and the members in one etcd, so only the API server
is restarted here: an etcd restart would be a fault of every cluster at once. The benchmark restarts
both, on a fleet whose members have an etcd of their own.
"""

from __future__ import annotations

import datetime as dt
import os
import random
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest
import yaml
from lightkube import ApiError, Client
from lightkube.resources.coordination_v1 import Lease
from lightkube.resources.core_v1 import Secret
from lightkube.types import PatchType
from promotion_support import (
    ControllerProcess,
    chart_version,
    controller_replicas,
    deleted_after,
    registered,
    stage_phases,
    status,
    wait_for,
)
from test_promotion_chaos import StageWatch, doc

from fleetwave.kube import client as kubeclient
from fleetwave.kube import kinds
from fleetwave.local import api, binaries, chartrepo, fleet, processes
from fleetwave.mgmt import install, manifests

CHARTS = Path(__file__).resolve().parents[1] / "charts"
KILLS = 5


@pytest.fixture(scope="module")
def setup(local_fleet: fleet.FleetState, management: Client) -> Iterator[None]:
    with registered(management, local_fleet):
        yield


@pytest.fixture(scope="module")
def repo(bins: binaries.Binaries, tmp_path_factory: pytest.TempPathFactory) -> Iterator[chartrepo.ChartRepo]:
    with chartrepo.serve(
        bins.path("helm"), tmp_path_factory.mktemp("failover-charts"), [(CHARTS / "hello", "1.0.0")]
    ) as r:
        yield r


@pytest.fixture
def replicas(
    setup: None, local_fleet: fleet.FleetState, bins: binaries.Binaries, tmp_path: Path
) -> Iterator[list[ControllerProcess]]:
    names = [f"f{i}" for i in range(3)]
    with controller_replicas(
        local_fleet, bins.path("helm"), tmp_path, names, ("--lease-duration", "3")
    ) as group:
        yield group


class RestartProofWatch(StageWatch):
    """StageWatch that also rides out the management API server being down (connection refused)."""

    def _run(self) -> None:
        with kubeclient.client(kubeclient.config_from_file(self.kubeconfig)) as client:
            while not self._stop.is_set():
                try:
                    self._poll(client)
                except (ApiError, httpx2.HTTPStatusError, httpx2.TransportError):
                    pass
                except BaseException as e:
                    self.error = e
                    return
                time.sleep(0.1)


def holder(management: Client) -> str | None:
    try:
        lease = management.get(Lease, "fleetwave-controller", namespace=install.NAMESPACE)
    except Exception:  # not created yet, or the API server is restarting
        return None
    return lease.spec.holderIdentity if lease.spec else None


def revive(group: list[ControllerProcess]) -> None:
    """Restart a replica that exited (a lost lease ends the process), as its Deployment would."""
    for replica in group:
        if replica.proc is not None and replica.proc.poll() is not None:
            replica.start()


def live_leader(management: Client, group: list[ControllerProcess], *, not_: str = "") -> str | None:
    revive(group)
    current = holder(management)
    alive = {r.current_identity for r in group if r.proc is not None and r.proc.poll() is None}
    return current if current in alive and current != not_ else None


def kill_leader(management: Client, group: list[ControllerProcess]) -> None:
    leader = wait_for(lambda: live_leader(management, group), timeout=180, what="a live leader")
    victim = next(r for r in group if r.current_identity == leader)
    victim.kill()
    wait_for(lambda: live_leader(management, group, not_=leader), timeout=180, what="a follower taking over")


def restart_management_apiserver(state: fleet.FleetState) -> None:
    name = f"{fleet.MANAGEMENT}/apiserver"
    record = next(p for p in state.processes if p.name == name)
    argv = Path(f"/proc/{record.pid}/cmdline").read_bytes().decode().split("\0")[:-1]
    os.killpg(record.pid, signal.SIGKILL)
    processes.stop([record], grace=5)
    fresh = processes.start(name, argv, log=Path(record.log), marker=record.marker, env={"GOMAXPROCS": "2"})
    fleet.replace_processes(state, [name], [fresh])  # saved: the session's `down` stops the new one
    state.processes[state.processes.index(record)] = fresh  # and later modules find it
    server = state.cluster(fleet.MANAGEMENT).server
    wait_for(
        lambda: api.is_ready(server, Path(state.ca_cert), timeout=2.0), timeout=180, what="API server up"
    )


def test_leader_kills_and_a_management_restart_never_skip_a_gate_or_install_twice(
    replicas: list[ControllerProcess],
    management: Client,
    members: dict[str, Client],
    repo: chartrepo.ChartRepo,
    local_fleet: fleet.FleetState,
) -> None:
    name = "failover"
    rng = random.Random(46)
    manifests.apply(management, manifests.documents(yaml.safe_dump(doc(name, repo.url))))
    with deleted_after(management, name), RestartProofWatch(replicas[0].kubeconfig, name) as watch:
        applied = time.time()
        for _ in range(2):  # dev delivering, its delay
            time.sleep(rng.uniform(0.5, 3.0))
            kill_leader(management, replicas)
        wait_for(
            lambda: (
                live_leader(management, replicas)
                and stage_phases(management, name).get("dev") in ("WaitingAfter", "Succeeded")
            ),
            timeout=240,
            what="dev delivered",
        )
        restart_management_apiserver(local_fleet)  # mid-rollout: past dev, before production's gate
        for _ in range(KILLS - 3):
            time.sleep(rng.uniform(0.5, 3.0))
            kill_leader(management, replicas)
        wait_for(
            lambda: (
                live_leader(management, replicas)
                and stage_phases(management, name).get("staging") == "WaitingAfter"
            ),
            timeout=240,
            what="staging gate",
        )
        assert "production" not in watch.first_seen, "production was touched before its approval"
        approved_at = time.time()
        patch = [{"op": "replace", "path": "/spec/stages/1/trigger/manual/approved", "value": True}]
        management.patch(kinds.resource("ClusterPromotion"), name, patch, patch_type=PatchType.JSON)
        kill_leader(management, replicas)
        wait_for(
            lambda: (
                live_leader(management, replicas)
                and stage_phases(management, name).get("production") == "Succeeded"
            ),
            timeout=240,
            what="production done",
        )

        record = {s["name"]: s for s in status(management, name)["rollout"]["stages"]}
        t = {k: dt.datetime.fromisoformat(v["deliveredAt"].replace("Z", "+00:00")) for k, v in record.items()}
        started = {
            k: dt.datetime.fromisoformat(v["startedAt"].replace("Z", "+00:00")) for k, v in record.items()
        }
        assert started["staging"] - t["dev"] >= dt.timedelta(seconds=6), "the dev delay was cut short"
        assert watch.first_seen["dev"] >= applied - 1
        assert watch.first_seen["staging"] - watch.first_seen["dev"] >= 6 - 1
        assert watch.first_seen["production"] >= approved_at
        assert watch.error is None, watch.error
        for member, client in members.items():
            assert chart_version(client, name, name) == "1.0.0", member
            releases = client.list(Secret, namespace=name, labels={"owner": "helm", "name": name})
            assert [s.metadata.name for s in releases] == [f"sh.helm.release.v1.{name}.v1"], member
