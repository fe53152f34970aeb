"""Which informer events wake a run: its own spec, never a status write, and a placement's spec only."""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

from fleetwave.controllers import kubefleet


class _Informer:
    def __init__(self) -> None:
        self.handlers: list[Callable[[str, Any], None]] = []

    def on_change(self, handler: Callable[[str, Any], None]) -> None:
        self.handlers.append(handler)

    def emit(self, event: str, obj: Any) -> None:
        for handler in self.handlers:
            handler(event, obj)


class _Controller:
    def __init__(self) -> None:
        self.woken: list[str] = []

    def enqueue(self, key: str) -> None:
        self.woken.append(key)


def _placement(generation: int, status: str = "", deleting: str | None = None) -> Any:
    meta = SimpleNamespace(
        name="web", namespace=None, generation=generation, annotations={}, deletionTimestamp=deleting
    )
    return SimpleNamespace(metadata=meta, status={"observed": status})


def test_a_placements_status_writes_wake_no_run_and_its_spec_and_deletion_do() -> None:
    informer, runs = _Informer(), _Controller()
    kubefleet._on_spec_change(informer, runs, lambda _p: ["run-1", "run-2"])  # type: ignore[arg-type]
    informer.emit("ADDED", _placement(1))
    assert runs.woken == ["run-1", "run-2"]
    informer.emit("MODIFIED", _placement(1, status="clusters available: 1"))
    informer.emit("MODIFIED", _placement(1, status="clusters available: 2"))
    assert runs.woken == ["run-1", "run-2"]
    informer.emit("MODIFIED", _placement(2))
    informer.emit("MODIFIED", _placement(2, deleting="2026-11-25T00:00:00Z"))
    informer.emit("DELETED", _placement(2, deleting="2026-11-25T00:00:00Z"))
    assert runs.woken == ["run-1", "run-2"] * 4


def test_without_a_mapper_the_object_wakes_its_own_key() -> None:
    informer, own = _Informer(), _Controller()
    kubefleet._on_spec_change(informer, own)  # type: ignore[arg-type]
    informer.emit("ADDED", _placement(1))
    informer.emit("MODIFIED", _placement(1, status="x"))
    assert own.woken == ["web"]
