"""A staged run judges the objects it applied a moment ago as the apply returned them: once, for the
same cluster and inventory, within JUST_APPLIED_SECONDS."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from fleetwave.controllers.kubefleet import executor

CM = ("v1", "ConfigMap", "web", "web")
LIVE = {CM: {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "web", "namespace": "web"}}}


def _ctx() -> Any:
    return SimpleNamespace(just_applied={})


def test_what_an_apply_returned_is_judged_once_for_its_cluster_and_inventory() -> None:
    ctx = _ctx()
    executor._remember_applied(ctx, "m1", "inv", LIVE)
    assert executor._just_applied(ctx, "m2", "inv") is None  # another cluster
    assert executor._just_applied(ctx, "m1", "other") is None  # another placement's inventory
    assert executor._just_applied(ctx, "m1", None) is None  # a caller that does not say
    assert executor._just_applied(ctx, "m1", "inv") == LIVE
    assert executor._just_applied(ctx, "m1", "inv") is None  # the next judgement reads the member


def test_an_apply_longer_ago_than_a_moment_is_read_again(monkeypatch: pytest.MonkeyPatch) -> None:
    ctx, now = _ctx(), [1000.0]
    monkeypatch.setattr(executor.time, "monotonic", lambda: now[0])
    executor._remember_applied(ctx, "m1", "inv", LIVE)
    now[0] += executor.JUST_APPLIED_SECONDS + 0.1
    assert executor._just_applied(ctx, "m1", "inv") is None
    executor._remember_applied(ctx, "m1", "inv", LIVE)
    now[0] += executor.JUST_APPLIED_SECONDS + 0.1
    executor._remember_applied(ctx, "m2", "inv", LIVE)  # the stale entry is dropped on the way
    assert set(ctx.just_applied) == {("m2", "inv")}
