"""`fleetwave local` lifecycle: CLI views of the running fleet, recovery from a crash, clean shutdown."""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
from pathlib import Path

from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import ConfigMap
from typer.testing import CliRunner

from fleetwave.cli import app
from fleetwave.kube import client as kubeclient
from fleetwave.kube import kinds
from fleetwave.local import binaries, fleet, processes


def test_status_and_kubeconfig_describe_the_running_fleet(local_fleet: fleet.FleetState) -> None:
    runner = CliRunner()
    state_dir = ["--state-dir", local_fleet.state_dir]
    status = runner.invoke(app, ["local", "status", *state_dir])
    assert status.exit_code == 0, status.output
    for c in local_fleet.clusters:
        assert c.name in status.output
    mgmt = runner.invoke(app, ["local", "kubeconfig", *state_dir])
    assert mgmt.stdout.strip() == local_fleet.cluster(fleet.MANAGEMENT).kubeconfig
    member = runner.invoke(app, ["local", "kubeconfig", "member-2", *state_dir])
    assert member.stdout.strip() == local_fleet.cluster("member-2").kubeconfig
    unknown = runner.invoke(app, ["local", "kubeconfig", "nope", *state_dir])
    assert unknown.exit_code == 1
    assert "member-1" in unknown.output


def test_local_status_prints_names_and_data_as_kubectl_does(local_fleet: fleet.FleetState) -> None:
    runner = CliRunner()
    state_dir = ["--state-dir", local_fleet.state_dir]
    names = runner.invoke(app, ["local", "status", "-o", "name", *state_dir])
    assert names.stdout.split() == [f"cluster/{c.name}" for c in local_fleet.clusters]
    data = json.loads(runner.invoke(app, ["local", "status", "-o", "json", *state_dir]).stdout)
    assert [(row["cluster"], row["ready"]) for row in data] == [(c.name, True) for c in local_fleet.clusters]
    management = local_fleet.cluster(fleet.MANAGEMENT)
    assert data[0]["kubeconfig"] == management.kubeconfig
    assert management.token not in json.dumps(data)  # paths, never credentials


def test_up_recovers_from_a_crashed_fleet_and_down_leaves_no_process(
    tmp_path: Path, bins: binaries.Binaries
) -> None:
    members = {"solo": {"env": "dev"}}
    now = dt.datetime.now(dt.UTC)
    first = fleet.up(tmp_path, members=members, now=now, bin_dir=bins.directory)
    assert fleet.is_healthy(first)
    # Simulate a crash: the member's apiserver dies and nobody runs `down`.
    victim = next(p for p in first.processes if p.name == "solo/apiserver")
    os.killpg(victim.pid, signal.SIGKILL)
    processes.stop([victim], grace=1)
    assert not fleet.is_healthy(first)

    second = fleet.up(tmp_path, members=members, now=now, bin_dir=bins.directory)
    assert fleet.is_healthy(second)
    assert not any(processes.is_ours(p) for p in first.processes)
    # A healthy fleet with the same members is reused, not restarted.
    assert fleet.up(tmp_path, members=members, now=now, bin_dir=bins.directory) == second

    fleet.down(tmp_path)
    assert not any(processes.is_ours(p) for p in second.processes)
    assert not tmp_path.exists()


def test_a_fleet_mixes_full_and_light_members(tmp_path: Path, bins: binaries.Binaries) -> None:
    """A light member is an API server alone (it stores and serves content, nothing reconciles it);
    a full one also runs the workload controllers. `up` with another mix starts afresh."""
    members = {"full": {"env": "dev"}, "light": {"env": "prod"}}
    now = dt.datetime.now(dt.UTC)
    state = fleet.up(tmp_path, members=members, now=now, bin_dir=bins.directory, full_members=1)
    try:
        assert {c.name: c.profile for c in state.members} == {"full": fleet.FULL, "light": fleet.LIGHT}
        assert sorted(p.name for p in state.processes if p.name.startswith("light/")) == ["light/apiserver"]
        assert "full/kwok" in {p.name for p in state.processes}
        assert fleet.is_healthy(state)
        light = kubeclient.client(kubeclient.config_from_file(state.cluster("light").kubeconfig))
        assert "Deployment" in kinds.served_kinds(light, "apps/v1")
        light.create(ConfigMap(metadata=ObjectMeta(name="stored", namespace="default"), data={"a": "b"}))
        assert light.get(ConfigMap, "stored", namespace="default").data == {"a": "b"}
        light.close()
        assert fleet.load(tmp_path) == state
        again = fleet.up(tmp_path, members=members, now=now, bin_dir=bins.directory, full_members=2)
        assert {c.profile for c in again.members} == {fleet.FULL}  # another mix: started afresh
    finally:
        fleet.down(tmp_path)
