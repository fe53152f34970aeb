"""`bench/gate_timeline.py` splits a gate's reaction into the hops its controller log shows."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest


@pytest.fixture(scope="module")
def timeline(bench_module: Callable[[str], ModuleType]) -> ModuleType:
    return bench_module("gate_timeline")


def _stamp(epoch: float) -> str:
    moment = dt.datetime.fromtimestamp(epoch, dt.UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S,") + f"{moment.microsecond // 1000:03d}"


def test_the_first_pass_from_until_and_its_write_are_the_hops(timeline: ModuleType, tmp_path: Path) -> None:
    until = 1_800_000_000.0
    lines = [
        # a pass that ended before `until` decided nothing about the gate
        f"{_stamp(until - 1.5)} DEBUG fleetwave.runtime.controller: reconciled clusterpromotion p: "
        "waited 10.0 ms, took 400.0 ms",
        f"{_stamp(until + 0.3)} DEBUG fleetwave.bench.passes: stage profile write started p-staging",
        f"{_stamp(until + 0.5)} DEBUG fleetwave.bench.passes: stage profile write started p-prod",
        f"{_stamp(until + 0.8)} DEBUG fleetwave.bench.passes: stage profile write ended p-staging",
        f"{_stamp(until + 1.1)} DEBUG fleetwave.runtime.controller: reconciled clusterpromotion p: "
        "waited 250.0 ms, took 850.0 ms",
    ]
    log = tmp_path / "controller.log"
    log.write_text("\n".join(lines) + "\n")
    record = timeline.read_log(log)["p"]
    gate = timeline.gate_of("p", until, until + 0.9, record)
    hops = [round(h * 1000) for h in timeline.hops(gate)]
    assert hops == [250, 50, 500, 100]  # worker, decision, round trip, watch


def test_a_gate_without_marks_reports_what_it_lacks(timeline: ModuleType, tmp_path: Path) -> None:
    gate = timeline.gate_of("q", 100.0, 100.4, timeline.Promotion())
    assert timeline.hops(gate) == [None, None, None, None]
    assert round(gate.reaction * 1000) == 400
