"""`bench/cpu_budget.py` reads the CPU lines of a `bench_scale.py --ratio-trials` output back."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

import pytest


def _line(step: str, **spent: float) -> str:
    """One CPU line as `bench_scale.py` prints it ("this benchmark" written `bench` here)."""
    parts = ", ".join(f"{'this benchmark' if who == 'bench' else who} {s:.2f} s" for who, s in spent.items())
    return f"  CPU of the fleet in {step}: {parts}"


# Two trials as `bench_scale.py` prints them, with a line of another shape between.
OUTPUT = [
    "  CPU of the fleet idle, 5 s: management 0.11 s, etcd 0.04 s, members 0.81 s",
    _line("the promotion trial", management=1.57, etcd=0.21, members=0.89, controller=0.99, bench=0.05),
    _line("the direct apply (0.71 s)", management=0.02, etcd=0.01, members=0.57, bench=0.46),
    _line("the ClusterSummary floor", management=0.95, etcd=0.14, members=0.81, bench=0.53),
    _line("the staged-run trial", management=0.22, etcd=0.04, members=1.31, controller=0.51, bench=0.03),
    _line("the direct apply (0.58 s)", management=0.02, etcd=0.00, members=0.79, bench=0.26),
    _line("the delivered floor (1.64 s)", management=0.03, etcd=0.02, members=1.61, bench=1.08),
    "ratio at 100, trial 1: promotion 1.91 s (CPU 0.99 s) vs direct 0.71 s -> 2.71x",
    _line("the promotion trial", management=1.0, etcd=0.2, members=1.0, controller=1.0, bench=0.0),
    _line("the direct apply (0.43 s)", management=0.0, etcd=0.0, members=0.5, bench=0.5),
    _line("the ClusterSummary floor", management=1.0, etcd=0.0, members=0.5, bench=0.5),
    _line("the staged-run trial", management=0.2, etcd=0.0, members=1.2, controller=0.6, bench=0.0),
    _line("the direct apply (0.76 s)", management=0.0, etcd=0.0, members=1.0, bench=0.0),
    _line("the delivered floor (0.73 s)", management=0.0, etcd=0.0, members=1.25, bench=0.0),
]


@pytest.fixture(scope="module")
def cpu_budget(bench_module: Callable[[str], ModuleType]) -> ModuleType:
    return bench_module("cpu_budget")


def test_each_direct_apply_is_filed_under_the_rollout_it_follows(cpu_budget: ModuleType) -> None:
    found = cpu_budget.steps(OUTPUT)
    assert set(found) == {
        "the promotion trial",
        "the direct apply of the promotion trial",
        "the ClusterSummary floor",
        "the staged-run trial",
        "the direct apply of the staged-run trial",
        "the delivered floor",
    }
    assert [t["members"] for t in found["the direct apply of the staged-run trial"]] == [0.79, 1.0]
    assert found["the promotion trial"][0] == {
        "management": 1.57,
        "etcd": 0.21,
        "members": 0.89,
        "controller": 0.99,
        "this benchmark": 0.05,
    }


def test_the_first_trial_creates_the_objects_and_is_left_out(cpu_budget: ModuleType) -> None:
    found = cpu_budget.steps(OUTPUT)
    promotion = cpu_budget.medians(found["the promotion trial"])
    assert promotion["controller"] == 1.0
    assert promotion["total"] == pytest.approx(3.2)


def test_the_report_gives_the_ratios_of_the_sums(cpu_budget: ModuleType) -> None:
    lines = cpu_budget.report(cpu_budget.steps(OUTPUT))
    assert "CPU of the promotion trial / the ClusterSummary floor: 1.60x" in lines
    assert "CPU of the staged-run trial / the direct apply of the staged-run trial: 2.00x" in lines
    assert "CPU of the delivered floor / the direct apply of the staged-run trial: 1.25x" in lines
