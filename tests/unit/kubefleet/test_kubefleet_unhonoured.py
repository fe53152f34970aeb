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
NODES = "kubernetes-fleet.io/node-count"


def selector(name: str, value: str = "3") -> dict[str, Any]:
    return {"matchExpressions": [{"name": name, "operator": "Ge", "values": [value]}]}


def pick_n(
    required: list[dict[str, Any]] | None = None, preferred: list[dict[str, Any]] | None = None, **fields: Any
) -> dict[str, Any]:
    affinity: dict[str, Any] = {}
    if required:
        affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {"clusterSelectorTerms": required}
    if preferred:
        affinity["preferredDuringSchedulingIgnoredDuringExecution"] = preferred
    return {
        "placementType": "PickN",
        "numberOfClusters": 2,
        "affinity": {"clusterAffinity": affinity},
        **fields,
    }


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        (
            {
                "policy": pick_n(
                    required=[
                        TERM,
                        {"propertySelector": selector("resources.kubernetes-fleet.io/available-cpu")},
                    ]
                )
            },
            "clusterSelectorTerms[1].propertySelector.matchExpressions[0].name: resources.",
        ),
        (
            {
                "policy": pick_n(
                    preferred=[{"weight": 5, "preference": {"propertySelector": selector("memory", "4Gi")}}]
                )
            },
            "preferredDuringSchedulingIgnoredDuringExecution[0].preference.propertySelector.matchExpressions[0]"
            ".values[0]: 4Gi",
        ),
        (
            {
                "policy": pick_n(
                    preferred=[
                        {
                            "weight": 5,
                            "preference": {
                                "propertySorter": {
                                    "name": "resources.kubernetes-fleet.io/total-cpu",
                                    "sortOrder": "Ascending",
                                }
                            },
                        }
                    ]
                )
            },
            "preferredDuringSchedulingIgnoredDuringExecution[0].preference.propertySorter.name",
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


def test_preferences_property_selectors_and_sorters_and_spreading_are_accepted_with_pickn() -> None:
    spread = [
        {"topologyKey": "zone", "maxSkew": 2},
        {"topologyKey": "rack", "whenUnsatisfiable": "ScheduleAnyway"},
    ]
    placement = pick_n(
        required=[{**TERM, "propertySelector": selector(NODES)}],
        preferred=[
            {"weight": 20, "preference": {"propertySorter": {"name": NODES, "sortOrder": "Descending"}}},
            {"weight": -10, "preference": {**TERM, "propertySelector": selector("gpus", "1e1")}},
        ],
        topologySpreadConstraints=spread,
    )
    assert unhonoured.refusal(spec(policy=placement)) == ""
    # required property selectors filter PickAll as they filter PickN
    pick_all = {
        "placementType": "PickAll",
        "affinity": pick_n(required=[{"propertySelector": selector(NODES)}])["affinity"],
    }
    assert unhonoured.refusal(spec(policy=pick_all)) == ""


@pytest.mark.parametrize(
    ("policy", "named"),
    [
        (
            {"placementType": "PickAll", "topologySpreadConstraints": [{"topologyKey": "zone"}]},
            "spec.policy.topologySpreadConstraints: only PickN",
        ),
        (
            {
                "affinity": {
                    "clusterAffinity": {
                        "preferredDuringSchedulingIgnoredDuringExecution": [
                            {"weight": 10, "preference": TERM}
                        ]
                    }
                }
            },
            "clusterAffinity.preferredDuringSchedulingIgnoredDuringExecution: only PickN",
        ),
        (
            pick_n(required=[TERM, {"propertySorter": {"name": NODES, "sortOrder": "Ascending"}}]),
            "clusterSelectorTerms[1].propertySorter: only a preferred term sorts clusters",
        ),
    ],
)
def test_what_kubefleet_refuses_too_is_refused_by_name(policy: dict[str, Any], named: str) -> None:
    assert named in unhonoured.refusal(spec(policy=policy))
