"""The namespaces a controller reads (`--watch-namespace`, ADR 0074) and the words for what lies outside.

A reference into a namespace the controller does not watch is refused in status with this message
rather than reported "not found": the object may well exist, the controller is not allowed to see it.
"""

from __future__ import annotations


def unwatched(namespace: str, watched: frozenset[str] | None) -> str:
    """Why objects in `namespace` are invisible to a controller watching `watched` ("" if they are not)."""
    if watched is None or namespace in watched:
        return ""
    return (
        f"namespace {namespace} is not watched by this controller (it watches "
        f"{', '.join(sorted(watched))}; see --watch-namespace)"
    )
