"""`fleetwave status` with no argument: one line per rollout, from the objects' status (pure)."""

from __future__ import annotations

from typing import Any

from fleetwave.ux import overview


def _promotion(name: str, record: dict[str, Any] | None, message: str = "") -> dict[str, Any]:
    status: dict[str, Any] = {}
    if record is not None:
        status["rollout"] = record
        status["conditions"] = [{"type": "Progressing", "status": "False", "message": message}]
    return {
        "apiVersion": "fleetwave.io/v1alpha1",
        "kind": "ClusterPromotion",
        "metadata": {"name": name},
        "status": status,
    }


def _run(name: str, namespace: str | None, **conds: tuple[str, str, str]) -> dict[str, Any]:
    conditions = [{"type": t, "status": s, "reason": r, "message": m} for t, (s, r, m) in conds.items()]
    meta = {"name": name, **({"namespace": namespace} if namespace else {})}
    kind = "StagedUpdateRun" if namespace else "ClusterStagedUpdateRun"
    record = {"current": 1, "stages": [{"name": "staging"}, {"name": "canary"}]}
    return {"kind": kind, "metadata": meta, "status": {"conditions": conditions, "rollout": record}}


STAGES = [{"name": "dev"}, {"name": "staging"}, {"name": "prod"}]


def test_a_waiting_promotion_names_its_stage_and_what_it_waits_for() -> None:
    waiting = _promotion(
        "kyverno", {"phase": "Waiting", "current": 1, "stages": STAGES}, "stage staging: waiting for approval"
    )
    [row] = overview.rows([waiting], [])
    assert row == {
        "kind": "ClusterPromotion",
        "apiVersion": "fleetwave.io/v1alpha1",  # `status -o wide` shows it
        "namespace": None,
        "name": "kyverno",
        "phase": "Waiting",
        "stage": "staging",
        "waitingFor": "stage staging: waiting for approval",
    }


def test_a_rolling_back_promotion_shows_the_rollback_stage_and_a_new_one_is_pending() -> None:
    record = {
        "phase": "RollingBack",
        "current": 2,
        "stages": STAGES,
        "rollback": {"current": 0, "stages": [{"name": "prod"}, {"name": "dev"}]},
    }
    rows = overview.rows([_promotion("web", record, "rolling back"), _promotion("new", None)], [])
    assert [(r["name"], r["phase"], r["stage"]) for r in rows] == [
        ("web", "RollingBack", "prod"),  # needs attention: first
        ("new", "Pending", ""),
    ]


def test_runs_read_their_conditions_and_attention_comes_first() -> None:
    runs = [
        _run("done", None, Initialized=("True", "x", ""), Succeeded=("True", "UpdateRunSucceeded", "")),
        _run(
            "held",
            "team-a",
            Initialized=("True", "x", ""),
            Progressing=("False", "UpdateRunWaiting", "waiting for after-stage tasks in stage canary"),
        ),
        _run(
            "back",
            None,
            Initialized=("True", "x", ""),
            Succeeded=("False", "UpdateRunRolledBack", "rolled back to resource snapshot 0: " + "x" * 400),
        ),
    ]
    rows = overview.rows([], runs)
    assert [(r["name"], r["namespace"], r["phase"], r["stage"]) for r in rows] == [
        ("held", "team-a", "Waiting", "canary"),
        ("back", None, "RolledBack", "canary"),
        ("done", None, "Succeeded", ""),
    ]
    assert len(rows[1]["waitingFor"]) == overview.MAX_MESSAGE
    assert rows[1]["waitingFor"].endswith("…")


def test_an_invalid_promotion_says_so_and_why_first() -> None:
    ready = {"type": "Ready", "status": "False", "reason": "InvalidSpec", "message": "stages[0].name: empty"}
    invalid = {"kind": "ClusterPromotion", "metadata": {"name": "bad"}, "status": {"conditions": [ready]}}
    rows = overview.rows([_promotion("new", None), invalid], [])
    assert [(r["name"], r["phase"], r["waitingFor"]) for r in rows] == [
        ("bad", "Invalid", "stages[0].name: empty"),
        ("new", "Pending", ""),
    ]
