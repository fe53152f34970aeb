"""The web page's board (`ux.board`): tiles, stage colours, gates, Approve buttons, history and the
fleet overview, built from API objects alone (pure)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from ux_fixtures import HASH, promotion, summary

from fleetwave.ux import board

NOW = dt.datetime(2030, 1, 1, 0, 0, 10, tzinfo=dt.UTC)


def _waiting_for_approval() -> dict[str, Any]:
    """The fixture promotion moved on: dev done, staging waiting for its manual approval."""
    raw = promotion()
    rollout = raw["status"]["rollout"]
    rollout["phase"] = "Waiting"
    rollout["current"] = 1
    dev, staging, _ = rollout["stages"]
    dev.update(phase="Succeeded", started=list(dev["clusters"]), failed=[], gates=[])
    dev["succeededAt"] = "2030-01-01T00:00:05Z"
    staging.update(
        phase="WaitingBefore",
        gates=[{"kind": "Approval", "state": "Waiting", "message": "waiting for approval"}],
    )
    raw["status"]["conditions"] = [
        {
            "type": "Progressing",
            "status": "False",
            "reason": "Waiting",
            "message": "staging waits for approval",
        }
    ]
    return raw


def _stages(rollout: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {s["name"]: s for s in rollout["stages"]}


def test_a_promotion_draws_its_stages_with_tiles_gates_and_counts() -> None:
    ready = [summary(c) for c in ("ns/member-1",)]
    drawn = board.promotion(promotion(), ready, NOW)
    assert drawn["id"] == "ClusterPromotion/-/hello"
    assert drawn["revision"] == HASH
    dev = _stages(drawn)["dev"]
    tiles = {t["name"]: (t["state"], t["message"]) for t in dev["clusters"]}
    # member-1 delivered and ready, member-4's delivery failed, member-5 not started while the
    # stage's delay gate waits: that tile waits too.
    assert tiles == {
        "ns/member-1": ("healthy", "deployed and healthy"),
        "ns/member-4": ("failed", "helm: bad values"),
        "ns/member-5": ("waiting", ""),
    }
    assert dev["counts"] == {"pending": 0, "waiting": 1, "inflight": 0, "healthy": 1, "failed": 1}
    assert dev["state"] == "failed"  # a failed cluster colours the stage before anything else
    assert dev["gates"] == [
        {
            "kind": "Delay",
            "state": "Waiting",
            "message": "waiting for delay until 2030-01-01T00:00:30Z",
            "until": "2030-01-01T00:00:30Z",
        }
    ]
    assert dev["approve"] is None
    later = _stages(drawn)["production"]
    assert later["state"] == "pending"
    assert [t["state"] for t in later["clusters"]] == ["pending"]


def test_the_approve_button_appears_only_on_a_manual_stage_that_waits() -> None:
    waiting = board.promotion(
        _waiting_for_approval(), [summary(c) for c in ("ns/member-1", "ns/member-4", "ns/member-5")], NOW
    )
    stages = _stages(waiting)
    assert stages["staging"]["approve"] == {"stage": "staging"}
    assert stages["staging"]["state"] == "waiting"
    assert [t["state"] for t in stages["staging"]["clusters"]] == ["waiting"]
    assert stages["dev"]["state"] == "healthy"
    assert stages["dev"]["approve"] is None
    assert stages["production"]["approve"] is None
    assert waiting["waitingFor"] == "staging waits for approval"

    approved = _waiting_for_approval()
    approved["spec"]["stages"][1]["trigger"]["manual"]["approved"] = True
    assert _stages(board.promotion(approved, [], NOW))["staging"]["approve"] is None


def test_a_gate_that_passed_has_no_countdown() -> None:
    raw = promotion()
    raw["status"]["rollout"]["stages"][0]["gates"][0]["state"] = "Passed"
    [gate] = _stages(board.promotion(raw, [], NOW))["dev"]["gates"]
    assert gate["until"] is None


def test_promotion_history_comes_from_its_recorded_revisions() -> None:
    raw = promotion()
    raw["status"]["revisions"] = [
        {
            "revision": 1,
            "startedAt": "a",
            "endedAt": "b",
            "outcome": "Succeeded",
            "approvals": {"staging": "t1"},
        },
        {
            "revision": 2,
            "startedAt": "c",
            "outcome": "RolledBack",
            "rolledBackTo": "revision 1",
            "message": "prod failed",
        },
    ]
    history = board.promotion(raw, [], NOW)["history"]
    assert history == [
        {
            "revision": "1",
            "startedAt": "a",
            "endedAt": "b",
            "outcome": "Succeeded",
            "note": "approved staging at t1",
        },
        {
            "revision": "2",
            "startedAt": "c",
            "endedAt": None,
            "outcome": "RolledBack",
            "note": "rolled back to revision 1; prod failed",
        },
    ]


def _cond(type_: str, status: str, reason: str = "", message: str = "") -> dict[str, Any]:
    return {"type": type_, "status": status, "reason": reason, "message": message}


def _run(
    name: str = "web-2", placement: str = "web", created: str = "2030-01-01T00:00:00Z"
) -> dict[str, Any]:
    return {
        "kind": "StagedUpdateRun",
        "metadata": {"name": name, "namespace": "apps", "creationTimestamp": created},
        "spec": {"placementName": placement, "resourceSnapshotIndex": "2"},
        "status": {
            "resourceSnapshotIndexUsed": "2",
            "conditions": [
                _cond("Initialized", "True"),
                _cond("Progressing", "False", "UpdateRunWaiting", "waiting for approval of stage prod"),
            ],
            "rollout": {
                "startedAt": "2030-01-01T00:00:01Z",
                "current": 1,
                "stages": [
                    {"name": "canary", "phase": "Succeeded", "gates": []},
                    {
                        "name": "prod",
                        "phase": "WaitingBefore",
                        "gates": [
                            {"kind": "Approval", "state": "Waiting", "message": "waiting for approval"}
                        ],
                    },
                ],
            },
            "stagesStatus": [
                {
                    "stageName": "canary",
                    "clusters": [
                        {
                            "clusterName": "c1",
                            "conditions": [_cond("Started", "True"), _cond("Succeeded", "True")],
                        },
                        {
                            "clusterName": "c2",
                            "conditions": [
                                _cond("Started", "True"),
                                _cond("Succeeded", "False", "", "probe failed"),
                            ],
                        },
                        {
                            "clusterName": "c3",
                            "conditions": [_cond("Started", "True")],
                            "message": "applying",
                        },
                    ],
                },
                {
                    "stageName": "prod",
                    "clusters": [{"clusterName": "c4"}],
                    "beforeStageTaskStatus": [
                        {
                            "type": "Approval",
                            "approvalRequestName": "web-2-prod-before",
                            "conditions": [_cond("ApprovalRequestCreated", "True")],
                        }
                    ],
                },
            ],
        },
    }


def test_a_staged_run_draws_its_stages_from_its_status() -> None:
    older = _run("web-1", created="2029-12-31T00:00:00Z")
    older["status"]["conditions"] = [_cond("Initialized", "True"), _cond("Succeeded", "True")]
    other = _run("api-1", placement="api")
    drawn = board.run(_run(), [older, _run(), other])
    assert drawn["id"] == "StagedUpdateRun/apps/web-2"
    assert drawn["phase"] == "Waiting"
    assert drawn["revision"] == "snapshot 2"
    canary, prod = drawn["stages"]
    assert [(t["name"], t["state"], t["message"]) for t in canary["clusters"]] == [
        ("c1", "healthy", ""),
        ("c2", "failed", "probe failed"),
        ("c3", "inflight", "applying"),
    ]
    assert prod["approve"] == {"stage": "prod"}
    assert [t["state"] for t in prod["clusters"]] == ["waiting"]
    assert canary["approve"] is None
    # Its placement's runs, oldest first; the other placement's run is not its history.
    assert [h["revision"] for h in drawn["history"]] == ["web-1 (snapshot 2)", "web-2 (snapshot 2)"]
    assert [h["outcome"] for h in drawn["history"]] == ["Succeeded", "Progressing"]


def test_an_approval_request_not_created_yet_has_no_button() -> None:
    raw = _run()
    raw["status"]["stagesStatus"][1]["beforeStageTaskStatus"][0]["conditions"] = []
    assert board.run(raw, [raw])["stages"][1]["approve"] is None
    raw["status"]["stagesStatus"][1]["beforeStageTaskStatus"][0]["conditions"] = [
        _cond("ApprovalRequestCreated", "True"),
        _cond("ApprovalRequestApproved", "True"),
    ]
    assert board.run(raw, [raw])["stages"][1]["approve"] is None


def test_the_board_puts_rollouts_needing_a_person_first_and_lists_what_each_cluster_runs() -> None:
    members = [
        {"metadata": {"name": "member-1", "namespace": "ns", "labels": {"env": "dev"}}},
        {"metadata": {"name": "c4", "namespace": "fleet-system", "labels": {"env": "prod"}}},
        {"metadata": {"name": "idle", "namespace": "ns"}},
    ]
    done = promotion()
    done["metadata"]["name"] = "aaa-done"
    done["status"]["rollout"]["phase"] = "Succeeded"
    built = board.build(
        [done],
        [summary("ns/member-1", profile="aaa-done-dev")],
        [_run()],
        members,
        NOW,
        server="https://x:6443",
        problems=["p", "p"],
    )
    assert [r["id"] for r in built["rollouts"]] == [
        "StagedUpdateRun/apps/web-2",
        "ClusterPromotion/-/aaa-done",
    ]
    assert built["now"] == "2030-01-01T00:00:10Z"
    assert built["problems"] == ["p"]
    clusters = {(c["namespace"], c["name"]): c for c in built["clusters"]}
    assert clusters[("ns", "member-1")]["runs"] == [
        {"rollout": "ClusterPromotion/-/aaa-done", "stage": "dev", "state": "healthy"}
    ]
    assert clusters[("fleet-system", "c4")]["runs"] == [
        {"rollout": "StagedUpdateRun/apps/web-2", "stage": "prod", "state": "waiting"}
    ]
    assert clusters[("fleet-system", "c4")]["labels"] == {"env": "prod"}
    assert clusters[("ns", "idle")]["runs"] == []


def test_hostile_long_messages_are_cut() -> None:
    raw = promotion()
    raw["status"]["rollout"]["stages"][0]["failed"] = [{"cluster": "ns/member-4", "message": "x" * 10_000}]
    dev = _stages(board.promotion(raw, [], NOW))["dev"]
    message = next(t["message"] for t in dev["clusters"] if t["name"] == "ns/member-4")
    assert len(message) == board.MAX_MESSAGE
    assert message.endswith("…")
