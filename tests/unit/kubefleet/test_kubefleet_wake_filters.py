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


class _Cache:
    """Two placements (one taking namespace `app` by name, one every namespace labelled team=a, and
    ClusterRoles) and the namespaces the informers hold."""

    def __init__(self) -> None:
        by_name = [{"kind": "Namespace", "version": "v1", "group": "", "name": "app"}]
        by_label = [
            {
                "kind": "Namespace",
                "version": "v1",
                "group": "",
                "labelSelector": {"matchLabels": {"team": "a"}},
            },
            {"kind": "ClusterRole", "version": "v1", "group": "rbac.authorization.k8s.io"},
        ]
        self.placements = [
            {"metadata": {"name": "by-name"}, "spec": {"resourceSelectors": by_name}},
            {"metadata": {"name": "by-label"}, "spec": {"resourceSelectors": by_label}},
        ]
        self.namespaces = {
            "app": {"metadata": {"name": "app"}},
            "team-a": {"metadata": {"name": "team-a", "labels": {"team": "a"}}},
            "floor": {"metadata": {"name": "floor", "labels": {"team": "b"}}},
        }

    def list(self, kind: str) -> list[dict[str, Any]]:
        assert kind == "ClusterResourcePlacement"
        return self.placements

    def get(self, kind: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        assert kind == "Namespace"
        assert namespace is None
        return self.namespaces.get(name)


def _changed(kind: str, name: str, namespace: str | None = None) -> Any:
    return SimpleNamespace(kind=kind, metadata=SimpleNamespace(name=name, namespace=namespace))


def test_a_change_wakes_only_the_placements_that_may_select_it() -> None:
    """ADR 0127: a ConfigMap written in a namespace no placement takes wakes none (it woke all)."""
    ctx = SimpleNamespace(cache=_Cache())
    scope = kubefleet.nm.CLUSTER
    configmaps = kubefleet._selecting(ctx, scope, "ConfigMap")  # type: ignore[arg-type]
    assert configmaps(_changed("ConfigMap", "cm", "app")) == ["by-name"]
    assert configmaps(_changed("ConfigMap", "cm", "team-a")) == ["by-label"]
    assert configmaps(_changed("ConfigMap", "cm", "floor")) == []
    # A namespace the cache does not hold yet may match a label selector once it does.
    assert configmaps(_changed("ConfigMap", "cm", "new")) == ["by-label"]
    namespaces = kubefleet._selecting(ctx, scope, "Namespace")  # type: ignore[arg-type]
    assert namespaces(_changed("Namespace", "floor")) == ["by-name", "by-label"]  # labels may change
    roles = kubefleet._selecting(ctx, scope, "ClusterRole")  # type: ignore[arg-type]
    assert roles(_changed("ClusterRole", "viewer")) == ["by-label"]
