"""Sandboxed Lua 5.4 (lupa) evaluation of one health script against one object.

PUC Lua, not LuaJIT: the instruction-count hook does not fire inside JIT traces. The sandbox itself
(whitelisted env, limits, guarded C functions) is `lua_sandbox.lua`; this module owns the runtime,
the memory budget and the mapping of script results to a `State` (ADR 0040).
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any

from lupa import lua54

from fleetwave.health.model import Limits, State

# (apiVersion, kind, namespace or None, name) -> object or None
GetResource = Callable[[str, str, str | None, str], dict[str, Any] | None]

_SOURCE = resources.files("fleetwave.health").joinpath("lua_sandbox.lua").read_text()
_STATUSES = {s.value: s for s in (State.HEALTHY, State.PROGRESSING, State.DEGRADED, State.SUSPENDED)}
_MAX_MESSAGE = 512
# What getResource accepts: a resource's own path, never a subresource or a crafted URL.
_API_VERSION = re.compile(r"^(?:[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?v[0-9]+(?:(?:alpha|beta)[0-9]+)?$")
_KIND = re.compile(r"^[A-Z][A-Za-z0-9]{0,62}$")
_NAME = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._:-]{0,251}[A-Za-z0-9])?$")


@dataclass(slots=True)
class _HostBudget:
    calls: int
    bytes: int


def reference_problem(api_version: str, kind: str, namespace: str | None, name: str) -> str:
    """Why getResource refuses these arguments ("" when they name one ordinary resource)."""
    if not _API_VERSION.match(api_version):
        return "apiVersion is not of the form [group/]version"
    if not _KIND.match(kind):
        return "kind is not a Kubernetes kind name"
    if namespace is not None and not _NAME.match(namespace):
        return "namespace is not a valid name"
    if not _NAME.match(name) or ".." in name:
        return "name is not a valid object name (subresources and paths are not readable)"
    return ""


def _deny_attributes(obj: object, name: object, is_setting: bool) -> object:
    raise AttributeError("Python attributes are not reachable from health scripts")


class LuaSandbox:
    """One Lua state for a series of evaluations on one thread (a LuaRuntime is not thread-safe).

    Memory: `limits.lua_memory_bytes` caps what a script holds, getResource results included: they
    are converted with the limit lifted (lupa's conversion is not a protected call, and running out
    inside it panics), then weighed against the same cap, and one that does not fit is dropped and
    the call fails. Only the judged resource itself is converted before the cap is set. (Adding each
    result to the cap instead let 16 MB of `{}` grow the cap to ~315 MiB.)
    """

    def __init__(self, limits: Limits) -> None:
        self._limits = limits
        self._rt = lua54.LuaRuntime(
            register_eval=False,
            register_builtins=False,
            unpack_returned_tuples=True,
            attribute_filter=_deny_attributes,
            max_memory=limits.lua_memory_bytes,
        )
        self._rt.set_max_memory(0)
        self._run = self._rt.execute(_SOURCE, time.monotonic)
        self._cap = 0

    def evaluate(
        self,
        script: str,
        obj: dict[str, Any] | None,
        get_resource: GetResource,
        metrics: Mapping[str, float] | None = None,
    ) -> tuple[State, str]:
        """Run `script`'s evaluate() on `obj` (nil in Lua for a metrics-only check) with the global
        `metrics` table; every failure becomes (State.ERROR, reason)."""
        try:
            return self._evaluate(script, obj, get_resource, metrics or {})
        except lua54.LuaMemoryError:
            return State.ERROR, "memory limit exceeded"
        except lua54.LuaError as e:
            return State.ERROR, _short(f"lua: {e}")
        finally:
            self._rt.set_max_memory(0)
            self._rt.gccollect()

    def _evaluate(
        self,
        script: str,
        obj: dict[str, Any] | None,
        get_resource: GetResource,
        metrics: Mapping[str, float],
    ) -> tuple[State, str]:
        table = None if obj is None else self._rt.table_from(obj, recursive=True)
        numbers = self._rt.table_from({name: _lua_number(v) for name, v in metrics.items()})
        host_get = self._host_get(get_resource)
        limits = self._limits
        ticks = max(1, math.ceil(limits.lua_instructions / 1000))
        deadline = time.monotonic() + limits.lua_seconds
        self._cap = self._rt.get_memory_used() + limits.lua_memory_bytes
        self._rt.set_max_memory(self._cap, total=True)
        kind, value = self._run(script, table, host_get, ticks, deadline, limits.lua_memory_bytes, numbers)
        self._rt.set_max_memory(0)
        if kind == "ok":
            return _verdict(value)
        reason = str(value)
        if kind == "limit":
            return State.ERROR, reason
        if "not enough memory" in reason:
            return State.ERROR, "memory limit exceeded"
        return State.ERROR, _short(f"{'syntax error' if kind == 'syntax' else 'lua error'}: {reason}")

    def _convert(self, found: dict[str, Any], size: int) -> tuple[bool, Any]:
        """`found` as a Lua table counted against the script's memory cap, or why it does not fit."""
        room = self._cap - self._rt.get_memory_used()
        if size > room:  # its Lua form is at least about its JSON size: refused before converting
            return False, f"memory limit exceeded: {size} bytes of JSON, {max(room, 0)} bytes left"
        self._rt.set_max_memory(0)
        try:
            table = self._rt.table_from(found, recursive=True)
            used = self._rt.get_memory_used()
            if used <= self._cap:
                return True, table
            del table  # unreachable now; Lua's collector frees it when the script next needs memory
            return False, f"memory limit exceeded: it took {used - self._cap + room} bytes, {room} left"
        finally:
            self._rt.set_max_memory(self._cap, total=True)

    def _host_get(self, get_resource: GetResource) -> Callable[..., tuple[bool, Any]]:
        budget = _HostBudget(self._limits.lua_host_calls, self._limits.lua_host_bytes)

        def host_get(*args: Any) -> tuple[bool, Any]:
            # Upstream Sveltos' getResource(tbl, key) is a plain table lookup; keep it working.
            if args and lua54.lua_type(args[0]) == "table":
                return True, args[0][args[1]] if len(args) > 1 else None
            if len(args) != 4 or not all(isinstance(a, str) for a in (args[0], args[1], args[3])):
                return False, "getResource expects (apiVersion, kind, namespace, name) or (table, key)"
            api_version, kind, namespace, name = args
            if namespace is not None and not isinstance(namespace, str):
                return False, "getResource: namespace must be a string or nil"
            return self._read(budget, get_resource, api_version, kind, namespace or None, name)

        return host_get

    def _read(
        self,
        budget: _HostBudget,
        get_resource: GetResource,
        api_version: str,
        kind: str,
        ns: str | None,
        name: str,
    ) -> tuple[bool, Any]:
        call = f"getResource({api_version}, {kind}, {ns}, {name})"
        problem = reference_problem(api_version, kind, ns, name)
        if problem:
            return False, _short(f"{call} refused: {problem}")
        if budget.calls <= 0:
            return False, f"getResource call limit of {self._limits.lua_host_calls} exceeded"
        budget.calls -= 1
        try:
            found = get_resource(api_version, kind, ns, name)
        except Exception as e:  # the reader's failure becomes the script's error, not ours
            return False, _short(f"{call}: {e}")
        if found is None:
            return True, None
        size = len(json.dumps(found, default=str))
        if size > budget.bytes:  # checked before converting: a huge conversion is what lupa can't survive
            return False, f"getResource data limit of {self._limits.lua_host_bytes} bytes exceeded"
        budget.bytes -= size
        ok, converted = self._convert(found, size)
        return (True, converted) if ok else (False, _short(f"{call}: {converted}"))


