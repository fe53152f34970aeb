"""Label selector requirements in the form lightkube's list and watch calls take."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from lightkube import operators


class Requirement(Protocol):
    @property
    def key(self) -> str: ...
    @property
    def op(self) -> str: ...  # = != in notin exists !exists
    @property
    def values(self) -> Sequence[str]: ...


def label_pairs(requirements: Iterable[Requirement]) -> list[tuple[str, Any]]:
    """The `labels=` argument for the same requirements; a list of pairs keeps repeated keys."""
    out: list[tuple[str, Any]] = []
    for r in requirements:
        if r.op == "=":
            out.append((r.key, r.values[0]))
        elif r.op == "!=":
            out.append((r.key, operators.not_equal(r.values[0])))
        elif r.op == "exists":
            out.append((r.key, operators.exists()))
        elif r.op == "!exists":
            out.append((r.key, operators.not_exists()))
        elif r.op == "in":
            out.append((r.key, operators.in_(list(r.values))))
        else:
            out.append((r.key, operators.not_in(list(r.values))))
    return out


def exists(*keys: str) -> dict[str, Any]:
    """The `labels=` argument selecting objects that carry every one of `keys`, whatever the value."""
    return {key: operators.exists() for key in keys}
