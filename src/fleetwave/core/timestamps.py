"""RFC 3339 timestamps as the Kubernetes API writes them (UTC, whole seconds, `Z`), in and out.

The one place fleetwave formats and parses them: the pure core needs it, so it lives here, and
every other layer (API types, controllers, the access package, the CLI) imports it from here.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any


def fmt(t: datetime) -> str:
    """`2026-01-02T03:04:05Z`; naive datetimes are taken as UTC."""
    aware = t if t.tzinfo is not None else t.replace(tzinfo=UTC)
    return aware.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def fmt_precise(t: datetime) -> str:
    """`2026-01-02T03:04:05.123456Z`: for records that must round-trip exactly (the engine's own
    instants, where whole seconds could move a gate's deadline); still parsed by `parse`."""
    aware = t if t.tzinfo is not None else t.replace(tzinfo=UTC)
    return aware.astimezone(UTC).isoformat().replace("+00:00", "Z")


def fmt_optional(t: datetime | None) -> str | None:
    return None if t is None else fmt(t)


def parse(value: str) -> datetime:
    """An aware UTC datetime; ValueError for anything that is not RFC 3339."""
    parsed = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC)


def parse_optional(value: Any) -> datetime | None:
    """None for empty values; ValueError for malformed ones."""
    if not value:
        return None
    return parse(str(value))
