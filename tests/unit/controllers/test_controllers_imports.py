"""Import rules of the controllers (ADR 0035, ADR 0101), checked from the source as well as by
lint-imports.

- No controller imports a sibling controller: what they share lives in neutral modules
  (`sveltos.rollout_reconcile`, `sveltos.rollout_common`, `shared.*`, ...). Only the composition
  root (`app`, `watches`) imports the controllers, to register and wire them.
- No module of the controllers package reaches Kubernetes but through `fleetwave.kube`.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import fleetwave.controllers

PACKAGE = Path(fleetwave.controllers.__file__).parent
CONTROLLERS = {"sveltos.promotion", "sveltos.profile", "sveltos.summary", "fleet.membercluster", "kubefleet"}
# `app` registers the controllers and `watches` wires them; `agent` composes the delivery code of the
# summary and placement controllers into a pull member's agent (ADR 0106).
COMPOSITION_ROOT = {"app", "watches", "agent.app", "agent.work"}
FORBIDDEN_THIRD_PARTY = ("lightkube", "httpx", "httpx2")
PREFIX = "fleetwave.controllers."


def _dotted(path: Path) -> str:
    return ".".join(path.relative_to(PACKAGE).with_suffix("").parts).removesuffix(".__init__")


MODULES = sorted(_dotted(p) for p in PACKAGE.rglob("*.py") if _dotted(p) != "__init__")


def _source(module: str) -> str:
    path = PACKAGE / f"{module.replace('.', '/')}.py"
    return (path if path.exists() else PACKAGE / module.replace(".", "/") / "__init__.py").read_text()


def _imported(module: str) -> set[str]:
    """Every module name `module` imports, `from x import y` counted as both x and x.y."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(_source(module))):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names |= {f"{node.module}.{a.name}" for a in node.names}
    return names


def _controller_of(module: str) -> str | None:
    return next((c for c in CONTROLLERS if module == c or module.startswith(f"{c}.")), None)


def _controllers_in(names: set[str]) -> set[str]:
    found = (_controller_of(n[len(PREFIX) :]) for n in names if n.startswith(PREFIX))
    return {c for c in found if c is not None}


@pytest.mark.parametrize("module", MODULES)
def test_no_controller_module_imports_a_sibling_controller(module: str) -> None:
    if module in COMPOSITION_ROOT:
        return
    own = _controller_of(module)
    assert _controllers_in(_imported(module)) - {own} == set()


@pytest.mark.parametrize("module", MODULES)
def test_kubernetes_is_reached_only_through_the_access_package(module: str) -> None:
    third_party = {n.split(".")[0] for n in _imported(module)}
    assert third_party.isdisjoint(FORBIDDEN_THIRD_PARTY)


def test_the_modules_the_rules_cover_exist() -> None:
    assert CONTROLLERS | {"sveltos.rollout_reconcile", "shared.context", "kubefleet.run"} <= set(MODULES)
