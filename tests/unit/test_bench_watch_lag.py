"""`bench/watch_lag.py` measures one watch stream's lag behind another from resourceVersions."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest


@pytest.fixture(scope="module")
def watch_lag(bench_module: Callable[[str], ModuleType]) -> ModuleType:
    return bench_module("watch_lag")


def test_an_event_is_late_by_the_time_since_the_reference_first_reached_its_revision(
    watch_lag: ModuleType,
) -> None:
    reached = watch_lag.first_reached([(10.0, 100), (10.5, 140), (11.0, 200)])
    assert watch_lag.lag(reached, (12.0, 120)) == pytest.approx(1.5)  # 140 >= 120, first at 10.5
    assert watch_lag.lag(reached, (12.0, 140)) == pytest.approx(1.5)
    assert watch_lag.lag(reached, (11.2, 150)) == pytest.approx(0.2)  # 200 at 11.0


def test_an_event_ahead_of_the_reference_is_not_late_and_one_past_it_is_unknown(
    watch_lag: ModuleType,
) -> None:
    reached = watch_lag.first_reached([(10.0, 100), (11.0, 200)])
    assert watch_lag.lag(reached, (10.2, 150)) == 0.0  # came before the reference showed 200
    assert watch_lag.lag(reached, (12.0, 201)) is None


def test_the_reference_keeps_the_first_time_each_revision_was_reached(watch_lag: ModuleType) -> None:
    # Out of order in the list, and a relist's older revision after a newer one: neither moves it.
    revisions, times = watch_lag.first_reached([(11.0, 200), (10.0, 100), (11.5, 150), (12.0, 300)])
    assert revisions == [100, 200, 300]
    assert times == [10.0, 11.0, 12.0]


def test_the_controllers_informer_events_are_read_from_its_log(watch_lag: ModuleType, tmp_path: Path) -> None:
    log = tmp_path / "controller.log"
    log.write_text(
        "2026-12-01 09:00:00,250 DEBUG fleetwave.bench.passes: informer event ClusterPromotion load-1 500\n"
        "2026-12-01 09:00:01,000 DEBUG fleetwave.runtime.controller: reconciled clusterpromotion load-1\n"
        "2026-12-01 09:00:02,500 DEBUG fleetwave.bench.passes: informer event ClusterProfile load-1-dev 480\n"
    )
    promotions, profiles = watch_lag.read_controller_log(log)
    start = 1_796_115_600.0  # 2026-12-01 09:00:00 UTC
    assert promotions == [(pytest.approx(start + 0.25), 500)]
    assert profiles == [(pytest.approx(start + 2.5), 480)]
    assert watch_lag.lag(watch_lag.first_reached(promotions), profiles[0]) == pytest.approx(2.25)
