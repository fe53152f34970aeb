"""Write an object's status subresource once per reconcile, and only when it changed.

The write is a JSON merge patch of the difference (removed keys become null) carrying the
resourceVersion the status was computed from, so a concurrent writer makes it a 409 `CONFLICT`
that the caller answers with a requeue rather than overwriting newer state.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from enum import Enum
from typing import Any

from lightkube import AsyncClient
from lightkube.core.exceptions import ApiError
from lightkube.types import PatchType

_CONFLICT = 409


class StatusWrite(Enum):
    UNCHANGED = "unchanged"
    WRITTEN = "written"
    CONFLICT = "conflict"


def normalized(value: Any) -> Any:
    """Plain JSON data (datetimes and models as the API would serialise them)."""
    return json.loads(json.dumps(value, default=_json_default, sort_keys=True))


def merge_patch(old: Any, new: Any) -> Any:
    """The RFC 7386 merge patch that turns `old` into `new` (None means: no change at all)."""
    if not isinstance(old, Mapping) or not isinstance(new, Mapping):
        return None if old == new else new
    patch: dict[str, Any] = {key: None for key in old if key not in new}
    for key, value in new.items():
        if key not in old:
            patch[key] = value
        elif old[key] != value:
            # Maps merge key by key; anything else (lists included) is replaced whole.
            patch[key] = merge_patch(old[key], value) if isinstance(old[key], Mapping) else value
    return patch or None


async def write_status(
    client: AsyncClient,
    resource: type[Any],
    obj: Any,
    new_status: Mapping[str, Any],
    *,
    namespace: str | None = None,
) -> StatusWrite:
    """Patch `obj`'s status to `new_status`; `obj` is the version the status was computed from."""
    old = normalized(_status_of(obj) or {})
    diff = merge_patch(old, normalized(dict(new_status)))
    if diff is None:
        return StatusWrite.UNCHANGED
    meta = obj.metadata
    body = {"metadata": {"resourceVersion": meta.resourceVersion}, "status": diff}
    try:
        await client.patch(
            resource.Status,
            meta.name,
            body,
            namespace=namespace if namespace is not None else meta.namespace,
            patch_type=PatchType.MERGE,
        )
    except ApiError as exc:
        if exc.status.code == _CONFLICT:
            return StatusWrite.CONFLICT
        raise
    return StatusWrite.WRITTEN


def _status_of(obj: Any) -> Any:
    status = obj.get("status") if isinstance(obj, Mapping) else getattr(obj, "status", None)
    to_dict = getattr(status, "to_dict", None)
    return to_dict() if to_dict is not None else status


def _json_default(value: Any) -> Any:
    if hasattr(value, "isoformat"):
        return value.isoformat().replace("+00:00", "Z")
    if hasattr(value, "to_dict"):
        return value.to_dict()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")