def _lua_number(value: float) -> float | int:
    """Whole values as Lua integers, so `"n=" .. metrics.n` reads n=3 as in upstream's Lua, not 3.0."""
    return int(value) if value.is_integer() and abs(value) < 2**53 else value


def _verdict(result: Any) -> tuple[State, str]:
    """Map `{healthy=bool}` (API form) or `{status="Healthy"|...}` (docs form) to a State."""
    healthy, status, message = result["healthy"], result["status"], result["message"]
    text = _short(str(message)) if message is not None else ""
    if healthy is not None:
        if not isinstance(healthy, bool):
            return State.ERROR, f"result field 'healthy' must be a boolean, got {healthy!r}"
        return (State.HEALTHY if healthy else State.DEGRADED), text
    if status is not None:
        if not isinstance(status, str) or status not in _STATUSES:
            allowed = ", ".join(_STATUSES)
            return State.ERROR, _short(f"result field 'status' must be one of {allowed}, got {status!r}")
        return _STATUSES[status], text
    # Upstream treats a missing `healthy` as unhealthy.
    return State.DEGRADED, text or "the result sets neither 'healthy' nor 'status'"


def _short(text: str) -> str:
    return text if len(text) <= _MAX_MESSAGE else text[: _MAX_MESSAGE - 3] + "..."
