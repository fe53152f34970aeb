"""Pure content helpers: hashes, inventory keys, apply order, policyRef parsing, comparisons."""

from __future__ import annotations

import base64
import json
import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fleetwave.delivery import content as ct
from fleetwave.kube import kinds

LABEL_VALUE = re.compile(r"^(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)$")


def _cm(name: str, **data: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "ns"},
        "data": data,
    }


def test_content_hash_ignores_key_order_and_object_order() -> None:
    a = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"x": "1", "y": "2"}}
    a_reordered = {
        "data": {"y": "2", "x": "1"},
        "metadata": {"name": "a"},
        "kind": "ConfigMap",
        "apiVersion": "v1",
    }
    b = _cm("b", z="3")
    assert ct.content_hash([a, b]) == ct.content_hash([b, a_reordered])
    assert ct.object_hash(a) == ct.object_hash(a_reordered)


def test_content_hash_changes_with_any_value() -> None:
    assert ct.content_hash([_cm("a", x="1")]) != ct.content_hash([_cm("a", x="2")])
    assert ct.content_hash([_cm("a", x="1")]) != ct.content_hash([_cm("b", x="1")])
    assert ct.content_hash([]) != ct.content_hash([_cm("a")])


def test_hashes_have_the_sveltos_base64_sha256_form() -> None:
    digest = ct.content_hash([_cm("a")])
    assert len(base64.b64decode(digest, validate=True)) == 32


@pytest.mark.parametrize("owner", ["dev01", "cluster-profile.dev_01", "a" * 63])
def test_inventory_key_keeps_a_valid_label_value(owner: str) -> None:
    assert ct.inventory_key(owner) == owner


@pytest.mark.parametrize(
    "owner", ["ClusterProfile/x/dev01", "dev01\n", "a" * 64, "-lead", "", "ns:name", "ü" * 10]
)
def test_inventory_key_turns_anything_else_into_a_valid_label_value(owner: str) -> None:
    key = ct.inventory_key(owner)
    assert LABEL_VALUE.fullmatch(key), key
    assert ct.inventory_key(key) == key  # idempotent: prune/withdraw may normalise again


@given(st.text(max_size=200), st.text(max_size=200))
def test_distinct_owners_get_distinct_keys(left: str, right: str) -> None:
    if left != right:
        assert ct.inventory_key(left) != ct.inventory_key(right)
    assert LABEL_VALUE.fullmatch(ct.inventory_key(left))


def test_sort_for_apply_puts_crds_and_namespaces_first_and_custom_resources_last() -> None:
    objects = [
        {"kind": "Widget"},
        {"kind": "Deployment"},
        {"kind": "RoleBinding"},
        {"kind": "ConfigMap"},
        {"kind": "CustomResourceDefinition"},
        {"kind": "Namespace"},
        {"kind": "ClusterRole"},
        {"kind": "ValidatingWebhookConfiguration"},
    ]
    assert [o["kind"] for o in ct.sort_for_apply(objects)] == [
        "CustomResourceDefinition",
        "Namespace",
        "ConfigMap",
        "ClusterRole",
        "RoleBinding",
        "Deployment",
        "ValidatingWebhookConfiguration",
        "Widget",
    ]


def test_sort_for_apply_keeps_the_authors_order_within_a_wave() -> None:
    objects = [_cm("z"), {"kind": "Secret", "n": 1}, _cm("a")]
    assert ct.sort_for_apply(objects) == objects


def test_with_inventory_labels_a_copy_and_keeps_other_labels() -> None:
    original = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "labels": {"app": "x"}}}
    labelled = ct.with_inventory(original, "inv")
    assert labelled["metadata"]["labels"] == {"app": "x", ct.INVENTORY_LABEL: "inv"}
    assert original["metadata"]["labels"] == {"app": "x"}


def test_policy_data_from_a_configmap_holds_several_documents_per_key() -> None:
    data = {
        "b.yaml": "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: team\n",
        "a.yaml": (
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: one\n---\n"
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: two\n---\n"
        ),
    }
    objects = ct.parse_policy_data(data, base64_encoded=False)
    assert [o["metadata"]["name"] for o in objects] == ["one", "two", "team"]  # keys in sorted order


def test_policy_data_from_a_secret_is_base64_and_may_be_json_or_a_list() -> None:
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}}
    doc = json.dumps({"apiVersion": "v1", "kind": "List", "items": [secret]})
    objects = ct.parse_policy_data({"k": base64.b64encode(doc.encode()).decode()}, base64_encoded=True)
    assert objects == [secret]


