"""Health checks against a real member cluster through KubeResourceReader (no mocked API)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from lightkube import Client, codecs

from fleetwave.api.sveltos import ValidateHealth
from fleetwave.health.checks import evaluate
from fleetwave.health.reader import KindNotServed, KubeResourceReader
from fleetwave.health.readiness import is_ready

LUA_AVAILABLE = """
function evaluate()
  local settings = getResource("v1", "ConfigMap", obj.metadata.namespace, "settings")
  local hs = {status = "Progressing", message = "waiting for replicas"}
  if settings == nil then
    hs.status = "Degraded"
    hs.message = "ConfigMap settings is missing"
  elseif obj.status and obj.status.availableReplicas == obj.spec.replicas then
    hs.status = "Healthy"
    hs.message = "replicas available, mode " .. settings.data.mode
  end
  return hs
end
"""


def _wait_for(predicate: Callable[[], bool], *, what: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.5)


def _apply(client: Client, doc: dict[str, Any]) -> None:
    client.apply(codecs.from_dict(doc), force=True)


def _deployment(namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": namespace, "labels": {"tier": "front"}},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "registry.invalid/web:1"}]},
            },
        },
    }


def _check(**fields: Any) -> ValidateHealth:
    return ValidateHealth.model_validate({"name": "web-health", "group": "apps", "version": "v1", **fields})


@pytest.fixture
def member(members: dict[str, Client]) -> Client:
    return members[sorted(members)[0]]


def test_available_deployment_passes_lua_and_cel_checks(member: Client, namespace: str) -> None:
    _apply(member, _deployment(namespace))
    _apply(member, _deployment(namespace) | {"metadata": {"name": "api", "namespace": namespace}})
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings", "namespace": namespace}}
    _apply(member, cm | {"data": {"mode": "strict"}})
    reader = KubeResourceReader(member)

    def web_ready() -> bool:
        web = reader.get("apps/v1", "Deployment", namespace=namespace, name="web")
        return web is not None and is_ready(web)[0]

    _wait_for(web_ready, what="Deployment web ready by the default readiness rules")

    front = [{"key": "tier", "operation": "Equal", "value": "front"}]
    lua = evaluate(
        _check(kind="Deployment", namespace=namespace, labelFilters=front, script=LUA_AVAILABLE), reader
    )
    assert lua.ok, lua.message
    assert [(v.kind, v.namespace, v.name) for v in lua.resources] == [("Deployment", namespace, "web")]
    assert lua.resources[0].message == "replicas available, mode strict"

    rule = (
        "self.status.availableReplicas == resource.spec.replicas && "
        "self.status.conditions.exists(c, c.type == 'Available' && c.status == 'True')"
    )
    rules = [{"name": "available", "rule": rule}]
    cel = evaluate(
        _check(kind="Deployment", namespace=namespace, resourceName="web", evaluateCEL=rules), reader
    )
    assert cel.ok, cel.message
    assert [v.name for v in cel.resources] == ["web"]


def test_missing_kind_and_zero_matches_fail_clearly(member: Client, namespace: str) -> None:
    reader = KubeResourceReader(member)
    unknown_group = evaluate(_check(group="widgets.example.com", kind="Widget", namespace=namespace), reader)
    assert not unknown_group.ok
    assert unknown_group.message == (
        "health check 'web-health': kind Widget is not served under widgets.example.com/v1 by this cluster"
    )
    unknown_kind = evaluate(_check(kind="Gadget"), reader)
    assert (
        unknown_kind.message
        == "health check 'web-health': kind Gadget is not served under apps/v1 by this cluster"
    )
    none = evaluate(_check(kind="Deployment", namespace=namespace), reader)
    assert not none.ok
    assert none.message == (
        f"health check 'web-health': no resource matched: Deployment apps/v1 in namespace {namespace}"
    )


def test_reader_selects_by_labels_on_the_server_and_handles_scope(member: Client, namespace: str) -> None:
    for name, role in (("a", "db"), ("b", "cache"), ("c", None)):
        labels = {"role": role} if role else {}
        _apply(
            member,
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": namespace, "labels": labels},
            },
        )
    reader = KubeResourceReader(member)

    def names(selector: str | None) -> list[str]:
        found = reader.list("v1", "ConfigMap", namespace=namespace, label_selector=selector)
        assert all(o["kind"] == "ConfigMap" and o["apiVersion"] == "v1" for o in found)
        return sorted(o["metadata"]["name"] for o in found)

    assert names("role in (db,cache),role!=cache") == ["a"]
    # kube-controller-manager publishes kube-root-ca.crt into new namespaces whenever it gets to it,
    # so only the ConfigMaps this test made are compared.
    ours = {"a", "b", "c"}
    assert [n for n in names("!role") if n in ours] == ["c"]
    assert ours <= set(names(None))
    # Cluster-scoped kinds ignore the namespace filter.
    namespaces = reader.list("v1", "Namespace", namespace="ignored", label_selector=None)
    assert namespace in {o["metadata"]["name"] for o in namespaces}
    assert reader.get("v1", "Namespace", namespace=None, name=namespace) is not None
    assert reader.get("v1", "ConfigMap", namespace=namespace, name="absent") is None
    with pytest.raises(KindNotServed):
        reader.get("v1", "Gizmo", namespace=namespace, name="x")
