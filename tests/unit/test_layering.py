"""What the import contracts (`lint-imports`, pyproject.toml) cannot see, checked on the source's AST.

- lightkube's undocumented modules (`lightkube.core`, `lightkube.config`, `lightkube.generic_resource`)
  and its private session (`._client`) are reached only in `fleetwave/kube/internals.py`, which
  `tests/unit/kube/test_internals.py` pins against the installed lightkube (ADR 0013);
- only `fleetwave/cli/` and `fleetwave/ux/` call the builtin `print` (other writers, such as the
  sandbox worker's framed answers, write to `sys.stdout` on purpose);
- no module keeps a "may import:" header: the layering lives in the contracts, not in comments.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "fleetwave"
INTERNALS = PACKAGE / "kube" / "internals.py"
PRINTERS = (PACKAGE / "cli", PACKAGE / "ux")
LIGHTKUBE_INTERNALS = ("lightkube.core", "lightkube.config", "lightkube.generic_resource")


def _modules() -> list[Path]:
    files = sorted(PACKAGE.rglob("*.py"))
    assert INTERNALS in files, f"{INTERNALS} is missing"
    return files


def _id(path: Path) -> str:
    return str(path.relative_to(PACKAGE))


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _is_lightkube_internal(module: str) -> bool:
    return any(module == name or module.startswith(name + ".") for name in LIGHTKUBE_INTERNALS)


def _lightkube_internal_imports(tree: ast.AST) -> list[str]:
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [
                f"l.{node.lineno} import {a.name}" for a in node.names if _is_lightkube_internal(a.name)
            ]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules = [node.module]
            if node.module == "lightkube":  # `from lightkube import core` reaches the same modules
                modules += [f"lightkube.{a.name}" for a in node.names]
            if any(_is_lightkube_internal(m) for m in modules):
                found.append(f"l.{node.lineno} from {node.module} import ...")
    return found


def _private_client_accesses(tree: ast.AST) -> list[str]:
    return [
        f"l.{node.lineno} ._client"
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and node.attr == "_client"
    ]


def _print_calls(tree: ast.AST) -> list[str]:
    return [
        f"l.{node.lineno} print("
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print"
    ]


@pytest.mark.parametrize("path", [p for p in _modules() if p != INTERNALS], ids=_id)
def test_lightkube_internals_are_reached_only_in_kube_internals(path: Path) -> None:
    tree = _tree(path)
    offending = _lightkube_internal_imports(tree) + _private_client_accesses(tree)
    assert not offending, (
        f"{_id(path)} reaches into lightkube ({'; '.join(offending)}): add a function to "
        "fleetwave/kube/internals.py (and pin it in tests/unit/kube/test_internals.py) instead"
    )


def test_kube_internals_is_where_they_are_reached() -> None:
    # Keeps the rule above honest: were internals.py to stop using them, the checks would find nothing.
    tree = _tree(INTERNALS)
    assert _lightkube_internal_imports(tree)
    assert _private_client_accesses(tree)


@pytest.mark.parametrize(
    "path", [p for p in _modules() if not any(p.is_relative_to(d) for d in PRINTERS)], ids=_id
)
def test_only_cli_and_ux_print(path: Path) -> None:
    offending = _print_calls(_tree(path))
    assert not offending, (
        f"{_id(path)} calls print ({'; '.join(offending)}): log, return the text, or write to sys.stdout"
    )


@pytest.mark.parametrize("path", _modules(), ids=_id)
def test_no_may_import_header(path: Path) -> None:
    docstring = ast.get_docstring(_tree(path)) or ""
    head = path.read_text(encoding="utf-8").splitlines()[:15]
    stale = [line for line in [*docstring.splitlines(), *head] if "may import:" in line.lower()]
    assert not stale, f"{_id(path)} still has a 'may import:' header; the contracts in pyproject.toml rule"
