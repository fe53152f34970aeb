"""Pure pieces of `local up --pull-members` and of the members' audit logs: which members join in
pull mode, what the state records, how the audit reader counts users."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fleetwave.cli import app
from fleetwave.cli.local import _role
from fleetwave.local import agents, audit, fleet
from fleetwave.local.processes import ProcessRecord

T0 = dt.datetime(2026, 11, 28, 12, 0, 0, tzinfo=dt.UTC)


def _event(user: str, at: dt.datetime, stage: str = audit.COMPLETE) -> str:
    stamp = at.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return json.dumps(
        {
            "kind": "Event",
            "stage": stage,
            "verb": "get",
            "user": {"username": user, "groups": ["system:authenticated"]},
            "requestReceivedTimestamp": stamp,
            "stageTimestamp": stamp,
        }
    )


def test_a_completed_request_at_or_after_since_counts_for_its_user() -> None:
    assert audit.completed_user(_event("alice", T0), T0) == "alice"
    assert audit.completed_user(_event("alice", T0 - dt.timedelta(microseconds=1)), T0) is None
    assert audit.completed_user(_event("alice", T0, stage="ResponseStarted"), T0) is None


@pytest.mark.parametrize("line", ["", "{", '{"stage": "ResponseComplete"}', "[1]", '"text"'])
def test_a_line_that_is_no_complete_event_counts_for_nobody(line: str) -> None:
    assert audit.completed_user(line, T0) is None


def test_users_counts_the_log_and_its_rotated_files_since_a_time(tmp_path: Path) -> None:
    log = tmp_path / audit.LOG_NAME
    log.write_text("\n".join([_event("agent", T0), _event("admin", T0), "{torn"]) + "\n")
    (tmp_path / "audit-2026-11-28T11-59-00.000.log").write_text(
        "\n".join([_event("agent", T0 + dt.timedelta(seconds=1)), _event("old", T0 - dt.timedelta(hours=1))])
    )
    (tmp_path / "apiserver.log").write_text(_event("not-audit", T0))
    assert audit.users(log, T0) == {"agent": 2, "admin": 1}
    assert audit.users(tmp_path / "missing" / audit.LOG_NAME, T0) == {}


def test_users_refuses_a_naive_time(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        audit.users(tmp_path / audit.LOG_NAME, T0.replace(tzinfo=None))


def test_audit_flags_name_the_policy_and_a_rotated_json_log(tmp_path: Path) -> None:
    policy = audit.write_policy(tmp_path / "policy.yaml")
    assert "level: Metadata" in policy.read_text()
    flags = audit.flags(policy, tmp_path / audit.LOG_NAME)
    assert f"--audit-policy-file={policy}" in flags
    assert f"--audit-log-path={tmp_path / audit.LOG_NAME}" in flags
    assert "--audit-log-format=json" in flags
    assert any(f.startswith("--audit-log-maxsize=") for f in flags)


def test_the_last_members_are_the_pull_ones() -> None:
    members = fleet.default_member_labels(3)
    wanted = fleet._wanted(members, full_members=2, pull_members=1)
    assert {name: (profile, pull) for name, (_, profile, pull) in wanted.items()} == {
        "member-1": (fleet.FULL, False),
        "member-2": (fleet.FULL, False),
        "member-3": (fleet.LIGHT, True),
    }
    assert not any(pull for _, _, pull in fleet._wanted(members, None, 0).values())


def test_up_refuses_more_pull_members_than_members_before_starting_anything(tmp_path: Path) -> None:
    with pytest.raises(fleet.FleetError, match="3 pull members"):
        fleet.up(tmp_path / "fleet", members=fleet.default_member_labels(2), now=T0, pull_members=3)
    assert not (tmp_path / "fleet").exists()
    result = CliRunner().invoke(
        app, ["local", "up", "--members", "1", "--pull-members", "2", "--state-dir", str(tmp_path / "f")]
    )
    assert result.exit_code == 2
    assert "--pull-members" in result.output
    assert not (tmp_path / "f").exists()


def _state(tmp_path: Path, processes: list[ProcessRecord]) -> fleet.FleetState:
    member = fleet.ClusterInfo("m", "member", 1, str(tmp_path / "m" / "kubeconfig"), "t", pull=True)
    push = fleet.ClusterInfo("p", "member", 2, str(tmp_path / "p" / "kubeconfig"), "t")
    return fleet.FleetState(str(tmp_path), "/bin", "/ca", 3, [member, push], processes)


def test_a_pull_member_without_a_live_agent_is_pending(tmp_path: Path) -> None:
    assert [c.name for c in agents.pending(_state(tmp_path, []))] == ["m"]
    gone = ProcessRecord(agents.process_name("m"), 2**22 + 1, "log", str(tmp_path))
    assert [c.name for c in agents.pending(_state(tmp_path, [gone]))] == ["m"]


def test_a_state_file_from_before_pull_members_loads_with_push_members(tmp_path: Path) -> None:
    state = _state(tmp_path, [])
    raw = dataclasses.asdict(state)
    for cluster in raw["clusters"]:
        del cluster["pull"]
    (tmp_path / "state.json").write_text(json.dumps(raw))
    loaded = fleet.load(tmp_path)
    assert loaded is not None
    assert [c.pull for c in loaded.clusters] == [False, False]


def test_status_marks_pull_and_light_members() -> None:
    member = fleet.ClusterInfo("m", "member", 1, "k", "t")
    assert _role(member) == "member"
    assert _role(dataclasses.replace(member, pull=True)) == "member (pull)"
    assert _role(dataclasses.replace(member, pull=True, profile=fleet.LIGHT)) == "member (light, pull)"
    assert _role(fleet.ClusterInfo(fleet.MANAGEMENT, "management", 1, "k", "t")) == "management"


def test_the_agents_member_kubeconfig_is_self_contained() -> None:
    member = fleet.ClusterInfo("m", "member", 4321, "k", "admin-token")
    doc = json.loads(agents._kubeconfig(member, b"PEM", "sa-token"))
    assert doc["clusters"][0]["cluster"]["server"] == "https://127.0.0.1:4321"
    assert doc["clusters"][0]["cluster"]["certificate-authority-data"] == "UEVN"
    assert doc["users"] == [{"name": agents.ACCOUNT, "user": {"token": "sa-token"}}]
    assert agents.username() == "system:serviceaccount:fleetwave-agent:fleetwave-agent"


def test_credentials_are_written_owner_only(tmp_path: Path) -> None:
    path = agents._write_private(tmp_path / "hub-kubeconfig", b"secret")
    assert path.read_bytes() == b"secret"
    assert path.stat().st_mode & 0o777 == 0o600
