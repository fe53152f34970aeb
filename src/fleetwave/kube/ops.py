"""Typed helpers for the writes and reads controllers make, and the errors they may see.

Bodies are plain dicts; the resource class is found by `kinds` (fleetwave's kinds, built-ins, or a
generic class for anything else the caller resolved). "Already exists" and "not found" are answers,
not exceptions, where the caller's intent makes them so (create-if-absent, delete-if-exists, get).

Errors: lightkube raises `ApiError` for a JSON (Status) error body, but a plain `StatusError` (its
base class) for the text/plain 404 an API server returns for a group/version it does not serve;
`code_of` and `message_of` read both, and "not found" means either. `TransportError` is a server
that could not be reached at all. The sync twins of these helpers are in `kube.sync_ops`.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, Mapping, Sequence
from typing import Any

import httpx2
from lightkube import ApiError, AsyncClient, LoadResourceError, codecs
from lightkube.types import CascadeType, PatchType, on_error_retry

from fleetwave.kube import kinds

__all__ = [
    "ALL_NAMESPACES",
    "ApiError",
    "HTTPError",
    "StatusError",
    "TimeoutException",
    "TransportError",
    "apply",
    "code_of",
    "create_if_absent",
    "delete_if_exists",
    "get",
    "is_not_found",
    "is_unserved",
    "json_patch",
    "merge_patch",
    "merge_patch_unless_changed",
    "message_of",
    "to_resource",
    "watch",
]

NOT_FOUND, CONFLICT, GONE, TOO_MANY_REQUESTS = 404, 409, 410, 429
ALL_NAMESPACES = "*"  # the `namespace=` of a list or watch across every namespace
TransportError = httpx2.TransportError
TimeoutException = httpx2.TimeoutException
HTTPError = httpx2.HTTPError
StatusError = httpx2.HTTPStatusError  # an error answer; ApiError is the one with a Status body


def code_of(error: StatusError) -> int:
    """The HTTP status of an error answer (the Status body's code for an ApiError)."""
    if isinstance(error, ApiError):
        return int(error.status.code or 0)
    return int(error.response.status_code)


def message_of(error: StatusError) -> str:
    """What the server said: the Status message, else the status code and the body's text."""
    if isinstance(error, ApiError):
        return str(error.status.message or error)
    return f"{error.response.status_code} {error.response.text.strip()}"


def is_not_found(error: StatusError) -> bool:
    return code_of(error) == NOT_FOUND


def is_unserved(error: StatusError) -> bool:
    """A 404 for a whole resource type (a plain-text answer, or a Status naming no object): the API
    server does not serve it, as opposed to one object that does not exist."""
    if not is_not_found(error):
        return False
    if not isinstance(error, ApiError):
        return True
    details = error.status.details
    return details is None or not getattr(details, "name", None)


def is_stale(error: StatusError) -> bool:
    """A write refused because the object changed since it was read (its resourceVersion
    precondition failed), as opposed to a field-manager conflict of server-side apply."""
    return code_of(error) == CONFLICT and "the object has been modified" in message_of(error)


def to_resource(body: Mapping[str, Any]) -> Any:
    """The lightkube object for a dict body (our kinds and built-ins; registered on first use);
    `kinds.UnknownKind` for a kind neither we nor lightkube know (a CRD's kind: resolve it instead)."""
    kinds.register_all()
    try:
        return codecs.from_dict(dict(body))
    except LoadResourceError as e:
        raise kinds.UnknownKind(f"unknown kind {body.get('apiVersion')}/{body.get('kind')}") from e


async def apply(
    client: AsyncClient,
    body: Mapping[str, Any],
    *,
    force: bool = True,
    dry_run: bool = False,
    resource: type[Any] | None = None,
    field_manager: str | None = None,
) -> Any:
    """Server-side apply under the client's field manager (or `field_manager`). `resource` is the
    class to send `body` as (e.g. `kinds.resource_class(info)` for a resolved kind); by default the
    class lightkube's codecs know for its apiVersion/kind."""
    obj = to_resource(body) if resource is None else resource(dict(body))
    return await client.apply(obj, force=force, dry_run=dry_run, field_manager=field_manager)


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
    except StatusError as e:
        if not is_not_found(e):
            raise
        return None


async def delete_if_exists(
    client: AsyncClient,
    resource: type[Any],
    name: str,
    *,
    namespace: str | None = None,
    dependents: bool = False,
) -> bool:
    """Delete; False when it was already gone (or its kind is no longer served).

    `dependents`: the object's dependents go too, in the background (what `kubectl delete` does).
    Without it the kind's own default applies, which for a batch/v1 Job is to orphan its Pods and
    keep the Job until the member's garbage collector has released them."""
    cascade = CascadeType.BACKGROUND if dependents else None
    try:
        await client.delete(resource, name, namespace=namespace, cascade=cascade)
    except StatusError as e:
        if not is_not_found(e):
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


async def merge_patch_unless_changed(
    client: AsyncClient,
    resource: type[Any],
    name: str,
    body: Mapping[str, Any],
    *,
    namespace: str | None = None,
) -> bool:
    """A merge patch whose body carries the resourceVersion it was computed from; False when the
    object changed since (409), for the caller to decide again from the newer version."""
    try:
        await merge_patch(client, resource, name, body, namespace=namespace)
    except ApiError as e:
        if code_of(e) != CONFLICT:
            raise
        return False
    return True


def watch(
    client: AsyncClient,
    resource: type[Any],
    *,
    namespace: str | None = None,
    labels: Mapping[str, Any] | None = None,
    fields: Mapping[str, str] | None = None,
) -> AsyncIterable[tuple[str, Any]]:
    """(event type, object) pairs of a watch that lightkube re-opens by itself after errors: for live
    displays. It restarts "from now" and can miss deletions; controllers use `runtime.watching`'s
    informers, which relist (ADR 0001)."""
    stream: AsyncIterable[tuple[str, Any]] = client.watch(
        resource,
        namespace=namespace,
        labels=dict(labels) if labels else None,
        fields=dict(fields) if fields else None,
        on_error=on_error_retry,
    )
    return stream
