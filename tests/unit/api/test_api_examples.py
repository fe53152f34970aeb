"""fleetwave's own manifests of the seed flows (examples/seeds) stand on their own: on a plain clone,
without ../shared, every document parses, every promotion translates into a plan, and each staged run
translates with its strategy. (Where the seeds are present, test_api_seeds checks they match.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from fleetwave import translate
from fleetwave.api.codec import parse_object
from fleetwave.api.models import (
    ClusterPromotion,
    ClusterResourcePlacement,
    ClusterStagedUpdateRun,
    ClusterStagedUpdateStrategy,
    Resource,
    StagedUpdateRun,
    StagedUpdateStrategy,
)
from fleetwave.controllers.fleet import members
from fleetwave.controllers.kubefleet import picking

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "seeds"
FILES = sorted(EXAMPLES.glob("*.yaml"))


def documents(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d]


def test_every_seed_has_its_examples() -> None:
    assert {p.name.split("-")[0] for p in FILES} == {"000", "001", "002", "003", "004"}
    kinds = sorted(d["kind"] for p in FILES for d in documents(p))
    assert kinds.count("ClusterPromotion") == 8
    assert {
        "ClusterResourcePlacement",
        "ResourcePlacement",
        "ClusterStagedUpdateRun",
        "StagedUpdateRun",
    } <= set(kinds)


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_an_example_parses_and_its_rollouts_translate(path: Path) -> None:
    parsed = [parse_object(d) for d in documents(path) if d["apiVersion"] != "v1"]
    assert parsed
    assert all(isinstance(o, Resource) for o in parsed)
    for obj in parsed:
        if isinstance(obj, ClusterPromotion):
            spec = translate.from_promotion(obj)
            assert [s.name for s in spec.stages] == [s.name for s in obj.spec.stages]
    strategies = {
        o.metadata.name: o
        for o in parsed
        if isinstance(o, ClusterStagedUpdateStrategy | StagedUpdateStrategy)
    }
    for run in (o for o in parsed if isinstance(o, ClusterStagedUpdateRun | StagedUpdateRun)):
        strategy = strategies[run.spec.staged_rollout_strategy_name]
        rollout = translate.from_manifests([run, strategy])
        assert [s.name for s in rollout.spec.stages] == [s.name for s in strategy.spec.stages]


def test_the_pick_by_score_example_picks_what_its_comment_says() -> None:
    [doc] = documents(EXAMPLES.parent / "placement-pick-by-score.yaml")
    placement = parse_object(doc)
    assert isinstance(placement, ClusterResourcePlacement)

    def member(name: str, env: str, nodes: str | None, order: str | None = None) -> members.Member:
        labels = {"env": env, **({"order": order} if order else {})}
        properties = {"kubernetes-fleet.io/node-count": {"value": nodes}} if nodes else {}
        return members.from_object(
            {
                "metadata": {"name": name, "namespace": "fleet", "labels": labels},
                "spec": {},
                "status": {"ready": True, "properties": properties},
            }
        )

    fleet = [
        member("a-dev", "dev", "3", order="1"),
        member("b-staging", "staging", "2", order="2"),
        member("c-prod", "prod", "5", order="3"),
        member("d-prod-empty", "prod", "0"),  # no node: fails the required property selector
        member("e-prod-unknown", "prod", None),  # node count not known: never matches
    ]
    picked = [m.name for m in picking.pick(placement.spec.policy, fleet)]
    # c-prod: 40 + 0 (highest order); a-dev: 0 + 20 (lowest order); b-staging: 0 + 10.
    assert picked == ["c-prod", "a-dev"]
