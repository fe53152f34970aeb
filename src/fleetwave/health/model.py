"""Result and limit types shared by the health evaluators (frozen dataclasses, no behaviour).

may import: stdlib
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class State(StrEnum):
    """Health of one resource. Names follow the Sveltos docs' `hs.status` values plus `Error`."""

    HEALTHY = "Healthy"
    PROGRESSING = "Progressing"
    DEGRADED = "Degraded"
    SUSPENDED = "Suspended"
    # The check itself could not judge the resource (script error, limit hit, non-bool rule, ...).
    ERROR = "Error"


@dataclass(frozen=True, slots=True)
class ResourceVerdict:
    api_version: str
    kind: str
    namespace: str
    name: str
    state: State
    message: str = ""

    @property
    def ok(self) -> bool:
        return self.state is State.HEALTHY

    @property
    def ref(self) -> str:
        """`Kind ns/name`, or `Kind name` for cluster-scoped objects."""
        return f"{self.kind} {self.namespace}/{self.name}" if self.namespace else f"{self.kind} {self.name}"


@dataclass(frozen=True, slots=True)
class HealthResult:
    ok: bool
    message: str
    resources: tuple[ResourceVerdict, ...] = ()
    check: str = ""


@dataclass(frozen=True, slots=True)
class Limits:
    """Per-resource budget of one Lua evaluation (CEL has no cost model in cel-python)."""

    lua_instructions: int = 10_000_000
    lua_memory_bytes: int = 32 * 1024 * 1024
    lua_seconds: float = 2.0


DEFAULT_LIMITS = Limits()
