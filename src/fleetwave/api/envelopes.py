"""KubeFleet's envelopes: content a placement carries to members but that must not act on the hub.

A ResourceEnvelope (namespaced) or ClusterResourceEnvelope (cluster-scoped) holds manifests under
`data` (key -> object). The management cluster stores the envelope, never its contents: a webhook
configuration, say, would otherwise start intercepting the hub's own requests. A placement selects
the envelope like any object; members get what it wraps (ADR 0092). Field names follow
placement.kubernetes-fleet.io v1beta1.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from fleetwave.api.meta import FreeForm, Resource

MAX_ENTRIES = 50  # upstream's maxProperties
_CATEGORIES = ("fleet", "fleet-placement")


class ClusterResourceEnvelope(Resource):
    """Carries cluster-scoped objects to member clusters without creating them in the management
    cluster: a placement that selects the envelope applies what it wraps (KubeFleet's
    ClusterResourceEnvelope)."""

    kind_name: ClassVar[str] = "ClusterResourceEnvelope"
    plural: ClassVar[str] = "clusterresourceenvelopes"
    namespaced: ClassVar[bool] = False
    short_names: ClassVar[tuple[str, ...]] = ("crenv",)  # fleetwave.io only: upstream has none
    categories: ClassVar[tuple[str, ...]] = _CATEGORIES

    kind: Literal["ClusterResourceEnvelope"] = "ClusterResourceEnvelope"
    data: dict[str, FreeForm] = Field(min_length=1, max_length=MAX_ENTRIES)
    """The wrapped manifests, 1 to 50, each under a key of your choice: cluster-scoped objects only.
    The management cluster stores only the envelope; a placement that selects it delivers the
    objects inside, in key order."""


class ResourceEnvelope(Resource):
    """Carries namespaced objects to member clusters without creating them in the management cluster: a
    placement that selects the envelope applies what it wraps (KubeFleet's ResourceEnvelope)."""

    kind_name: ClassVar[str] = "ResourceEnvelope"
    plural: ClassVar[str] = "resourceenvelopes"
    namespaced: ClassVar[bool] = True
    short_names: ClassVar[tuple[str, ...]] = ("renv",)  # fleetwave.io only: upstream has none
    categories: ClassVar[tuple[str, ...]] = _CATEGORIES

    kind: Literal["ResourceEnvelope"] = "ResourceEnvelope"
    data: dict[str, FreeForm] = Field(min_length=1, max_length=MAX_ENTRIES)
    """The wrapped manifests, 1 to 50, each under a key of your choice: objects of the envelope's
    namespace only, with metadata.namespace set. The management cluster stores only the envelope; a
    placement that selects it delivers the objects inside, in key order."""
