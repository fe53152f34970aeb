"""`bench/bench_status_write_cost.py` writes a run's status in the three ways it compares."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest


@pytest.fixture(scope="module")
def cost(bench_module: Callable[[str], ModuleType]) -> ModuleType:
    return bench_module("bench_status_write_cost")


def _status_field(crd: dict[str, Any], name: str) -> Any:
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema["properties"]["status"]["properties"].get(name)


def test_only_the_tracked_way_leaves_the_ledger_out_of_the_schema(cost: ModuleType) -> None:
    assert _status_field(cost.crd("tracked"), "deliveries") is None
    assert _status_field(cost.crd("tracked"), "deletions") is None
    for way in ("atomic", "implied"):
        assert _status_field(cost.crd(way), "deliveries") is not None


def test_only_the_implied_way_writes_entries_without_the_hash(cost: ModuleType) -> None:
    clusters = [f"ns/c-{i}" for i in range(10)]
    status = cost.initial_status(clusters)
    for way in cost.WAYS:
        entry = cost.delivered(status, "ns/c-3", 7, way)["deliveries"]["ns/c-3"]
        assert ("hash" in entry, "index" in entry) == ((way != "implied"), True)
        assert entry["doneAt"] == entry["appliedAt"]


def test_a_delivered_cluster_gets_its_conditions_and_joins_its_stages_started(cost: ModuleType) -> None:
    clusters = [f"ns/c-{i}" for i in range(10)]
    status = cost.delivered(cost.initial_status(clusters), "ns/c-0", 1, "atomic")
    first = status["stagesStatus"][0]["clusters"][0]
    assert [c["type"] for c in first["conditions"]] == ["Started", "Succeeded"]
    assert status["rollout"]["stages"][0]["started"] == ["ns/c-0"]
    assert [len(s["clusters"]) for s in status["stagesStatus"]] == [2, 3, 5]
