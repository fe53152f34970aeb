"""examples/profile-templates.yaml and examples/profile-kustomize.yaml do what their comments say, with
the real pinned fleetwave-render and kustomize (the management cluster is the examples' own objects)."""

from __future__ import annotations

import asyncio
import base64
import io
import tarfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from fleetwave.api.codec import parse_object
from fleetwave.api.sveltos import ClusterProfile
from fleetwave.controllers.fleet.boundary import Boundary
from fleetwave.controllers.sveltos import content, templated_content
from fleetwave.delivery.gotemplate import Renderer
from fleetwave.delivery.kustomize import Kustomizer
from fleetwave.local import binaries

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


class Objects:
    def __init__(self, docs: list[dict[str, Any]]) -> None:
        self.objects = {
            (d["kind"], d["metadata"].get("namespace", ""), d["metadata"]["name"]): d for d in docs
        }

    def get(self, kind: str, namespace: str, name: str) -> Mapping[str, Any] | None:
        return self.objects.get((kind, namespace, name))


@pytest.fixture(scope="module")
def tools() -> templated_content.Tools:
    found = binaries.ensure()
    return templated_content.Tools(
        Renderer(found.path("fleetwave-render")), Kustomizer(found.path("kustomize"))
    )


def member(name: str, env: str) -> dict[str, Any]:
    return {
        "kind": "MemberCluster",
        "metadata": {"name": name, "namespace": "fleetwave-system", "labels": {"env": env}},
    }


def delivered(
    profile: ClusterProfile, objects: Objects, cluster: dict[str, Any], tools: templated_content.Tools
) -> list[dict[str, Any]]:
    boundary = Boundary(controller_namespace="fleetwave-system")
    resolved = content.resolve(
        profile.spec, objects, default_namespace="fleetwave-system", path="spec", boundary=boundary
    )
    body = asyncio.run(
        templated_content.instantiate(
            resolved.body, cluster=cluster, lookup=objects, boundary=boundary, tools=tools
        )
    )
    return [o for p in body["policies"] for o in p["objects"]]


def load(name: str) -> tuple[ClusterProfile, list[dict[str, Any]]]:
    docs = [d for d in yaml.safe_load_all((EXAMPLES / name).read_text(encoding="utf-8")) if d]
    [profile] = [parse_object(d) for d in docs if d["kind"] == "ClusterProfile"]
    assert isinstance(profile, ClusterProfile)
    return profile, [d for d in docs if d["kind"] != "ClusterProfile"]


def test_the_templates_example_gives_dev_and_prod_their_own_settings(tools: templated_content.Tools) -> None:
    profile, docs = load("profile-templates.yaml")
    objects = Objects(docs)
    [dev] = delivered(profile, objects, member("member-1", "dev"), tools)
    [prod] = delivered(profile, objects, member("member-3", "prod"), tools)
    assert dev["data"] == {"cluster": "member-1", "replicas": "1", "greeting": "HELLO FROM MEMBER-1"}
    assert prod["data"]["replicas"] == "3"


def test_the_kustomize_example_builds_the_production_overlay_per_cluster(
    tools: templated_content.Tools,
) -> None:
    profile, _ = load("profile-kustomize.yaml")
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        tar.add(EXAMPLES / "kustomize" / "hello", arcname=".")
    source = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "hello-kustomize", "namespace": "kustomized"},
        "binaryData": {"kustomize.tar.gz": base64.b64encode(buf.getvalue()).decode()},
    }
    [settings] = delivered(profile, Objects([source]), member("member-2", "staging"), tools)
    assert settings["metadata"]["name"] == "production-hello-settings"
    assert settings["metadata"]["namespace"] == "apps"
    assert settings["metadata"]["labels"] == {"delivered-to": "member-2"}
    assert settings["data"] == {"level": "warn", "region": "region-of-member-2"}
