"""Placement fields fleetwave does not act on yet are refused by name; defaults written out are not."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from fleetwave.api.kubefleet import PlacementSpec
from fleetwave.controllers.kubefleet import unhonoured

SELECT = [{"group": "", "version": "v1", "kind": "Namespace", "name": "app"}]
SEED_004 = Path(__file__).resolve().parents[1] / "api" / "seed004_objects.yaml"


def spec(**fields: Any) -> PlacementSpec:
    return PlacementSpec.model_validate({"resourceSelectors": SELECT, **fields})


TERM = {"labelSelector": {"matchLabels": {"env": "prod"}}}


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        (
            {"policy": {"placementType": "PickAll", "topologySpreadConstraints": [{"topologyKey": "zone"}]}},
            "spec.policy.topologySpreadConstraints",
        ),
        (
            {
                "policy": {
                    "affinity": {
                        "clusterAffinity": {
                            "preferredDuringSchedulingIgnoredDuringExecution": [
                                {"weight": 10, "preference": TERM}
                            ]
                        }
                    }
                }
            },
            "spec.policy.affinity.clusterAffinity.preferredDuringSchedulingIgnoredDuringExecution",
        ),
        (
            {
                "policy": {
                    "affinity": {
                        "clusterAffinity": {
                            "requiredDuringSchedulingIgnoredDuringExecution": {
                                "clusterSelectorTerms": [TERM, {"propertySelector": {"matchExpressions": []}}]
                            }
                        }
                    }
                }
            },
            "clusterSelectorTerms[1].propertySelector",
        ),
        (
            {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 2}}},
            "spec.strategy.rollingUpdate.maxSurge",
        ),
        (
            {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"unavailablePeriodSeconds": 5}}},
            "spec.strategy.rollingUpdate.unavailablePeriodSeconds",
        ),
        (
            {"strategy": {"applyStrategy": {"comparisonOption": "FullComparison"}}},
            "spec.strategy.applyStrategy.comparisonOption: FullComparison",
        ),
        (
            {"strategy": {"applyStrategy": {"allowCoOwnership": True}}},
            "spec.strategy.applyStrategy.allowCoOwnership",
        ),
        (
            {"strategy": {"reportBackStrategy": {"type": "Mirror", "destination": "WorkAPI"}}},
            "spec.strategy.reportBackStrategy.type: Mirror",
        ),
        ({"statusReportingScope": "NamespaceAccessible"}, "spec.statusReportingScope: NamespaceAccessible"),
    ],
)
def test_a_field_fleetwave_would_ignore_is_refused_by_name(fields: dict[str, Any], named: str) -> None:
    refused = unhonoured.refusal(spec(**fields))
    assert named in refused
    assert refused.endswith(unhonoured.NOT_YET) or f"{unhonoured.NOT_YET} (" in refused


def test_defaults_written_out_and_what_fleetwave_does_are_accepted() -> None:
    written = spec(
        policy={
            "placementType": "PickN",
            "numberOfClusters": 2,
            "affinity": {
                "clusterAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {"clusterSelectorTerms": [TERM]}
                }
            },
        },
        strategy={
            "type": "RollingUpdate",
            "rollingUpdate": {"maxUnavailable": 1, "maxSurge": "25%", "unavailablePeriodSeconds": 60},
            "applyStrategy": {
                "type": "ServerSideApply",
                "whenToApply": "Always",
                "whenToTakeOver": "Always",
                "serverSideApplyConfig": {"force": True},
            },
            "deleteStrategy": {"propagationPolicy": "Delete"},
            "reportBackStrategy": {"type": "Disabled"},
        },
        statusReportingScope="ClusterScopeOnly",
    )
    assert unhonoured.refusal(written) == ""


def test_the_seed_placements_are_accepted() -> None:
    docs = [d for d in yaml.safe_load_all(SEED_004.read_text(encoding="utf-8")) if d]
    placements = [d for d in docs if d["kind"].endswith("ResourcePlacement")]
    assert len(placements) == 2
    assert all(unhonoured.refusal(PlacementSpec.model_validate(p["spec"])) == "" for p in placements)
