"""The Helm chart in deploy/chart/fleetwave shares its sources with `fleetwave install` (ADR 0073):
its generated files are exactly what `fleetwave.mgmt.chart` renders, its rules are `mgmt.rbac`'s,
its CRDs are the models' (kept on uninstall), and its versions are the package's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

import fleetwave
from fleetwave.api import crds, families
from fleetwave.mgmt import chart, install, rbac

CHART = Path(__file__).resolve().parents[3] / "deploy" / "chart" / "fleetwave"
REGENERATE = "regenerate with `.venv/bin/python tools/chart/render.py`"


def _load(name: str) -> Any:
    return yaml.safe_load((CHART / name).read_text(encoding="utf-8"))


def test_generated_files_match_their_sources() -> None:
    expected = chart.render_files()
    on_disk = {
        str(p.relative_to(CHART)): p.read_text(encoding="utf-8")
        for p in (CHART / "files").rglob("*")
        if p.is_file()
    }
    assert sorted(on_disk) == sorted(expected), REGENERATE
    for name, text in expected.items():
        assert on_disk[name] == text, f"{name} drifted: {REGENERATE}"


def test_chart_rules_are_the_install_rules() -> None:
    by_kind = {d["kind"]: d for d in install.rbac_documents()}
    assert _load("files/rbac/rules.yaml") == by_kind["ClusterRole"]["rules"]
    assert _load("files/rbac/namespace-rules.yaml") == by_kind["Role"]["rules"]
    upstream = rbac.upstream_documents(install.NAMESPACE, families.UPSTREAM)[0]["rules"]
    assert _load("files/rbac/upstream-rules.yaml") == upstream


def test_chart_scoped_rules_are_the_install_rules_with_watched_namespaces() -> None:
    watch = ("team-a",)
    roles = {
        d["metadata"]["name"]: d["rules"]
        for d in [
            *install.rbac_documents(watch=watch),
            *rbac.upstream_documents(install.NAMESPACE, families.UPSTREAM, watch),
        ]
        if d["kind"] == "ClusterRole"
    }
    assert _load("files/rbac/cluster-scoped-rules.yaml") == roles[rbac.NAME]
    assert _load("files/rbac/watched-rules.yaml") == roles[rbac.WATCHED_NAME]
    assert _load("files/rbac/upstream-cluster-scoped-rules.yaml") == roles[rbac.UPSTREAM_NAME]
    assert _load("files/rbac/upstream-watched-rules.yaml") == roles[f"{rbac.UPSTREAM_NAME}-watched"]


def test_chart_crds_are_the_models_kept_on_uninstall_and_marked_ours() -> None:
    native = {c["metadata"]["name"]: c for c in crds.all_crds()}
    files = sorted((CHART / "files" / "crds" / "native").glob("*.yaml"))
    assert {p.name for p in files} == {crds.file_name(c) for c in native.values()}
    for path in files:
        crd = yaml.safe_load(path.read_text(encoding="utf-8"))
        assert crd["spec"] == native[crd["metadata"]["name"]]["spec"]
        assert crd["metadata"]["annotations"] == {"helm.sh/resource-policy": "keep"}
        # Helm rewrites managed-by; part-of is how `fleetwave install` still knows them as its own.
        assert crd["metadata"]["labels"] == {"app.kubernetes.io/part-of": "fleetwave"}


def test_unserved_variants_hide_exactly_the_upstream_only_kinds() -> None:
    for path in (CHART / "files" / "crds" / "unserved").glob("*.yaml"):
        crd = yaml.safe_load(path.read_text(encoding="utf-8"))
        assert crd["spec"]["names"]["kind"] in crds.UPSTREAM_ONLY
        assert not any(v["served"] for v in crd["spec"]["versions"])
    assert len(list((CHART / "files" / "crds" / "unserved").glob("*.yaml"))) == len(crds.UPSTREAM_ONLY)


def test_chart_version_and_app_version_are_the_package_version() -> None:
    meta = _load("Chart.yaml")
    assert meta["appVersion"] == fleetwave.__version__, "Chart.yaml appVersion must be the package version"
    assert meta["version"] == fleetwave.__version__, "Chart.yaml version must be the package version"


def test_values_schema_refuses_unknown_keys_at_every_level_it_describes() -> None:
    schema = _load("values.schema.json")
    values = _load("values.yaml")

    def check(node: dict[str, Any], value: Any, where: str) -> None:
        if node.get("type") != "object" or "properties" not in node:
            return
        assert node.get("additionalProperties") is False, f"{where or 'values'} accepts typos"
        for key, sub in value.items():
            assert key in node["properties"], f"values.yaml key {where}.{key} is not in the schema"
            check(node["properties"][key], sub, f"{where}.{key}")

    check(schema, values, "")
