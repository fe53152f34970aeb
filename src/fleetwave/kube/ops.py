"""Typed helpers for the writes and reads controllers make, and the errors they may see.

Bodies are plain dicts; the resource class is found by `kinds` (fleetwave's kinds, built-ins, or a
generic class for anything else the caller resolved). "Already exists" and "not found" are answers,
not exceptions, where the caller's intent makes them so (create-if-absent, delete-if-exists, get).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import httpx2
from lightkube import ApiError, AsyncClient, codecs
from lightkube.types import PatchType

from fleetwave.kube import kinds

__all__ = [
    "ApiError",
    "HTTPError",
    "TransportError",
    "apply",
    "code_of",
    "create_if_absent",
    "delete_if_exists",
    "get",
    "json_patch",
    "merge_patch",
    "to_resource",
]

NOT_FOUND, CONFLICT = 404, 409
TransportError = httpx2.TransportError
HTTPError = httpx2.HTTPError


def code_of(error: ApiError) -> int:
    return int(error.status.code or 0)


def to_resource(body: Mapping[str, Any]) -> Any:
    """The lightkube object for a dict body (our kinds and built-ins; registered on first use)."""
    kinds.register_all()
    return codecs.from_dict(dict(body))


async def apply(client: AsyncClient, body: Mapping[str, Any], *, force: bool = True) -> Any:
    """Server-side apply under fleetwave's field manager."""
    return await client.apply(to_resource(body), force=force)


async def create_if_absent(client: AsyncClient, body: Mapping[str, Any]) -> bool:
    """Create `body`; False when it already exists (another reconcile, or cache lag)."""
    try:
        await client.create(to_resource(body))
    except ApiError as e:
        if code_of(e) != CONFLICT:
            raise
        return False
    return True


async def get(client: AsyncClient, resource: type[Any], name: str, *, namespace: str | None = None) -> Any:
    """The object, or None when it does not exist."""
    try:
        return await client.get(resource, name, namespace=namespace)
    except ApiError as e:
        if code_of(e) != NOT_FOUND:
            raise
        return None


async def delete_if_exists(
    client: AsyncClient, resource: type[Any], name: str, *, namespace: str | None = None
) -> bool:
    """Delete; False when it was already gone."""
    try:
        await client.delete(resource, name, namespace=namespace)
    except ApiError as e:
        if code_of(e) != NOT_FOUND:
            raise
        return False
    return True


async def json_patch(
    client: AsyncClient,
    resource: type[Any],
    name: str,
    ops: Sequence[Mapping[str, Any]],
    *,
    namespace: str | None = None,
) -> Any:
    """An RFC 6902 patch; a failing `test` op makes the API server refuse it (422)."""
    return await client.patch(
        resource, name, [dict(op) for op in ops], namespace=namespace, patch_type=PatchType.JSON
    )


async def merge_patch(
    client: AsyncClient,
    resource: type[Any],
    name: str,
    body: Mapping[str, Any],
    *,
    namespace: str | None = None,
    status: bool = False,
) -> Any:
    """An RFC 7386 merge patch, of the object or (status=True) of its status subresource."""
    target = resource.Status if status else resource
    return await client.patch(target, name, dict(body), namespace=namespace, patch_type=PatchType.MERGE)
