"""Policy data is parsed by the bounded YAML loader: `kind: List` expansion bounded in depth and count
and cycle-free, and Secret data never quoted in an error."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from fleetwave.delivery import content as ct

SECRET = "pw-71c0-not-for-logs"


def _cm(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}


def _list(*items: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "List", "items": list(items)}


def test_nested_lists_expand_in_order() -> None:
    doc = _list(_cm("a"), _list(_cm("b"), _list(_cm("c"))), _cm("d"))
    objects = ct.parse_policy_data({"k": json.dumps(doc)}, base64_encoded=False)
    assert [o["metadata"]["name"] for o in objects] == ["a", "b", "c", "d"]


def test_lists_nested_too_deep_are_refused() -> None:
    doc: dict[str, Any] = _cm("leaf")
    for _ in range(ct.MAX_LIST_DEPTH + 1):
        doc = _list(doc)
    with pytest.raises(ct.ContentError, match=f"nested deeper than {ct.MAX_LIST_DEPTH} levels"):
        ct.parse_policy_data({"k": json.dumps(doc)}, base64_encoded=False, source="src")


def test_a_list_that_contains_itself_is_refused_not_looped_over() -> None:
    text = "&l\napiVersion: v1\nkind: List\nitems:\n- *l\n"
    with pytest.raises(ct.ContentError, match=r"contains itself|refers to the collection that contains it"):
        ct.parse_policy_data({"k": text}, base64_encoded=False, source="src")


def test_a_list_repeating_a_shared_sublist_cannot_multiply_past_the_bound() -> None:
    # Each List holds the previous one ten times through aliases: 10**6 objects if expanded.
    items = ["- &l0 {apiVersion: v1, kind: ConfigMap, metadata: {name: x}}"]
    for i in range(1, 7):
        refs = ", ".join([f"*l{i - 1}"] * 10)
        items.append(f"- &l{i} {{apiVersion: v1, kind: List, items: [{refs}]}}")
    text = "apiVersion: v1\nkind: List\nitems:\n" + "\n".join(items) + "\n"
    with pytest.raises(ct.ContentError) as err:
        ct.parse_policy_data({"k": text}, base64_encoded=False, source="src")
    assert str(err.value).startswith("src[k]: ")


def test_more_objects_than_the_bound_are_refused() -> None:
    doc = _list(*[_cm(f"c{i}") for i in range(ct.MAX_OBJECTS + 1)])
    with pytest.raises(ct.ContentError, match=f"more than {ct.MAX_OBJECTS} objects"):
        ct.parse_policy_data({"k": json.dumps(doc)}, base64_encoded=False, source="src")


@pytest.mark.parametrize(
    "text",
    [
        f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: x}}\ndata: {{a: *{SECRET}}}\n",
        f"apiVersion: v1\nkind: !{SECRET} ConfigMap\n",
        f"apiVersion: v1\nkind: {SECRET}\n",
        f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: x}}\ndata: '{SECRET}\n",
    ],
)
def test_errors_in_secret_data_give_line_and_column_only(text: str) -> None:
    encoded = base64.b64encode(text.encode()).decode()
    with pytest.raises(ct.ContentError) as err:
        ct.parse_policy_data({"k": encoded}, base64_encoded=True, source="Secret ns/s")
    assert str(err.value).startswith("Secret ns/s[k]: ")
    assert SECRET not in str(err.value)


def test_errors_in_configmap_data_keep_the_parser_s_detail() -> None:
    with pytest.raises(ct.ContentError) as err:
        ct.parse_policy_data({"k": "a: *undefined\n"}, base64_encoded=False, source="ConfigMap ns/c")
    assert "undefined alias" in str(err.value)
    assert "line 1, column 4" in str(err.value)


def test_yaml_tags_outside_the_core_schema_are_refused() -> None:
    text = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: {a: !!python/object:os.system x}\n"
    with pytest.raises(ct.ContentError, match="not valid YAML"):
        ct.parse_policy_data({"k": text}, base64_encoded=False, source="src")


def test_load_yaml_map_refuses_non_mappings_and_reads_empty_as_empty() -> None:
    assert ct.load_yaml_map("", "v", redact=False) == {}
    assert ct.load_yaml_map("a: 1\n", "v", redact=False) == {"a": 1}
    with pytest.raises(ct.ContentError, match="v: values must be a YAML mapping"):
        ct.load_yaml_map("- 1\n", "v", redact=True)


def test_content_that_failed_is_not_parsed_again_at_the_next_read(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    real = ct._parse_documents

    def counted(text: str, source: str, *, redact: bool) -> Any:
        calls.append(source)
        return real(text, source, redact=redact)

    monkeypatch.setattr(ct, "_parse_documents", counted)
    not_objects = "\n".join(f"- {i}" for i in range(1_000)) + "\n# failed-once marker\n"
    for _ in range(3):
        with pytest.raises(ct.ContentError, match="every document must be a Kubernetes object"):
            ct._documents(not_objects, "ConfigMap ns/huge")
    assert calls == ["ConfigMap ns/huge"]