@pytest.mark.parametrize(
    ("text", "encoded", "message"),
    [
        ("a: [", False, "not valid YAML"),
        ("just a string", False, "apiVersion and kind"),
        ("apiVersion: v1\nkind: ConfigMap\n", False, "without metadata.name"),
        ("%%%not-base64", True, "base64"),
    ],
)
def test_bad_policy_data_names_the_source_and_key(text: str, encoded: bool, message: str) -> None:
    with pytest.raises(ct.ContentError, match=message) as err:
        ct.parse_policy_data({"key1": text}, base64_encoded=encoded, source="ConfigMap ns/src")
    assert "ConfigMap ns/src[key1]" in str(err.value)


def test_comparable_drops_status_and_server_bookkeeping_only() -> None:
    live = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "a",
            "resourceVersion": "7",
            "uid": "u",
            "managedFields": [],
            "labels": {"k": "v"},
        },
        "data": {"x": "1"},
        "status": {"anything": True},
    }
    assert ct.comparable(live) == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "a", "labels": {"k": "v"}},
        "data": {"x": "1"},
    }


def test_diff_paths_names_each_difference() -> None:
    left = {"data": {"a": "1", "b": "2"}, "spec": {"ports": [{"port": 80}]}}
    right = {"data": {"a": "1", "b": "3", "c": "4"}, "spec": {"ports": [{"port": 81}]}}
    assert ct.diff_paths(left, right) == ["/data/b", "/data/c", "/spec/ports/0/port"]
    assert ct.diff_paths(left, left) == []


def test_object_refs_identify_objects_across_api_versions() -> None:
    v1 = ct.ObjectRef("autoscaling/v1", "HorizontalPodAutoscaler", "ns", "h")
    v2 = ct.ObjectRef("autoscaling/v2", "HorizontalPodAutoscaler", "ns", "h")
    assert v1.identity == v2.identity
    assert kinds.GVK("v1", "Secret").sveltos_form() == "Secret.v1."
    assert (
        kinds.GVK("cert-manager.io/v1", "ClusterIssuer").sveltos_form() == "ClusterIssuer.v1.cert-manager.io"
    )


def test_kinds_are_known_from_lightkube_and_from_crds_in_the_content() -> None:
    deployment = kinds.builtin(kinds.GVK("apps/v1", "Deployment"))
    assert deployment == kinds.KindInfo(kinds.GVK("apps/v1", "Deployment"), "deployments", True)
    namespace = kinds.builtin(kinds.GVK("v1", "Namespace"))
    assert namespace is not None
    assert not namespace.namespaced
    assert kinds.builtin(kinds.GVK("example.com/v1", "Widget")) is None

    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Cluster",
            "names": {"kind": "Widget", "plural": "widgets"},
            "versions": [{"name": "v1"}, {"name": "v2"}],
        },
    }
    found = kinds.from_crds([crd, _cm("x")])
    assert set(found) == {kinds.GVK("example.com/v1", "Widget"), kinds.GVK("example.com/v2", "Widget")}
    assert found[kinds.GVK("example.com/v2", "Widget")] == kinds.KindInfo(
        kinds.GVK("example.com/v2", "Widget"), "widgets", False
    )


def test_parsed_policies_are_remembered_but_every_caller_gets_its_own_copy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(ct, "_PARSED", ct._ParsedCache())
    parses = 0
    real = ct._parse_documents

    def counting(text: str, source: str, *, redact: bool) -> list[dict[str, Any]]:
        nonlocal parses
        parses += 1
        return real(text, source, redact=redact)

    monkeypatch.setattr(ct, "_parse_documents", counting)
    data = {"a.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: one, namespace: x}\n"}
    first = ct.parse_policy_data(data, base64_encoded=False, source="ref")
    first[0]["metadata"]["name"] = "changed by the caller"
    second = ct.parse_policy_data(data, base64_encoded=False, source="ref")
    assert parses == 1
    assert second[0]["metadata"]["name"] == "one"
    ct.parse_policy_data({"a.yaml": data["a.yaml"] + "data: {k: v}\n"}, base64_encoded=False, source="ref")
    assert parses == 2  # another text is parsed, never answered from the cache


def test_the_parse_cache_forgets_the_least_recently_used_texts_past_its_size() -> None:
    cache = ct._ParsedCache(max_bytes=100)
    cache.put("a", 60, [{"kind": "A"}])
    cache.put("b", 30, [{"kind": "B"}])
    assert cache.get("a") == [{"kind": "A"}]  # now the most recently used
    cache.put("c", 30, [{"kind": "C"}])
    assert cache.get("b") is None
    assert cache.get("a") == [{"kind": "A"}]
    assert cache.get("c") == [{"kind": "C"}]
    cache.put("huge", 101, [{"kind": "H"}])
    assert cache.get("huge") is None


def test_a_text_that_fails_to_parse_fails_every_time() -> None:
    bad = {"a.yaml": "kind: ConfigMap\n"}
    for _ in range(2):
        with pytest.raises(ct.ContentError, match="apiVersion and kind"):
            ct.parse_policy_data(bad, base64_encoded=False, source="ref")
