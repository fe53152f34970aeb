"""User code runs only in the sandbox worker (ADR 0041): outside `fleetwave.health` itself, the only
module that may import the evaluators (or lupa/celpy) is the worker; the controller reaches them
through the pool."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[3] / "src" / "fleetwave"
EVALUATORS = {
    "fleetwave.health.checks",
    "fleetwave.health.lua",
    "fleetwave.health.cel",
    "fleetwave.health.cluster_check",
    "lupa",
    "celpy",
}
ALLOWED = {SRC / "sandbox" / "worker.py"}


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found |= {f"{node.module}.{a.name}" for a in node.names}
    return found


def _evaluator(name: str) -> bool:
    return any(name == e or name.startswith(e + ".") for e in EVALUATORS)


def test_only_the_sandbox_worker_imports_the_evaluators() -> None:
    offenders = {
        f"{path.relative_to(SRC)}: {name}"
        for path in SRC.rglob("*.py")
        if path.parent != SRC / "health" and path not in ALLOWED
        for name in _imports(path)
        if _evaluator(name)
    }
    assert offenders == set()


def test_the_scan_sees_the_worker_and_the_controller_port() -> None:
    assert "fleetwave.health.cluster_check" in _imports(SRC / "sandbox" / "worker.py")
    assert "fleetwave.sandbox.pool.CheckPool" in _imports(SRC / "controllers" / "fleet" / "ports.py")
