"""`fleetwave local up --pull-members`: the last member joins in pull mode through an agent beside it,
the hub keeps no kubeconfig of it, the member's audit log names the agent, and `down` stops it.

One fleet for the module (a full push member, a light pull member), started through the CLI."""

from __future__ import annotations

import datetime as dt
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from lightkube import Client
from lightkube.resources.coordination_v1 import Lease
from lightkube.resources.core_v1 import Secret
from typer.testing import CliRunner

from fleetwave.api import pullmode
from fleetwave.cli import app
from fleetwave.kube import client as kubeclient
from fleetwave.kube import kinds, sync_ops
from fleetwave.local import agents, audit, binaries, fleet, processes
from fleetwave.mgmt import install, registration

PUSH, PULL = "member-1", "member-2"
PullFleet = tuple[fleet.FleetState, dt.datetime]


@pytest.fixture(scope="module")
def pull_fleet(tmp_path_factory: pytest.TempPathFactory, bins: binaries.Binaries) -> Iterator[PullFleet]:
    """The fleet as `local up` left it, and when it was asked for (for the audit logs)."""
    state_dir = tmp_path_factory.mktemp("pull-fleet")
    since = dt.datetime.now(dt.UTC)
    args = ["local", "up", "--members", "2", "--full-members", "1", "--pull-members", "1"]
    try:
        result = CliRunner().invoke(app, [*args, "--state-dir", str(state_dir)])
        assert result.exit_code == 0, result.output
        state = fleet.load(state_dir)
        assert state is not None
        yield state, since
    finally:
        fleet.down(state_dir)


@pytest.fixture(scope="module")
def hub(pull_fleet: PullFleet) -> Iterator[Client]:
    state, _ = pull_fleet
    client = kubeclient.client(kubeclient.config_from_file(state.cluster(fleet.MANAGEMENT).kubeconfig))
    yield client
    client.close()


def _agent(state: fleet.FleetState) -> processes.ProcessRecord:
    return next(p for p in state.processes if p.name == agents.process_name(PULL))


def test_up_starts_one_agent_for_the_pull_member_alone(pull_fleet: PullFleet) -> None:
    state, _ = pull_fleet
    assert {c.name: c.pull for c in state.members} == {PUSH: False, PULL: True}
    assert [p.name for p in state.processes if p.name.endswith("/agent")] == [agents.process_name(PULL)]
    assert processes.is_ours(_agent(state))
    pulled = Path(state.cluster(PULL).kubeconfig).parent
    for credential in (agents.HUB_KUBECONFIG, agents.MEMBER_KUBECONFIG):
        assert (pulled / credential).stat().st_mode & 0o777 == 0o600
    assert not (Path(state.cluster(PUSH).kubeconfig).parent / agents.HUB_KUBECONFIG).exists()
    for member in state.members:  # the admin kubeconfigs stay the members' own
        assert member.token in Path(member.kubeconfig).read_text()


def test_the_pull_member_is_registered_and_the_hub_keeps_no_kubeconfig_of_it(hub: Client) -> None:
    found = sync_ops.get(hub, kinds.resource("MemberCluster"), PULL, namespace=install.NAMESPACE)
    assert found is not None
    assert found.to_dict()["spec"]["pullMode"] is True
    assert sync_ops.get(hub, Secret, registration.secret_name(PULL), namespace=install.NAMESPACE) is None
    # A push member is left to `cluster register`, as without --pull-members.
    assert sync_ops.get(hub, kinds.resource("MemberCluster"), PUSH, namespace=install.NAMESPACE) is None


def test_the_agent_holds_its_members_lease(hub: Client) -> None:
    namespace = pullmode.hub_namespace(f"{install.NAMESPACE}/{PULL}")
    assert namespace == f"fleet-member-{PULL}"
    lease = hub.get(Lease, pullmode.LEASE_NAME, namespace=namespace)
    assert lease.spec is not None
    assert lease.spec.holderIdentity == agents.identity(PULL)


def test_status_counts_the_agent_with_its_member(pull_fleet: PullFleet) -> None:
    state, _ = pull_fleet
    runner = CliRunner()
    out = runner.invoke(app, ["local", "status", "-o", "json", "--state-dir", state.state_dir])
    assert out.exit_code == 0, out.output
    rows = {row["cluster"]: row for row in json.loads(out.stdout)}
    assert rows[PULL]["pull"] is True
    assert rows[PULL]["processes"] == {"alive": 2, "total": 2}  # its API server and its agent
    assert rows[PUSH]["pull"] is False
    table = runner.invoke(app, ["local", "status", "--state-dir", state.state_dir])
    assert "pull" in table.stdout


def test_the_members_audit_log_names_the_agent(pull_fleet: PullFleet) -> None:
    state, since = pull_fleet
    deadline = time.monotonic() + 60
    while not (seen := audit.users(state.cluster(PULL).audit_log, since))[agents.username()]:
        assert time.monotonic() < deadline, f"no request of the agent in the audit log; users: {seen}"
        time.sleep(0.5)
    assert "admin" in seen  # `local up` made the agent's account as the member's admin
    assert audit.users(state.cluster(PUSH).audit_log, since)[agents.username()] == 0


def test_down_stops_the_agent(pull_fleet: PullFleet) -> None:
    state, _ = pull_fleet
    result = CliRunner().invoke(app, ["local", "down", "--state-dir", state.state_dir])
    assert result.exit_code == 0, result.output
    assert "SIGKILL" not in result.output  # the agent stopped on SIGTERM
    assert not processes.is_ours(_agent(state))
    assert not Path(state.state_dir).exists()
