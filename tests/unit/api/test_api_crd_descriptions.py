"""The API documents itself: the generated CRDs (deploy/crds) describe at least 95% of spec fields and
90% of all fields, in the user's words (what `kubectl explain` prints)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

CRDS = Path(__file__).resolve().parents[3] / "deploy" / "crds"
# Words that belong in code comments, not in what a user reads.
INTERNAL = re.compile(r"\bADR\b|docs/adr|fleetwave\.(api|core|controllers|kube)\b|\.py\b|\bTODO\b|issue \d+")


def _fields(node: dict[str, Any], path: str) -> Iterator[tuple[str, dict[str, Any]]]:
    for name, sub in (node.get("properties") or {}).items():
        yield f"{path}.{name}", sub
        yield from _fields(sub, f"{path}.{name}")
    if isinstance(node.get("items"), dict):
        yield from _fields(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        yield from _fields(node["additionalProperties"], f"{path}{{}}")


def _all_fields() -> list[tuple[str, str, dict[str, Any]]]:
    out = []
    for path in sorted(CRDS.glob("*.yaml")):
        crd = yaml.safe_load(path.read_text(encoding="utf-8"))
        schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        kind = crd["spec"]["names"]["kind"]
        top = {k: v for k, v in schema["properties"].items() if k not in ("apiVersion", "kind", "metadata")}
        out += [(kind, p, node) for p, node in _fields({"properties": top}, "")]
    return out


def _share(fields: list[tuple[str, str, dict[str, Any]]]) -> float:
    return sum(1 for _, _, node in fields if node.get("description")) / len(fields)


def test_at_least_95_percent_of_spec_fields_are_described() -> None:
    spec = [f for f in _all_fields() if f[1].startswith(".spec")]
    missing = [f"{kind}{path}" for kind, path, node in spec if not node.get("description")]
    assert _share(spec) >= 0.95, f"{len(missing)} undescribed, e.g. {missing[:15]}"


def test_at_least_90_percent_of_all_fields_are_described() -> None:
    fields = _all_fields()
    missing = [f"{kind}{path}" for kind, path, node in fields if not node.get("description")]
    assert _share(fields) >= 0.90, f"{len(missing)} undescribed, e.g. {missing[:15]}"


def test_every_kind_has_a_description() -> None:
    for path in sorted(CRDS.glob("*.yaml")):
        crd = yaml.safe_load(path.read_text(encoding="utf-8"))
        assert crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"].get("description"), path.name


@pytest.mark.parametrize("crd", sorted(p.name for p in CRDS.glob("*.yaml")))
def test_descriptions_carry_no_internal_notes(crd: str) -> None:
    text = yaml.safe_load((CRDS / crd).read_text(encoding="utf-8"))
    schema = text["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    leaks = [
        f"{path}: {node['description'][:80]}"
        for path, node in _fields(schema, "")
        if INTERNAL.search(str(node.get("description", "")))
    ]
    if INTERNAL.search(str(schema.get("description", ""))):
        leaks.append(f"(kind): {schema['description'][:80]}")
    assert not leaks
