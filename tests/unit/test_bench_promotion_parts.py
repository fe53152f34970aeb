"""`bench/bench_scale.py` counts what each promotion event changed, down to its stages' keys."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest


@pytest.fixture(scope="module")
def scale(bench_module: Callable[[str], ModuleType]) -> ModuleType:
    return bench_module("bench_scale")


def _promotion(started: list[str], completed: int, description: str) -> dict[str, Any]:
    stage = {"name": "dev", "phase": "Progressing", "started": started, "completed": completed}
    shown = {"name": "dev", "completed": completed, "currentStatusDescription": description}
    return {
        "metadata": {"name": "p", "resourceVersion": "1"},
        "spec": {"stages": [{"name": "dev"}]},
        "status": {
            "message": "delivering",
            "stages": [shown],
            "rollout": {"phase": "Progressing", "stages": [stage]},
        },
    }


def test_a_refilled_window_names_the_stage_keys_it_moved_in_both_status_parts(scale: ModuleType) -> None:
    before = _promotion(["c-1"], 0, "waiting on c-1")
    after = _promotion(["c-1", "c-2"], 1, "waiting on c-2")
    after["metadata"]["resourceVersion"] = "2"
    assert scale._promotion_parts(before, after) == [
        "status.stages.completed",
        "status.stages.currentStatusDescription",
        "rollout.stages.completed",
        "rollout.stages.started",
    ]


def test_a_description_alone_is_told_apart_and_a_new_stage_list_is_one_part(scale: ModuleType) -> None:
    before = _promotion(["c-1"], 0, "waiting on c-1")
    assert scale._promotion_parts(before, _promotion(["c-1"], 0, "c-1: not ready")) == [
        "status.stages.currentStatusDescription"
    ]
    longer = _promotion(["c-1"], 0, "waiting on c-1")
    longer["status"]["rollout"]["stages"].append({"name": "prod"})
    assert scale._promotion_parts(before, longer) == ["rollout.stages[]"]
    assert scale._promotion_parts(before, before) == []
