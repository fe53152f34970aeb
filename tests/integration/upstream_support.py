"""Shared by the modules that install the upstream API groups (ADR 0062)."""

from __future__ import annotations

import contextlib
from typing import Any

from lightkube import ApiError, Client
from lightkube.types import PatchType
from promotion_support import wait_for

from fleetwave.api import crds
from fleetwave.kube import kinds


def clear_native_kubefleet_objects(management: Client) -> None:
    """Other modules leave fleetwave.io placements and runs behind; `install --upstream-apis` would
    (rightly) refuse to hide them. This module starts from a hub without any."""
    for kind in sorted(crds.UPSTREAM_ONLY):
        resource = kinds.resource(kind)
        namespaced = kinds.native_info(kind).namespaced

        def listed(resource: Any = resource, namespaced: bool = namespaced) -> tuple[list[Any]] | None:
            try:
                found = management.list(resource, namespace="*") if namespaced else management.list(resource)
                return (list(found),)  # truthy even when empty
            except ApiError as e:  # 429 while a just-installed CRD's storage initializes
                if e.status.code == 429:
                    return None
                raise

        (objects,) = wait_for(listed, timeout=30, what=f"{kind} listable")
        for obj in objects:
            name, namespace = obj.metadata.name, obj.metadata.namespace
            management.delete(resource, name, namespace=namespace)
            # No controller runs here to honour a placement's cleanup finalizer: drop it, as a user
            # whose controller is gone would.
            with contextlib.suppress(ApiError):
                management.patch(
                    resource,
                    name,
                    {"metadata": {"finalizers": None}},
                    namespace=namespace,
                    patch_type=PatchType.MERGE,
                )
