"""Large content is parsed ahead, in a worker thread, and the resolve on the event loop then only
reads the memo (issue 40, finding 6)."""

from __future__ import annotations

import asyncio
import base64
import threading
from collections.abc import Mapping
from typing import Any

import pytest
import yaml

from fleetwave.api.sveltos import ProfileSpec
from fleetwave.controllers.fleet.boundary import Boundary
from fleetwave.controllers.sveltos import content, templated_content
from fleetwave.delivery import content as dc


def _big_configmaps(count: int, tag: str) -> str:
    docs = [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": f"c{i}", "namespace": "apps"},
            "data": {"t": tag},
        }
        for i in range(count)
    ]
    return yaml.safe_dump_all(docs)


class _Objects:
    def __init__(self, objects: Mapping[tuple[str, str, str], dict[str, Any]]) -> None:
        self.objects = objects

    def get(self, kind: str, namespace: str, name: str) -> Mapping[str, Any] | None:
        return self.objects.get((kind, namespace, name))


def _spec(*names: str) -> ProfileSpec:
    return ProfileSpec.model_validate(
        {"policyRefs": [{"kind": "ConfigMap", "name": n, "namespace": "src"} for n in names]}
    )


def test_large_values_are_found_under_the_names_resolve_gives_them_and_small_ones_are_left() -> None:
    big = _big_configmaps(800, "large-values")
    assert len(big) >= content.PARSE_AHEAD_BYTES
    found = _Objects(
        {
            ("ConfigMap", "src", "big"): {"data": {"a.yaml": big, "b.yaml": "kind: x"}},
            ("ConfigMap", "fw", "ours"): {"data": {"a.yaml": big}},  # fleetwave's namespace: never read
        }
    )
    spec = ProfileSpec.model_validate(
        {
            "policyRefs": [
                {"kind": "ConfigMap", "name": "big", "namespace": "src"},
                {"kind": "ConfigMap", "name": "ours", "namespace": "fw"},
            ]
        }
    )
    texts = content.large_texts(
        spec, found, default_namespace="fw", path="spec", boundary=Boundary(controller_namespace="fw")
    )
    assert texts == [(big, "spec.policyRefs[0][a.yaml]", False, "documents")]


def test_content_parsed_ahead_in_a_thread_is_not_parsed_again_by_the_resolve(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    big = _big_configmaps(800, "parsed-ahead")
    found = _Objects({("ConfigMap", "src", "big"): {"data": {"a.yaml": big}}})
    texts = content.large_texts(_spec("big"), found, default_namespace="fw", path="spec")
    threads: list[str] = []
    real = dc._parse_documents

    def counted(text: str, source: str, *, redact: bool) -> Any:
        threads.append(threading.current_thread().name)
        return real(text, source, redact=redact)

    monkeypatch.setattr(dc, "_parse_documents", counted)
    assert dc.unparsed(texts) == texts

    async def ahead_then_resolve() -> content.Resolved:
        await asyncio.to_thread(dc.parse_ahead, dc.unparsed(texts))
        return content.resolve(_spec("big"), found, default_namespace="fw", path="spec")

    resolved = asyncio.run(ahead_then_resolve())
    assert len(resolved.body["policies"][0]["objects"]) == 800
    assert len(threads) == 1
    assert threads[0] != threading.main_thread().name  # parsed in the worker thread, once
    assert dc.unparsed(texts) == []


def test_a_large_value_that_fails_is_remembered_as_failed_too() -> None:
    not_objects = "\n".join(f"- {i}" for i in range(20_000)) + "\n# remembered as failed\n"
    found = _Objects(
        {
            ("Secret", "src", "s"): {
                "type": content.ADDON_SECRET_TYPE,
                "data": {"k": base64.b64encode(not_objects.encode()).decode()},
            }
        }
    )
    spec = ProfileSpec.model_validate({"policyRefs": [{"kind": "Secret", "name": "s", "namespace": "src"}]})
    texts = content.large_texts(spec, found, default_namespace="fw", path="spec")
    assert [(source, redact) for _, source, redact, _ in texts] == [("spec.policyRefs[0][k]", True)]
    dc.parse_ahead(texts)
    assert dc.unparsed(texts) == []
    with pytest.raises(content.ContentError, match="every document must be a Kubernetes object"):
        content.resolve(spec, found, default_namespace="fw", path="spec")


def test_large_helm_values_inline_and_from_a_configmap_are_parsed_ahead_too(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    inline = yaml.safe_dump({"inline": {f"k{i}": "v" * 40 for i in range(2_000)}})
    from_cm = yaml.safe_dump({"from": {f"k{i}": "w" * 40 for i in range(2_000)}})
    found = _Objects({("ConfigMap", "src", "values"): {"data": {"values.yaml": from_cm}}})
    chart = {
        "repositoryURL": "https://charts.example.com",
        "repositoryName": "example",
        "chartName": "example/app",
        "chartVersion": "1.0.0",
        "releaseName": "app",
        "releaseNamespace": "apps",
        "values": inline,
        "valuesFrom": [{"kind": "ConfigMap", "name": "values", "namespace": "src"}],
    }
    spec = ProfileSpec.model_validate({"helmCharts": [chart]})
    texts = content.large_texts(spec, found, default_namespace="fw", path="spec")
    assert [(source, what) for _, source, _, what in texts] == [
        ("spec.helmCharts[0].values", "values"),
        ("spec.helmCharts[0].valuesFrom[0][values.yaml]", "values"),
    ]
    dc.parse_ahead(texts)
    assert dc.unparsed(texts) == []
    calls: list[str] = []
    monkeypatch.setattr(dc, "_yaml_map_now", lambda *a, **k: calls.append("parsed") or {})
    resolved = content.resolve(spec, found, default_namespace="fw", path="spec")
    assert calls == []  # the resolve read the memo only
    merged = resolved.body["helmCharts"][0]["values"]
    assert set(merged) == {"inline", "from"}


def test_large_rendered_or_built_output_is_parsed_in_a_worker_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    threads: list[str] = []
    real = dc.parse_policy_data

    def recorded(*args: Any, **kwargs: Any) -> Any:
        threads.append(threading.current_thread().name)
        return real(*args, **kwargs)

    monkeypatch.setattr(dc, "parse_policy_data", recorded)
    big, small = _big_configmaps(800, "rendered-big"), _big_configmaps(2, "rendered-small")

    async def both() -> tuple[int, int]:
        large = await templated_content._parse(big, "kustomizationRef ConfigMap/src/k", redact=False)
        little = await templated_content._parse(small, "kustomizationRef ConfigMap/src/k", redact=False)
        return len(large), len(little)

    assert asyncio.run(both()) == (800, 2)
    main = threading.main_thread().name
    assert threads[0] != main  # the large output: in a worker thread
    assert threads[1] == main  # a small one costs less than the hand-off
