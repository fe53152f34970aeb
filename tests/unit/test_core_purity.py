"""The functional core stays pure: an allowlist of imports and no clock reads."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

CORE = Path(__file__).resolve().parents[2] / "src" / "fleetwave" / "core"
ALLOWED = {
    "__future__",
    "collections",
    "collections.abc",
    "dataclasses",
    "datetime",
    "enum",
    "functools",
    "hashlib",
    "heapq",
    "itertools",
    "json",
    "math",
    "typing",
    "zoneinfo",
    "croniter",
    "jsonpatch",  # RFC 6902, pure (per-cluster overrides)
    "jsonpointer",
}
FORBIDDEN_CALLS = (".now(", "utcnow", "time.time", "time.monotonic", "today(")


def _modules() -> list[Path]:
    files = sorted(CORE.glob("*.py"))
    assert files, f"no core modules found under {CORE}"
    return files


def _imports(tree: ast.AST) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, "core uses absolute imports only"
            names.add(node.module or "")
    return names


@pytest.mark.parametrize("path", _modules(), ids=lambda p: p.name)
def test_core_module_imports_only_the_allowlist(path: Path) -> None:
    imported = _imports(ast.parse(path.read_text()))
    bad = {n for n in imported if n not in ALLOWED and not n.startswith("fleetwave.core")}
    assert not bad, f"{path.name} imports {sorted(bad)}"


@pytest.mark.parametrize("path", _modules(), ids=lambda p: p.name)
def test_core_module_never_reads_the_clock(path: Path) -> None:
    source = path.read_text()
    tree = ast.parse(source)
    calls = [ast.get_source_segment(source, n) or "" for n in ast.walk(tree) if isinstance(n, ast.Call)]
    offending = [c for c in calls if any(f in c for f in FORBIDDEN_CALLS)]
    assert not offending, f"{path.name} reads the clock: {offending}"
