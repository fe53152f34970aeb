"""Who keeps an object two inventories deploy (ADR 0063, 0066): owners and tiers, decided from the
live object's label and annotations (pure)."""

from __future__ import annotations

from typing import Any

from fleetwave.delivery import content as ct
from fleetwave.delivery import manifests


def stamped(inventory: str, owner: str | None = None, tier: tuple[int, int] | None = None) -> dict[str, Any]:
    obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "namespace": "apps"}}
    if tier is not None:
        obj = manifests.with_tier(obj, tier)
    return manifests._stamped(obj, ct.inventory_key(inventory), owner or inventory)


def test_the_same_profile_through_another_registration_is_no_conflict() -> None:
    live = stamped("summary/ns/web-alias-1", "ClusterProfile/web")
    mine = stamped("summary/ns/web-alias-2", "ClusterProfile/web")
    assert manifests._owned_elsewhere(live, mine) == ""


def test_another_profile_at_an_equal_tier_is_refused_naming_the_profile() -> None:
    live = stamped("summary/ns/web-1", "ClusterProfile/web")
    mine = stamped("summary/ns/other-1", "ClusterProfile/other")
    refused = manifests._owned_elsewhere(live, mine)
    assert refused.startswith("conflict: already deployed by ClusterProfile/web (tier 100)")


def test_a_lower_tier_takes_over_and_the_same_inventory_is_always_its_own() -> None:
    live = stamped("summary/ns/web-1", "ClusterProfile/web")
    assert manifests._owned_elsewhere(live, stamped("summary/ns/x-1", "ClusterProfile/x", (50, 100))) == ""
    assert manifests._owned_elsewhere(live, stamped("summary/ns/web-1", "ClusterProfile/renamed")) == ""


def test_objects_deployed_before_owners_were_profiles_conflict_only_with_other_inventories() -> None:
    old = stamped("summary/ns/web-1")  # owner annotation = the summary's inventory
    assert manifests._owned_elsewhere(old, stamped("summary/ns/web-1", "ClusterProfile/web")) == ""
    assert manifests._owned_elsewhere(old, stamped("summary/ns/other-1", "ClusterProfile/other"))
