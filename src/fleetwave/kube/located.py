"""Find a rollout object wherever fleetwave serves it: the native group first, then the upstream
groups (ADR 0062), so `fleetwave approve` and `fleetwave status` work for Sveltos and KubeFleet
users' objects too."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fleetwave.api import families
from fleetwave.api.families import Family
from fleetwave.kube import kinds, ops
from fleetwave.kube.client import Client


@dataclass(frozen=True, slots=True)
class Located:
    family: Family
    resource: Any  # the lightkube resource class of the kind in that family
    obj: Any  # the object as read

    def resource_of(self, kind: str) -> Any:
        """Another kind of the same family (a run's approval requests, a promotion's summaries)."""
        return kinds.family_resource(self.family, kind)


def candidates(kind: str) -> list[Family]:
    return [f for f in (families.NATIVE, *families.upstream_families()) if kind in f.kinds]


def locate(client: Client, kind: str, name: str, namespace: str | None = None) -> Located | None:
    """The first family holding `kind` `name` (a group that is not served counts as not holding it).
    A 403 from a later group, after an earlier one answered "not found", is read as not found too:
    the API server authorizes before it routes, so a tenant with rights in fleetwave's group alone is
    refused on a group that may not even be served (ADR 0111)."""
    for index, family in enumerate(candidates(kind)):
        resource = kinds.family_resource(family, kind)
        try:
            found = client.get(resource, name, namespace=namespace)
        except ops.StatusError as e:
            # fleetwave's own group is always installed: not served there means its CRDs are missing.
            if ops.is_not_found(e) and not (family is families.NATIVE and ops.is_unserved(e)):
                continue
            if ops.code_of(e) == FORBIDDEN and index > 0:
                continue
            raise
        return Located(family, resource, found)
    return None


FORBIDDEN = 403
