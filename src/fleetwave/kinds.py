"""lightkube resource classes for fleetwave's own kinds, built once from the API models.

lightkube needs a class per kind to list, watch, apply and patch; these are its generic resources,
registered under group fleetwave.io so `lightkube.codecs.from_dict` also recognises our manifests.

may import: lightkube, fleetwave.api
"""

from __future__ import annotations

from functools import cache
from typing import Any

from lightkube.generic_resource import (
    GenericGlobalResource,
    GenericNamespacedResource,
    create_global_resource,
    create_namespaced_resource,
)

from fleetwave.api import models
from fleetwave.api.meta import API_VERSION

GROUP, VERSION = API_VERSION.split("/")

GenericResource = type[GenericGlobalResource] | type[GenericNamespacedResource]


@cache
def resource(kind: str) -> Any:
    """The lightkube class of one native kind (e.g. "ClusterPromotion"); KeyError for unknown kinds."""
    model = models.KINDS[kind]
    create = create_namespaced_resource if model.namespaced else create_global_resource
    return create(GROUP, VERSION, kind, model.plural)


def register_all() -> None:
    """Make every native kind known to lightkube's codecs (idempotent)."""
    for kind in models.KINDS:
        resource(kind)
