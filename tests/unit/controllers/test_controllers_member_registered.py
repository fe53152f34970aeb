"""The registered members of a family, built once per state of its MemberClusters: a placement's
pass reads all of them, and must still see a member's change once the informer has it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fleetwave.api import families
from fleetwave.controllers.fleet import members
from fleetwave.controllers.shared.context import Cache


class _Informer:
    """A store of dicts by key and a revision counting its changes, as the cache reads an informer."""

    def __init__(self, *objects: dict[str, Any]) -> None:
        self.store = {f"{o['metadata']['namespace']}/{o['metadata']['name']}": o for o in objects}
        self.revision = 1

    def get(self, key: str) -> Any:
        return self.store.get(key)

    def on_change(self, handler: Callable[[str, Any], None]) -> None:
        pass

    def put(self, obj: dict[str, Any]) -> None:
        self.store[f"{obj['metadata']['namespace']}/{obj['metadata']['name']}"] = obj
        self.revision += 1


def _member(name: str, env: str) -> dict[str, Any]:
    return {
        "apiVersion": "fleetwave.io/v1alpha1",
        "kind": "MemberCluster",
        "metadata": {"name": name, "namespace": "fleet", "labels": {"env": env}},
        "spec": {},
        "status": {"ready": True},
    }


def test_members_are_built_once_per_state_and_follow_a_change() -> None:
    informer = _Informer(_member("a", "dev"), _member("b", "prod"))
    cache = Cache({"MemberCluster": informer}, families.NATIVE)
    first = members.registered(cache)
    assert {m.key: m.labels["env"] for m in first} == {"fleet/a": "dev", "fleet/b": "prod"}
    assert members.registered(cache) is first  # nothing changed: not built again

    informer.put(_member("a", "staging"))
    changed = members.registered(cache)
    assert {m.key: m.labels["env"] for m in changed} == {"fleet/a": "staging", "fleet/b": "prod"}
    assert [m.key for m in members.of_family(cache)] == [m.key for m in changed]
