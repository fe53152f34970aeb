"""Write an object's status subresource once per reconcile, and only when it changed.

The write is a JSON merge patch of the difference (removed keys become null) carrying the
resourceVersion the status was computed from, so a concurrent writer makes it a 409 `CONFLICT`
that the caller answers with a requeue rather than overwriting newer state.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from enum import Enum
from typing import Any

from lightkube import ApiError, AsyncClient
from lightkube.types import PatchType

from fleetwave.core import timestamps

_CONFLICT = 409


class StatusWrite(Enum):
    UNCHANGED = "unchanged"
    WRITTEN = "written"
    CONFLICT = "conflict"


_PLAIN = frozenset({str, int, float, bool})  # kept as they are (subclasses, like enums, are not)


def normalized(value: Any) -> Any:
    """Plain JSON data (datetimes and models as the API would serialise them), without null map
    values: the API server drops a null it stores for a non-nullable field, so a status carrying
    one never compared equal to what was stored and was patched again on every pass. One walk, no
    JSON text in between: a rollout's status over 1,000 clusters is normalised at every pass."""
    kind = type(value)
    if kind is dict or isinstance(value, Mapping):
        return {
            k if type(k) is str else str(k): v if type(v) in _PLAIN else normalized(v)
            for k, v in value.items()
            if v is not None
        }
    if kind is list or kind is tuple:
        return [v if type(v) in _PLAIN else normalized(v) for v in value]
    if kind in _PLAIN or value is None:
        return value
    if isinstance(value, str):
        return str.__str__(value)  # an enum's text, as json.dumps wrote it
    if isinstance(value, bool | int | float):
        return json.loads(json.dumps(value))
    if isinstance(value, datetime):
        return timestamps.fmt(value)
    if hasattr(value, "isoformat"):
        return value.isoformat()
    if hasattr(value, "to_dict"):
        return normalized(value.to_dict())
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


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


@dataclass(frozen=True, slots=True)
class Versioned:
    """An object's status as of one resourceVersion: what the next guarded status write starts from.

    A controller that writes several times in one reconcile carries this forward instead of waiting
    for its informer cache to catch up with its own writes.
    """

    name: str
    namespace: str | None
    resource_version: str | None
    status: Mapping[str, Any]
    # The status as the server holds it, when `status` carries fields computed but not written
    # yet (None: `status` is what the server holds): the next write sends those fields too.
    stored: Mapping[str, Any] | None = None

    @classmethod
    def of(cls, obj: Any) -> Versioned:
        meta = obj.metadata
        status = normalized(_status_of(obj) or {})
        return cls(meta.name, meta.namespace, meta.resourceVersion, status)

    @classmethod
    def of_cached(cls, obj: Any) -> Versioned:
        """`of`, for an object of an informer cache: its status normalised once per version (a
        rollout over 1,000 clusters normalised the same status at every pass). The status is
        shared: only for a caller that reads it, as `write_versioned` does."""
        meta = obj.metadata
        uid, version = meta.uid, meta.resourceVersion
        found = _NORMALIZED.get(uid) if uid else None
        if found is not None and found[0] == version:
            status = found[1]
        else:
            status = normalized(_status_of(obj) or {})
            if uid and version:
                if len(_NORMALIZED) >= _NORMALIZED_SIZE and uid not in _NORMALIZED:
                    _NORMALIZED.clear()
                _NORMALIZED[uid] = (version, status)  # the latest version only: a status can be large
        return cls(meta.name, meta.namespace, meta.resourceVersion, status)


_NORMALIZED: dict[str, tuple[str, Mapping[str, Any]]] = {}
_NORMALIZED_SIZE = 65_536


async def write_status(
    client: AsyncClient,
    resource: type[Any],
    obj: Any,
    new_status: Mapping[str, Any],
    *,
    namespace: str | None = None,
) -> StatusWrite:
    """Patch `obj`'s status to `new_status`; `obj` is the version the status was computed from."""
    current = Versioned.of(obj)
    if namespace is not None:
        current = replace(current, namespace=namespace)
    written, _ = await write_versioned(client, resource, current, new_status)
    return written


async def write_versioned(
    client: AsyncClient, resource: type[Any], current: Versioned, new_status: Mapping[str, Any]
) -> tuple[StatusWrite, Versioned]:
    """Like `write_status`, and returns the version just written (unchanged when nothing was)."""
    wanted = normalized(dict(new_status))
    diff = merge_patch(current.status if current.stored is None else current.stored, wanted)
    if diff is None:
        return StatusWrite.UNCHANGED, current
    body = {"metadata": {"resourceVersion": current.resource_version}, "status": diff}
    try:
        result = await client.patch(
            resource.Status, current.name, body, namespace=current.namespace, patch_type=PatchType.MERGE
        )
    except ApiError as exc:
        if exc.status.code == _CONFLICT:
            return StatusWrite.CONFLICT, current
        raise
    if getattr(result, "metadata", None) is None:
        return StatusWrite.WRITTEN, replace(current, resource_version=None, status=wanted, stored=None)
    return StatusWrite.WRITTEN, replace(Versioned.of(result), namespace=current.namespace)


def version_written(result: tuple[StatusWrite, Versioned]) -> str | None:
    """The resourceVersion a `write_versioned` made (None: it wrote nothing)."""
    written, fresh = result
    return fresh.resource_version if written is StatusWrite.WRITTEN else None


def _status_of(obj: Any) -> Any:
    status = obj.get("status") if isinstance(obj, Mapping) else getattr(obj, "status", None)
    to_dict = getattr(status, "to_dict", None)
    return to_dict() if to_dict is not None else status
