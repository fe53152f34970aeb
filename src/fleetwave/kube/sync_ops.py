"""The sync twins of `kube.ops`, for the CLI, `fleetwave install`/`apply`/`cluster register` and the
demo, which talk to the management cluster from plain (non-async) code.

Same answers as `kube.ops`: "not found" is None from `get`, errors are `ops.ApiError` /
`ops.StatusError` / `ops.TransportError`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from lightkube import Client
from lightkube.models.authentication_v1 import TokenRequestSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Event, ServiceAccount
from lightkube.types import PatchType

from fleetwave.kube import ops

__all__ = ["apply", "get", "json_patch", "merge_patch"]


def apply(client: Client, body: Mapping[str, Any], *, force: bool = True) -> Any:
    """Server-side apply under the client's field manager (`kinds.UnknownKind`: see `ops.to_resource`)."""
    return client.apply(ops.to_resource(body), force=force)


def apply_as(client: Client, resource: type[Any], body: Mapping[str, Any], *, force: bool = True) -> Any:
    """Server-side apply of `body` sent as `resource` (e.g. `kinds.resource_class(info)` for a kind
    found by discovery)."""
    return client.apply(resource(dict(body)), force=force)


def get(client: Client, resource: type[Any], name: str, *, namespace: str | None = None) -> Any:
    """The object, or None when it does not exist."""
    try:
        return client.get(resource, name, namespace=namespace)
    except ops.StatusError as e:
        if not ops.is_not_found(e):
            raise
        return None


def json_patch(
    client: Client,
    resource: type[Any],
    name: str,
    patch: Sequence[Mapping[str, Any]],
    *,
    namespace: str | None = None,
) -> Any:
    """An RFC 6902 patch; a failing `test` op makes the API server refuse it (422)."""
    return client.patch(
        resource, name, [dict(op) for op in patch], namespace=namespace, patch_type=PatchType.JSON
    )


def merge_patch(
    client: Client,
    resource: type[Any],
    name: str,
    body: Mapping[str, Any],
    *,
    namespace: str | None = None,
    status: bool = False,
) -> Any:
    """An RFC 7386 merge patch, of the object or (status=True) of its status subresource."""
    target = resource.Status if status else resource
    return client.patch(target, name, dict(body), namespace=namespace, patch_type=PatchType.MERGE)


def events_about(client: Client, uid: str, namespace: str, limit: int = 200) -> list[dict[str, Any]]:
    """The core/v1 Events about the object with `uid` (cluster-scoped objects' are in "default"),
    at most `limit` of them, as plain dicts."""
    found = client.list(Event, namespace=namespace, fields={"involvedObject.uid": uid}, chunk_size=limit)
    out: list[dict[str, Any]] = []
    for event in found:
        out.append(event.to_dict())
        if len(out) >= limit:
            break
    return out


def list_dicts(client: Client, resource: Any, *, namespace: str | None = None) -> list[dict[str, Any]]:
    """Every object of `resource` (of `namespace` for a namespaced kind), as plain dicts."""
    found: Any = client.list(resource, namespace=namespace) if namespace else client.list(resource)
    return [o.to_dict() for o in found]


def request_token(client: Client, service_account: str, namespace: str, *, seconds: int) -> str:
    """A token for the ServiceAccount from the TokenRequest API (bound to it: deleting the account
    revokes it), valid for `seconds`."""
    request = ServiceAccount.Token(
        metadata=ObjectMeta(), spec=TokenRequestSpec(audiences=[], expirationSeconds=seconds)
    )
    made = client.create(request, service_account, namespace=namespace)
    if made.status is None or not made.status.token:
        raise RuntimeError(f"the API server issued no token for ServiceAccount {namespace}/{service_account}")
    return str(made.status.token)
