"""Which resources a check selects, and how selection problems become failed checks."""

from __future__ import annotations

from typing import Any

import pytest
from health_objects import check, deployment
from lightkube.core.selector import build_selector

from fleetwave.health import cel, selectors
from fleetwave.health.checks import evaluate, evaluate_all
from fleetwave.health.reader import DictResourceReader, KindNotServed
from fleetwave.kube import selectors as kube_selectors

FLEET = [
    deployment("api", labels={"tier": "web", "team": "a"}),
    deployment("worker", labels={"tier": "batch", "team": "a"}),
    deployment("legacy", labels={"tier": "web"}),
    deployment("other-ns", namespace="ops", labels={"tier": "web"}),
]


def _names(**fields: Any) -> list[str]:
    result = evaluate(check(**fields), DictResourceReader(FLEET))
    assert result.ok, result.message
    return [v.name for v in result.resources]


def test_a_check_without_script_or_rules_passes_on_existence() -> None:
    result = evaluate(check(namespace="ops"), DictResourceReader(FLEET))
    assert result.ok
    assert result.message == "health check 'probe': 1 Deployment healthy"
    assert result.resources[0].message == "exists"


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        ([{"key": "tier", "operation": "Equal", "value": "web"}], ["api", "legacy"]),
        ([{"key": "tier", "operation": "Different", "value": "web"}], ["worker"]),
        ([{"key": "team", "operation": "Has"}], ["api", "worker"]),
        ([{"key": "team", "operation": "DoesNotHave"}], ["legacy"]),
        (
            [
                {"key": "tier", "operation": "Equal", "value": "web"},
                {"key": "team", "operation": "Has"},
            ],
            ["api"],
        ),
    ],
)
def test_label_filters_are_anded(filters: list[dict[str, str]], expected: list[str]) -> None:
    assert _names(namespace="apps", labelFilters=filters) == expected


def test_no_namespace_means_all_namespaces() -> None:
    assert _names() == ["api", "legacy", "worker", "other-ns"]


def test_resource_name_filter() -> None:
    assert _names(resourceName="worker") == ["worker"]


def test_zero_matches_fail_with_a_description_of_the_selection() -> None:
    c = check(namespace="apps", resourceName="nope", labelFilters=[{"key": "tier", "operation": "Has"}])
    result = evaluate(c, DictResourceReader(FLEET))
    assert not result.ok
    assert result.resources == ()
    assert result.message == (
        "health check 'probe': no resource matched: Deployment apps/v1 in namespace apps "
        "with labels tier named nope"
    )


def test_wrong_version_matches_nothing() -> None:
    assert not evaluate(check(version="v1beta1"), DictResourceReader(FLEET)).ok


def test_cluster_scoped_objects_ignore_the_namespace_filter() -> None:
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "apps"}}
    result = evaluate(check(group=None, kind="Namespace", namespace="anything"), DictResourceReader([ns]))
    assert result.ok
    assert result.resources[0].ref == "Namespace apps"


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"jobCheck": {"jobRef": {"kind": "ConfigMap", "name": "j"}}}, "jobCheck is not supported"),
        ({"metricQueries": [{"name": "m", "query": "up"}]}, "metricQueries are set but metricSource is not"),
        ({"kind": None}, "the check selects no resources: kind is empty"),
        ({"version": None}, "the check selects kind Deployment but sets no version"),
    ],
)
def test_unsupported_checks_fail_clearly(fields: dict[str, Any], reason: str) -> None:
    result = evaluate(check(**fields), DictResourceReader(FLEET))
    assert not result.ok
    assert result.message.startswith(f"health check 'probe': {reason}")


class _Unserved(DictResourceReader):
    def list(self, api_version: str, kind: str, **_: Any) -> list[dict[str, Any]]:
        raise KindNotServed(f"kind {kind} is not served under {api_version} by this cluster")


class _Broken(DictResourceReader):
    def list(self, api_version: str, kind: str, **_: Any) -> list[dict[str, Any]]:
        raise ConnectionError("connection refused")


class _Garbage(DictResourceReader):
    def list(self, api_version: str, kind: str, **_: Any) -> list[Any]:
        return [42]


def test_reader_problems_are_failed_checks_not_exceptions() -> None:
    unserved = evaluate(check(group="example.com", kind="Widget"), _Unserved([]))
    assert unserved.message == (
        "health check 'probe': kind Widget is not served under example.com/v1 by this cluster"
    )
    broken = evaluate(check(namespace="apps"), _Broken([]))
    assert broken.message == (
        "health check 'probe': cannot list Deployment apps/v1 in namespace apps: "
        "ConnectionError: connection refused"
    )
    garbage = evaluate(check(), _Garbage([]))
    assert not garbage.ok
    assert garbage.message.endswith("AttributeError: 'int' object has no attribute 'get'")


def test_unexpected_failures_inside_evaluation_do_not_escape(monkeypatch: pytest.MonkeyPatch) -> None:
    def explode(*_: Any) -> dict[str, Any]:
        raise RuntimeError("unexpected")

    monkeypatch.setattr(cel, "activation", explode)
    result = evaluate(check(evaluateCEL=[{"name": "r", "rule": "true"}]), DictResourceReader(FLEET))
    assert not result.ok
    assert result.message == "health check 'probe': internal error: RuntimeError: unexpected"


def test_evaluate_all_keeps_order() -> None:
    checks = [check(name="one"), check(name="two", resourceName="nope")]
    results = evaluate_all(checks, DictResourceReader(FLEET))
    assert [(r.check, r.ok) for r in results] == [("one", True), ("two", False)]


@pytest.mark.parametrize(
    ("selector", "labels", "expected"),
    [
        ("a=1", {"a": "1"}, True),
        ("a==1", {"a": "2"}, False),
        ("a!=1", {}, True),
        ("a", {"a": ""}, True),
        ("!a", {"a": "x"}, False),
        ("a in (1, 2),b notin (x)", {"a": "2"}, True),
        ("a in (1,2)", {}, False),
        ("a notin (1)", {"a": "1"}, False),
        ("example.com/role=db, tier", {"example.com/role": "db", "tier": "x"}, True),
        ("", {}, True),
    ],
)
def test_selector_strings_match_like_kubernetes(
    selector: str, labels: dict[str, str], expected: bool
) -> None:
    assert selectors.matches(selectors.parse(selector), labels) is expected


@pytest.mark.parametrize("selector", ["a=1,b=2", "a!=1,a!=2", "a,!b", "a in (x,y)", "a notin (x)"])
def test_selector_round_trips_through_lightkube(selector: str) -> None:
    rebuilt = build_selector(kube_selectors.label_pairs(selectors.parse(selector)))
    assert selectors.parse(rebuilt) == selectors.parse(selector)


@pytest.mark.parametrize("selector", ["a=(", "=1", "a in 1", "a b"])
def test_invalid_selectors_are_rejected(selector: str) -> None:
    with pytest.raises(ValueError, match="invalid label selector"):
        selectors.parse(selector)


def test_dict_reader_get() -> None:
    reader = DictResourceReader(FLEET)
    found = reader.get("apps/v1", "Deployment", namespace="ops", name="other-ns")
    assert found is not None
    assert found["metadata"]["namespace"] == "ops"
    assert reader.get("apps/v1", "Deployment", namespace="apps", name="other-ns") is None
