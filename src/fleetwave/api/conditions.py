"""Kubernetes-style conditions read from and written to an object's status, as plain JSON (pure).

A status holds `conditions`, a list of `{type, status, reason, message, lastTransitionTime,
observedGeneration}`; at most one of each type. Every reader here takes either the status or the
list itself, whichever the caller has at hand. The typed conditions of the engine's own record are
`fleetwave.core.status.Condition`, not these.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from fleetwave.api.objects import Obj

# A status (its `conditions` are read) or the list of conditions; None reads as no conditions.
Where = Mapping[str, Any] | Iterable[Mapping[str, Any]] | None


def find(where: Where, type_: str) -> Obj | None:
    """The condition of `type_`, or None when there is none. Entries that are not JSON objects are
    skipped: a status written by another controller is not trusted to be well formed."""
    listed = where.get("conditions") if isinstance(where, Mapping) else where
    return next((c for c in listed or () if isinstance(c, Mapping) and c.get("type") == type_), None)


def get(where: Where, type_: str) -> Obj:
    """The condition of `type_`, or an empty mapping when there is none: for readers that only ask
    its fields, to whom an absent condition is one whose every field is missing."""
    return find(where, type_) or {}


def is_true(where: Where, type_: str) -> bool:
    """Whether the condition of `type_` is there with status "True" (absent reads as not true)."""
    found = find(where, type_)
    return found is not None and found.get("status") == "True"


def cond(
    previous: Where,
    type_: str,
    status: str,
    reason: str,
    message: str,
    generation: int | None,
    at: str,
) -> dict[str, Any]:
    """A condition to write, stamped `at` — unless `previous` holds this type with the same status:
    then it keeps that one's lastTransitionTime, which only moves when the status flips."""
    old = find(previous, type_)
    since = (
        old["lastTransitionTime"]
        if old and old.get("status") == status and old.get("lastTransitionTime")
        else at
    )
    return {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": since,
        "observedGeneration": generation,
    }


__all__ = ["Where", "cond", "find", "get", "is_true"]
