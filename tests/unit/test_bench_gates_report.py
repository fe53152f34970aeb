"""`bench/bench_gates.py` reports what a run measured: gate trials alone, ratio trials alone, or both."""

from __future__ import annotations

import json
from collections.abc import Callable
from types import ModuleType

import pytest


@pytest.fixture(scope="module")
def bench_gates(bench_module: Callable[[str], ModuleType]) -> ModuleType:
    return bench_module("bench_gates")


def _results(**measured: list[object]) -> dict[str, list[object]]:
    keys = ("delay", "approval", "health", "health_polled", "ratio", "ratio_floor", "staged_run_ratio")
    return {key: list(measured.get(key, [])) for key in keys}


def test_a_run_of_gate_trials_alone_reports_them_and_no_ratio(
    bench_gates: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    bench_gates.report(_results(delay=[0.010, 0.020, 0.030]))
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("delay expires -> next stage's first write: p50 20 ms")
    assert not any("3-stage" in line for line in lines)
    assert json.loads(lines[-1])["delay"] == [0.010, 0.020, 0.030]


def test_a_run_of_ratio_trials_reports_the_rollout_against_direct_and_its_floor(
    bench_gates: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    # (rollout, direct stage by stage, direct all at once, controller CPU) per trial
    ratio = [[0.6, 0.4, 0.3, 0.1], [0.5, 0.5, 0.4, 0.1], [0.9, 0.6, 0.5, 0.2]]
    bench_gates.report(_results(ratio=ratio, ratio_floor=[0.5, 0.5, 0.6], staged_run_ratio=[[0.5, 0.4, 0.1]]))
    out = capsys.readouterr().out
    assert "3-stage rollout without gates: median 0.60 s; direct apply stage by stage: median 0.50 s" in out
    assert "the rollout 1.20x that floor" in out  # trials 1.2x, 1.0x, 1.5x
    assert "3-stage staged update run without waits: median 0.50 s" in out
    assert "delay expires" not in out
