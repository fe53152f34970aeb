"""ClusterPromotion stage descriptions in the words Sveltos prints (seed 002)."""

from __future__ import annotations

import datetime as dt

from fleetwave.controllers import promotion_status as ps
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
