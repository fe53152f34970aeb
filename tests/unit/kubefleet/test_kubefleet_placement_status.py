"""A placement's Scheduled condition: fulfilled when it picked what its policy asks for, and — as
KubeFleet says it — SchedulingPolicyUnfulfilled when PickN found fewer eligible clusters than asked."""

from __future__ import annotations

import datetime as dt
from typing import Any

from fleetwave.controllers.kubefleet import placement_status as ps
from fleetwave.core import model as m

NOW = dt.datetime(2030, 1, 1, tzinfo=dt.UTC)


def _scheduled(picked: list[str], wanted: int | None) -> dict[str, Any]:
    fleet = m.Fleet.of(m.Cluster(c) for c in picked)
    frame = ps.Frame(
        "ClusterResourcePlacement", True, fleet, {c: c.split("/")[1] for c in picked}, 3, wanted=wanted
    )
    conditions = ps.summary(frame, {}, {}, NOW)["conditions"]
    return next(c for c in conditions if c["type"] == "ClusterResourcePlacementScheduled")


def test_pickn_short_of_its_number_is_unfulfilled_and_says_how_short() -> None:
    short = _scheduled(["ns/a"], wanted=3)
    assert (short["status"], short["reason"]) == ("False", "SchedulingPolicyUnfulfilled")
    assert short["message"].startswith("picked 1 of the 3 clusters asked for: a;")
    none = _scheduled([], wanted=2)
    assert "picked 0 of the 2 clusters asked for: none;" in none["message"]


def test_enough_clusters_or_another_policy_is_fulfilled() -> None:
    for picked, wanted in ((["ns/a", "ns/b"], 2), (["ns/a"], None), ([], 0)):
        done = _scheduled(picked, wanted)
        assert (done["status"], done["reason"]) == ("True", "SchedulingPolicyFulfilled")
        assert done["observedGeneration"] == 3
