"""Which members a placement picks: taints keep PickAll and PickN off a cluster unless tolerated."""

from __future__ import annotations

from typing import Any

from fleetwave.api.kubefleet import PlacementPolicy
from fleetwave.controllers import members
from fleetwave.controllers.kubefleet import picking


def member(name: str, *taints: dict[str, Any], ready: bool = True) -> members.Member:
    return members.from_object(
        {
            "metadata": {"name": name, "namespace": "fleet", "labels": {"env": "prod"}},
            "spec": {"taints": list(taints)},
            "status": {"ready": ready},
        }
    )


FLEET = [
    member("a"),
    member("b", {"key": "gpu", "value": "true", "effect": "NoSchedule"}),
    member("c", {"key": "maintenance"}),  # effect defaults to NoSchedule, as the CRD defaults it
]


def names(picked: list[members.Member]) -> list[str]:
    return [m.name for m in picked]


def policy(**fields: Any) -> PlacementPolicy:
    return PlacementPolicy.model_validate(fields)


def test_untolerated_taints_keep_pickall_off_a_cluster() -> None:
    assert names(picking.pick(None, FLEET)) == ["a"]
    assert names(picking.pick(policy(placementType="PickAll"), FLEET)) == ["a"]


def test_equal_needs_key_and_value_exists_needs_the_key_and_an_empty_key_tolerates_all() -> None:
    gpu = policy(placementType="PickAll", tolerations=[{"key": "gpu", "value": "true"}])
    assert names(picking.pick(gpu, FLEET)) == ["a", "b"]
    wrong_value = policy(placementType="PickAll", tolerations=[{"key": "gpu", "value": "no"}])
    assert names(picking.pick(wrong_value, FLEET)) == ["a"]
    exists = policy(placementType="PickAll", tolerations=[{"key": "maintenance", "operator": "Exists"}])
    assert names(picking.pick(exists, FLEET)) == ["a", "c"]
    everything = policy(placementType="PickAll", tolerations=[{"operator": "Exists"}])
    assert names(picking.pick(everything, FLEET)) == ["a", "b", "c"]
    effect = policy(placementType="PickAll", tolerations=[{"operator": "Exists", "effect": "NoSchedule"}])
    assert names(picking.pick(effect, FLEET)) == ["a", "b", "c"]


def test_pickn_counts_only_tolerated_clusters_and_pickfixed_ignores_taints() -> None:
    two = policy(placementType="PickN", numberOfClusters=2)
    assert names(picking.pick(two, FLEET)) == ["a"]
    fixed = policy(placementType="PickFixed", clusterNames=["b", "c"])
    assert names(picking.pick(fixed, FLEET)) == ["b", "c"]
