"""getResource reads only ordinary resources, and its calls and data count against the check's budget."""

from __future__ import annotations

from typing import Any

import pytest
from health_objects import check, deployment

from fleetwave.health import cel
from fleetwave.health.checks import evaluate
from fleetwave.health.lua import reference_problem
from fleetwave.health.model import Limits
from fleetwave.health.reader import DictResourceReader


class CountingReader(DictResourceReader):
    def __init__(self, objects: list[dict[str, Any]]) -> None:
        super().__init__(objects)
        self.gets: list[tuple[str, str, str | None, str]] = []

    def get(self, api_version: str, kind: str, *, namespace: str | None, name: str) -> dict[str, Any] | None:
        self.gets.append((api_version, kind, namespace, name))
        return super().get(api_version, kind, namespace=namespace, name=name)


def _config_map(name: str, size: int = 10) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "default"},
        "data": {"blob": "x" * size},
    }


def _script(body: str) -> str:
    return f"function evaluate()\n{body}\nreturn {{healthy = true}}\nend"


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        (("v1", "Service", "default", "svc:80/proxy/x"), "name is not a valid object name"),
        (("v1", "Pod", "default", "p/exec"), "name is not a valid object name"),
        (("v1", "Pod", "default", "a..b"), "name is not a valid object name"),
        (("v1", "Pod", "../kube-system", "p"), "namespace is not a valid name"),
        (("v1/../../api", "Pod", "default", "p"), "apiVersion is not of the form"),
        (("v1", "pods/log", "default", "p"), "kind is not a Kubernetes kind name"),
    ],
)
def test_paths_and_subresources_are_refused(args: tuple[str, str, str | None, str], problem: str) -> None:
    assert problem in reference_problem(*args)


@pytest.mark.parametrize(
    "args",
    [
        ("v1", "ConfigMap", "default", "settings"),
        ("rbac.authorization.k8s.io/v1", "ClusterRole", None, "system:controller:job-controller"),
        ("cert-manager.io/v1beta1", "ClusterIssuer", None, "letsencrypt.prod"),
    ],
)
def test_ordinary_references_are_accepted(args: tuple[str, str, str | None, str]) -> None:
    assert reference_problem(*args) == ""


def test_a_refused_reference_never_reaches_the_reader() -> None:
    reader = CountingReader([deployment("web")])
    script = _script('getResource("v1", "Service", "default", "svc:80/proxy/x")')
    result = evaluate(check(script=script), reader)
    assert not result.ok
    assert "refused: name is not a valid object name" in result.message
    assert reader.gets == []


def test_calls_beyond_the_budget_fail_the_check() -> None:
    reader = CountingReader([deployment("web"), _config_map("c")])
    script = _script('for i = 1, 50 do getResource("v1", "ConfigMap", "default", "c") end')
    result = evaluate(check(script=script), reader, limits=Limits(lua_host_calls=10))
    assert "getResource call limit of 10 exceeded" in result.message
    assert len(reader.gets) == 10


def test_data_beyond_the_budget_fails_before_it_is_converted() -> None:
    reader = CountingReader([deployment("web"), _config_map("big", size=300_000)])
    script = _script('for i = 1, 5 do getResource("v1", "ConfigMap", "default", "big") end')
    result = evaluate(check(script=script), reader, limits=Limits(lua_host_bytes=1_000_000))
    assert "getResource data limit of 1000000 bytes exceeded" in result.message
    assert len(reader.gets) == 4  # three fit, the fourth would cross the limit


def test_overlong_cel_rules_are_refused_before_compiling() -> None:
    literal = "[" + ",".join(["1"] * 100_000) + "].size() > 0"
    outcome = cel.evaluate_rule(literal, cel.activation({"metadata": {}}))
    assert outcome.broken == f"does not compile: longer than {cel.MAX_RULE_CHARS} characters"
