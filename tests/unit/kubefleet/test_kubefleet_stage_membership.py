"""Every picked cluster in exactly one stage, or the run fails initialization (ADR 0112)."""

from __future__ import annotations

from fleetwave.core import model as m
from fleetwave.translate import stage_membership as sm


def _stage(name: str, **labels: str) -> m.StageSpec:
    return m.StageSpec(name=name, selector=m.Selector(match_labels=tuple(sorted(labels.items()))))


def _fleet(**envs: str) -> m.Fleet:
    return m.Fleet.of(m.Cluster(name, {"env": env} if env else {}) for name, env in envs.items())


STAGES = (_stage("canary", env="canary"), _stage("prod", env="prod"))


def test_a_fleet_that_splits_cleanly_is_fine() -> None:
    assert sm.problem(STAGES, _fleet(a="canary", b="prod"), {}) == ""


def test_a_cluster_in_no_stage_is_named_with_the_stages() -> None:
    got = sm.problem(STAGES, _fleet(a="canary", zed="lab", b=""), {})
    assert (
        got == "some clusters are not placed in any stage (canary, prod), total 2, showing up to 10: b, zed"
    )


def test_a_cluster_in_two_stages_is_named_with_both_stages() -> None:
    stages = (*STAGES, _stage("everything"))
    got = sm.problem(stages, _fleet(a="canary"), {})
    want = "clusters appear in more than one stages, total 1, showing up to 10:"
    assert got == f"{want} `a` (stages canary, everything)"


def test_a_nil_selector_matches_nothing_and_both_problems_are_reported() -> None:
    stages = (m.StageSpec(name="none", selector=None), _stage("all"), _stage("all-too"))
    got = sm.problem(stages, _fleet(a="x"), {})
    assert "`a` (stages all, all-too)" in got
    got = sm.problem(
        (m.StageSpec(name="none", selector=None), _stage("p", env="p"), _stage("q", env="p")),
        _fleet(a="x", b="p"),
        {},
    )
    assert got.startswith("clusters appear in more than one stages, total 1")
    assert got.endswith("not placed in any stage (none, p, q), total 1, showing up to 10: a")


def test_status_names_are_used() -> None:
    got = sm.problem(STAGES, _fleet(**{"ns1/x": "lab"}), {"ns1/x": "x-shown"})
    assert got.endswith("showing up to 10: x-shown")


def test_the_list_is_bounded() -> None:
    got = sm.problem(STAGES, _fleet(**{f"c{i:03}": "lab" for i in range(500)}), {})
    assert got.endswith("total 500, showing up to 10: " + ", ".join(f"c{i:03}" for i in range(10)))
