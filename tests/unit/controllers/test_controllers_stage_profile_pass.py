"""A stage profile whose summaries the promotion could not write ahead is passed as soon as the
cache holds what the promotion wrote: not before (the pass would find the profile as it was), and
not `STAGE_PROFILE_AHEAD` after its event (that delay is for profiles whose summaries are written)."""

from __future__ import annotations

import datetime as dt
from types import SimpleNamespace
from typing import Any

from fleetwave.api import families
from fleetwave.controllers.shared.context import Context
from fleetwave.controllers.sveltos import promotion


class _Cache:
    family = families.NATIVE

    def __init__(self, version: str | None) -> None:
        self.version = version

    def get(self, kind: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        if self.version is None:
            return None
        return {"metadata": {"name": name, "resourceVersion": self.version}}


def _ctx(cached: str | None, woken: list[str]) -> Context:
    ctx = Context(
        client=None,  # type: ignore[arg-type]
        cache=_Cache(cached),  # type: ignore[arg-type]
        recorder=None,  # type: ignore[arg-type]
        helm=None,  # type: ignore[arg-type]
        health=None,  # type: ignore[arg-type]
        namespace="fleetwave-system",
        clock=lambda: dt.datetime(2026, 11, 26, tzinfo=dt.UTC),
    )
    ctx.queues.add("ClusterProfile", woken.append)
    return ctx


def _written(version: str) -> Any:
    return SimpleNamespace(metadata=SimpleNamespace(name="web-dev", resourceVersion=version))


def test_a_profile_the_cache_holds_as_written_is_passed_at_once() -> None:
    woken: list[str] = []
    ctx = _ctx("8", woken)
    promotion._pass_now(ctx, "web-dev", _written("8"))
    assert woken == ["web-dev"]
    assert not ctx.wakeups.arrived("web-dev", "8")  # nothing left for its event


def test_a_profile_the_cache_does_not_hold_yet_is_passed_when_its_event_comes() -> None:
    for cached in ("7", None):  # an older version; not created in the cache yet
        woken: list[str] = []
        ctx = _ctx(cached, woken)
        promotion._pass_now(ctx, "web-dev", _written("8"))
        assert woken == []  # a pass now would see version 7 (or nothing) and do nothing
        assert not ctx.wakeups.arrived("web-dev", "7")  # only the version it wrote is expected
        assert ctx.wakeups.arrived("web-dev", "8")
