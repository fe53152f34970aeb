"""Result and limit types shared by the health evaluators (frozen dataclasses, no behaviour)."""

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
    """Per-resource budget of one Lua evaluation and of one CEL rule. The worker process around them
    (ADR 0041) holds the wall-time and memory limits that these in-interpreter checks cannot guarantee."""

    lua_instructions: int = 10_000_000
    lua_memory_bytes: int = 32 * 1024 * 1024
    lua_seconds: float = 2.0
    # getResource: calls per evaluation, and bytes of JSON it may bring into the script in total.
    lua_host_calls: int = 100
    lua_host_bytes: int = 16 * 1024 * 1024
    # CEL: syntax-tree nodes one rule may visit on one resource (cel-python has no cost model).
    cel_cost: int = 100_000
    # Metric queries of one check (ADR 0079): how many, each one's time, all of them together, and
    # the size of one answer. A check's queries end within check + query seconds (12 s), inside the
    # worker's 20 s per judgement.
    metric_queries: int = 16
    metric_query_seconds: float = 4.0
    metric_check_seconds: float = 8.0
    metric_response_bytes: int = 1024 * 1024


DEFAULT_LIMITS = Limits()
