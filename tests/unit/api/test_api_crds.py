"""Committed CRDs match the models; schemas are structural; CEL rules agree with the Python checks."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import celpy
import pytest
import yaml

from fleetwave.api import validation as v
from fleetwave.api.crds import all_crds, render_files

CRD_DIR = Path(__file__).resolve().parents[3] / "deploy" / "crds"


def test_committed_crds_match_the_models() -> None:
    expected = render_files()
    on_disk = {p.name: p.read_text(encoding="utf-8") for p in CRD_DIR.glob("*.yaml")}
    assert sorted(on_disk) == sorted(expected), "run `fleetwave crds --out deploy/crds`"
    for name, text in expected.items():
        assert on_disk[name] == text, (
            f"{name} drifted from the models: run `fleetwave crds --out deploy/crds`"
        )


def _nodes(schema: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    yield path, schema
    for name, sub in (schema.get("properties") or {}).items():
        yield from _nodes(sub, f"{path}.{name}")
    if isinstance(schema.get("items"), dict):
        yield from _nodes(schema["items"], f"{path}[]")
    if isinstance(schema.get("additionalProperties"), dict):
        yield from _nodes(schema["additionalProperties"], f"{path}{{}}")


CRDS = {c["metadata"]["name"]: c for c in all_crds()}


@pytest.mark.parametrize("name", sorted(CRDS))
def test_schema_is_structural(name: str) -> None:
    crd = CRDS[name]
    (version,) = crd["spec"]["versions"]
    root = version["schema"]["openAPIV3Schema"]
    assert root["properties"]["metadata"] == {"type": "object"}
    for path, node in _nodes(root):
        assert not {"$ref", "$defs", "title", "nullable", "const"} & node.keys(), path
        assert node.get("default", 0) is not None, path
        if node.get("x-kubernetes-int-or-string"):
            assert node["anyOf"] == [{"type": "integer"}, {"type": "string"}], path
            continue
        assert "anyOf" not in node, path
        if {k: v for k, v in node.items() if k != "description"} == {
            "x-kubernetes-preserve-unknown-fields": True
        }:
            continue  # any JSON value (a JSON patch's value), as upstream's apiextensionsv1.JSON
        assert node.get("type") in {"object", "array", "string", "integer", "boolean", "number"}, path
        assert not ("properties" in node and "additionalProperties" in node), path
        if node.get("x-kubernetes-list-type") == "map":
            item = node["items"]
            assert set(node["x-kubernetes-list-map-keys"]) <= set(item.get("required", [])), path
    assert crd["spec"]["names"]["shortNames"]


def test_short_names_and_columns() -> None:
    short = {c["spec"]["names"]["kind"]: c["spec"]["names"]["shortNames"] for c in CRDS.values()}
    assert short["ClusterResourcePlacement"] == ["crp"]
    assert short["ClusterStagedUpdateRun"] == ["csur"]
    assert short["ClusterApprovalRequest"] == ["careq"]
    assert short["ApprovalRequest"] == ["areq"]
    csur = CRDS["clusterstagedupdateruns.fleetwave.io"]["spec"]["versions"][0]
    cols = [c["name"] for c in csur["additionalPrinterColumns"] if not c.get("priority")]
    assert cols == [
        "Placement",
        "Resource-Snapshot-Index",
        "Policy-Snapshot-Index",
        "Initialized",
        "Progressing",
        "Succeeded",
        "Age",
    ]
    assert csur["subresources"] == {"status": {}}
    promo = CRDS["clusterpromotions.fleetwave.io"]["spec"]["versions"][0]
    assert [c["name"] for c in promo["additionalPrinterColumns"] if not c.get("priority")] == [
        "Current-Stage",
        "Ready",
        "Age",
    ]


def _rules(node: Any, path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    if isinstance(node, dict):
        for rule in node.get("x-kubernetes-validations", []):
            yield path, rule
        for k, v in node.items():
            yield from _rules(v, f"{path}/{k}")
    elif isinstance(node, list):
        for v in node:
            yield from _rules(v, path)


ALL_RULES = sorted({r["rule"] for c in CRDS.values() for _, r in _rules(c)})


def test_cel_rules_compile() -> None:
    env = celpy.Environment()
    assert len(ALL_RULES) > 10
    for rule in ALL_RULES:
        env.compile(rule)


def _rule_at(crd: str, path_suffix: str) -> str:
    (rule,) = [r["rule"] for p, r in _rules(CRDS[crd]) if p.endswith(path_suffix)]
    return rule


def _eval(rule: str, value: Any, old: Any = None) -> bool:
    env = celpy.Environment()
    prog = env.program(env.compile(rule))
    act = {"self": celpy.json_to_cel(value)}
    if old is not None:
        act["oldSelf"] = celpy.json_to_cel(old)
    return bool(prog.evaluate(act))


def test_cel_rules_agree_with_python() -> None:
    promo = "clusterpromotions.fleetwave.io"
    trigger = _rule_at(promo, "/stages/items/properties/trigger")
    assert _eval(trigger, {"auto": {}})
    assert not _eval(trigger, {})
    assert not _eval(trigger, {"auto": {}, "manual": {}})
    unique = _rule_at(promo, "/openAPIV3Schema/properties/spec")
    assert _eval(unique, {"stages": [{"name": "a"}, {"name": "b"}]})
    assert not _eval(unique, {"stages": [{"name": "a"}, {"name": "a"}]})
    cron = _rule_at(promo, "/promotionWindow/properties/from")
    assert _eval(cron, "0 10 * * 1-5")
    assert _eval(cron, "@daily")
    assert _eval(cron, "*/15 * * * *")
    assert not _eval(cron, "tomorrow")
    assert not _eval(cron, "0 10 * *")
    csus = "clusterstagedupdatestrategies.fleetwave.io"
    task = _rule_at(csus, "/afterStageTasks/items")
    assert _eval(task, {"type": "TimedWait", "waitTime": "1m"})
    assert not _eval(task, {"type": "TimedWait"})
    assert not _eval(task, {"type": "Approval", "waitTime": "1m"})
    conc = _rule_at(csus, "/maxConcurrency")
    assert _eval(conc, 1)
    assert _eval(conc, "50%")
    assert not _eval(conc, 0)
    state = _rule_at("stagedupdateruns.fleetwave.io", "/properties/state")
    assert _eval(state, "Run", "Initialize")
    assert _eval(state, "Stop", "Run")
    assert not _eval(state, "Stop", "Initialize")
    assert not _eval(state, "Initialize", "Run")


def test_patterns_match_python_checks() -> None:
    for good in ("10%", "0%", "100%", "5", 5):
        assert v.check_int_or_percent(good, minimum=0, pattern=v.MAX_UPDATE_PCT_PATTERN, what="x") == good
        assert isinstance(good, int) or re.fullmatch(v.MAX_UPDATE_PCT_PATTERN, good)
    for bad in ("101%", "1.5%", "-1", "10 %"):
        assert not re.fullmatch(v.MAX_UPDATE_PCT_PATTERN, bad)
        with pytest.raises(ValueError, match="maxUpdate"):
            v.check_int_or_percent(bad, minimum=0, pattern=v.MAX_UPDATE_PCT_PATTERN, what="maxUpdate")
    assert yaml.safe_load("d: 1h30m")["d"] == "1h30m"
    for dur in ("5m", "1h30m", "10s", "1.5h", "0"):
        assert re.fullmatch(v.DURATION_PATTERN, dur)
    for dur in ("1d", "5", "m"):
        assert not re.fullmatch(v.DURATION_PATTERN, dur)
    for name in ("kubernetes-fleet.io/node-count", "cpu", "kubernetes.azure.com/skus/Standard_B4ms/count"):
        assert v.check_property_name(name) == name
        assert re.fullmatch(v.PROPERTY_NAME_PATTERN, name)
    for name in ("", "-a", "a/", "a b", "a//b"):
        assert not re.fullmatch(v.PROPERTY_NAME_PATTERN, name)
        with pytest.raises(ValueError, match="property name"):
            v.check_property_name(name)
    for value in ("5", "-1.5", ".5", "1e3", "4Gi", "500m", "+2k"):
        assert v.check_quantity(value) == value
        assert re.fullmatch(v.QUANTITY_PATTERN, value)
    for value in ("", "five", "1.2.3", "4 Gi", "4gi", "1e"):
        assert not re.fullmatch(v.QUANTITY_PATTERN, value)
        with pytest.raises(ValueError, match="quantity"):
            v.check_quantity(value)


def test_property_operators_and_sort_orders_are_enums_in_the_crd() -> None:
    crd = CRDS["clusterresourceplacements.fleetwave.io"]
    root = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    operators = [
        n["enum"] for p, n in _nodes(root) if p.endswith("propertySelector.matchExpressions[].operator")
    ]
    orders = [n["enum"] for p, n in _nodes(root) if p.endswith("propertySorter.sortOrder")]
    assert operators == [["Gt", "Ge", "Eq", "Ne", "Lt", "Le"]] * 2  # required and preferred terms
    assert orders == [["Ascending", "Descending"]] * 2


@pytest.mark.parametrize(
    "crd",
    [
        "clusterstagedupdateruns.fleetwave.io",
        "stagedupdateruns.fleetwave.io",
        "clusterresourceplacements.fleetwave.io",
        "resourceplacements.fleetwave.io",
    ],
)
def test_delivery_ledgers_are_atomic_maps_so_the_api_server_tracks_no_field_per_cluster(crd: str) -> None:
    # ADR 0136: undeclared, each cluster's ledger entry cost five managedFields entries, rewritten
    # on every status write.
    status = CRDS[crd]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"]
    for ledger in ("deliveries", "deletions"):
        field = status["properties"][ledger]
        assert field["x-kubernetes-map-type"] == "atomic"
        assert field["x-kubernetes-preserve-unknown-fields"] is True
        assert field["type"] == "object"
