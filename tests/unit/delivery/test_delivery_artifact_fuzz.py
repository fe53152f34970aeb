"""Hostile Flux artifacts through the controller's path never leave the unpack root (ADR 0098, 0103).

A small seeded subset of bench/bench_artifact_fuzz.py's cases (`artifact_cases`: every category, no
heavy shape), each downloaded from loopback with its correct digest, fetched by the store and read,
and watched as `artifact_fuzz` says. A second test makes sure the watch would see an escape.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import artifact_cases as cases
import artifact_fuzz as fuzz
import pytest

from fleetwave.delivery import bounded, kustomize
from fleetwave.promapi import guards

SEED = 2026
COUNT = 24  # 12 cases of the other categories, one each, and 12 mutations, of which 6 run


@pytest.fixture
def fuzzer(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[fuzz.Fuzzer]:
    monkeypatch.setenv(guards.ALLOW_LOOPBACK_ENV, "1")
    with fuzz.serving() as server:
        yield fuzz.Fuzzer(server, fuzz.Ticker(), tmp_path)


async def run_all(fuzzer: fuzz.Fuzzer, chosen: list[cases.Case]) -> list[fuzz.Outcome]:
    with fuzzer.running():
        return [(await fuzzer.run(case))[0] for case in chosen]


async def test_hostile_artifacts_never_escape_the_unpack_root(fuzzer: fuzz.Fuzzer) -> None:
    # Every case starts a Python child (0.1-0.3 s): 18 of them keep this test within a few seconds.
    every = cases.cases(SEED, COUNT, heavy=False)
    chosen = [c for c in every if c.category != cases.MUTATIONS or c.index < COUNT // 2]
    assert {c.category for c in chosen} == set(cases.CATEGORIES)
    outcomes = await run_all(fuzzer, chosen)
    assert [(o.index, o.shape, o.escapes) for o in outcomes if o.escapes] == []
    # The controller's path ends in texts or Broken, and cleans up after itself.
    assert [
        (o.index, o.shape, o.verdict, o.message) for o in outcomes if o.verdict not in ("accepted", "refused")
    ] == []
    assert [o.left_behind for o in outcomes if o.left_behind] == []
    assert sum(o.verdict == "refused" for o in outcomes) > len(chosen) // 2


async def test_the_watch_sees_what_an_escaping_unpacker_would_leave(
    fuzzer: fuzz.Fuzzer, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def leaky(
        archive: bytes, tree: Path, limits: bounded.Limits = kustomize.UNPACK_LIMITS
    ) -> str | None:
        (tree / "apps").mkdir(parents=True)
        (tree / "apps" / "a.yaml").write_text("a: 1\n")
        (tree / "apps" / "link.yaml").symlink_to(fuzzer.canary / "keep.yaml")
        (tree.parent / "beside.yaml").write_text("x: 1\n")
        (tree.parent.parent / "sentinel" / "victim.yaml").write_text("victim: overwritten\n")
        (fuzzer.canary / f"{cases.MARKER}.yaml").write_text("x: 1\n")
        return None

    monkeypatch.setattr(kustomize, "unpack_child", leaky)  # `observing` wraps kustomize's
    case = cases.Case(0, "leaky unpacker", "benign", SEED, lambda rnd, aim: cases.benign(1))
    [outcome] = await run_all(fuzzer, [case])
    assert outcome.verdict == "accepted"
    assert sorted(outcome.escapes) == [
        "a symbolic link in the unpacked tree: apps/link.yaml",
        "beside.yaml created beside the unpack root",
        f"canary: {cases.MARKER}.yaml created (file)",
        "parent: sentinel/victim.yaml changed",
        f"text 'apps/link.yaml' under '.': read from outside the root ({fuzzer.canary / 'keep.yaml'})",
    ]


def test_the_cases_are_the_same_for_the_same_seed() -> None:
    aim = cases.Aim("/tmp/c", "/tmp/p/sentinel", "../..", "../../../c")
    first = [c.archive(aim) for c in cases.cases(SEED, 12, heavy=False)]
    assert first == [c.archive(aim) for c in cases.cases(SEED, 12, heavy=False)]
    assert cases.archive_at(SEED, 12, 7, aim, heavy=False) == first[7]
    assert first != [c.archive(aim) for c in cases.cases(SEED + 1, 12, heavy=False)]
