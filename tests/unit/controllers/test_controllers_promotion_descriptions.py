"""ClusterPromotion stage descriptions in the words Sveltos prints (seed 002)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from fleetwave.controllers.sveltos import promotion_status as ps
from fleetwave.core import status as st

T0 = dt.datetime(2026, 2, 16, 6, 28, 24, tzinfo=dt.UTC)


def test_a_succeeded_stage_says_successfully_provisioned_with_its_time() -> None:
    stage = st.StageStatus(
        "dev", ("dev/dev",), 1, phase=st.StagePhase.SUCCEEDED, started_at=T0, succeeded_at=T0
    )
    assert ps.describe(stage) == "Successfully provisioned (2026-02-16T06:28:24Z)"
    assert ps._stage(stage, {})["lastStatusCheckTime"] == "2026-02-16T06:28:24Z"


def test_a_delayed_stage_says_when_the_wait_ends_and_when_it_was_checked() -> None:
    until = T0 + dt.timedelta(minutes=2)
    gate = st.GateStatus("Delay", st.GateState.WAITING, "waiting for delay", until)
    stage = st.StageStatus(
        "prod", ("p/p",), 1, phase=st.StagePhase.WAITING_BEFORE, entered_at=T0, gates=(gate,)
    )
    assert ps.describe(stage) == (
        "Delayed: Waiting for Time Window: 2026-02-16T06:30:24Z (2026-02-16T06:28:24Z)"
    )


def test_other_gates_keep_their_own_message() -> None:
    gate = st.GateStatus("Approval", st.GateState.WAITING, "waiting for approval staging")
    stage = st.StageStatus("staging", ("s/s",), 1, phase=st.StagePhase.WAITING_AFTER, gates=(gate,))
    assert ps.describe(stage) == "waiting for approval staging"


def _written(
    dev: str,
    dev_phase: str = "Progressing",
    message: str = "stage dev: delivering",
    *,
    completed: int = 0,
    started: tuple[str, ...] = ("m/m1",),
) -> dict[str, Any]:
    record_stage = {
        "name": "dev",
        "phase": dev_phase,
        "clusters": ["m/m1", "m/m2"],
        "started": list(started),
        "completed": completed,
        "lastProgressAt": f"2026-02-16T06:28:2{completed}.000000Z",
        "message": message,
    }
    condition = {"type": "Progressing", "status": "True", "reason": "Progressing", "message": message}
    return {
        "message": message,
        "conditions": [condition],
        "rollout": {
            "phase": "Progressing",
            "message": message,
            "stages": [record_stage],
            "conditions": [condition],
        },
        "stages": [
            {"name": "dev", "phase": dev_phase, "completed": completed, "currentStatusDescription": dev},
            {"name": "prod", "phase": "Pending", "completed": 0, "currentStatusDescription": "Pending"},
        ],
    }


def test_only_how_far_a_progressing_stage_got_is_progress() -> None:
    waiting = (
        "delivering: 0/2 clusters done; cluster m1: Deployment web/web: 0 of 1 updated replicas available"
    )
    later = "delivering: 0/2 clusters done; cluster m1: Deployment web/web: 1 old replica pending termination"
    assert ps.progress_only(_written(waiting), _written(later))
    assert not ps.progress_only(_written(waiting), _written(waiting))  # nothing to write at all
    # One more cluster done, and every message saying so (ADR 0120): held back too.
    one_done = _written("delivering: 1/2 clusters done", message="stage dev: 1/2 done", completed=1)
    assert ps.progress_only(_written(waiting), one_done)
    # A transition, a cluster started, a condition's status: written at once.
    assert not ps.progress_only(_written(waiting), _written(later, dev_phase="Succeeded"))
    assert not ps.progress_only(_written(waiting), _written(later, started=("m/m1", "m/m2")))
    turned = _written(later)
    turned["conditions"][0]["status"] = "False"
    assert not ps.progress_only(_written(waiting), turned)
    assert not ps.progress_only({}, _written(later))  # a first status
    ended = _written(waiting)
    ended["rollout"]["phase"] = "Succeeded"
    assert not ps.progress_only(ended, _written(later))  # not a rollout in progress
