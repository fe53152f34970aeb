"""A staged run judges the objects it applied a moment ago as the apply returned them: once, for the
same cluster and inventory, within JUST_APPLIED_SECONDS (`executor.DeliveryMemory`)."""

from __future__ import annotations

import pytest

from fleetwave.controllers.kubefleet import executor
from fleetwave.controllers.kubefleet.executor import DeliveryMemory, Placed

CM = ("v1", "ConfigMap", "web", "web")
LIVE = {CM: {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "web", "namespace": "web"}}}


def test_what_an_apply_returned_is_judged_once_for_its_cluster_and_inventory() -> None:
    memory = DeliveryMemory()
    memory.applied(Placed("m1", "inv"), LIVE)
    assert memory.just_applied(Placed("m2", "inv")) is None  # another cluster
    assert memory.just_applied(Placed("m1", "other")) is None  # another placement's inventory
    assert memory.just_applied(Placed("m1", "inv")) == LIVE
    assert memory.just_applied(Placed("m1", "inv")) is None  # the next judgement reads the member


def test_an_apply_longer_ago_than_a_moment_is_read_again(monkeypatch: pytest.MonkeyPatch) -> None:
    memory, now = DeliveryMemory(), [1000.0]
    monkeypatch.setattr(executor.time, "monotonic", lambda: now[0])
    memory.applied(Placed("m1", "inv"), LIVE)
    now[0] += executor.JUST_APPLIED_SECONDS + 0.1
    assert memory.just_applied(Placed("m1", "inv")) is None
    memory.applied(Placed("m1", "inv"), LIVE)
    memory.applied(Placed("m1", "kept"), LIVE)
    now[0] += executor.JUST_APPLIED_SECONDS + 0.1
    memory.applied(Placed("m2", "inv"), LIVE)  # the stale entries are dropped on the way
    now[0] -= executor.JUST_APPLIED_SECONDS  # a read now would still take them, had they been kept
    assert memory.just_applied(Placed("m1", "inv")) is None
    assert memory.just_applied(Placed("m1", "kept")) is None
    assert memory.just_applied(Placed("m2", "inv")) == LIVE


def test_each_wing_remembers_its_own_applies() -> None:
    ours, theirs = DeliveryMemory(), DeliveryMemory()
    ours.applied(Placed("m1", "inv"), LIVE)
    assert theirs.just_applied(Placed("m1", "inv")) is None
    assert ours.just_applied(Placed("m1", "inv")) == LIVE
