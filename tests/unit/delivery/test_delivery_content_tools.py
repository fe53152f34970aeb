"""The pinned content tools on hostile input: Go templates (fleetwave-render) and kustomize.

These run the real binaries (built with the control-plane set by tools/binaries/build.sh), since the
point is Go's behaviour, not an imitation of it.
"""

from __future__ import annotations

import asyncio
import io
import sys
import tarfile
from typing import Any

import pytest
import yaml

from fleetwave.delivery import bounded
from fleetwave.delivery.gotemplate import Renderer, RenderError
from fleetwave.delivery.kustomize import KustomizeError, Kustomizer
from fleetwave.local import binaries


@pytest.fixture(scope="module")
def renderer() -> Renderer:
    return Renderer(binaries.ensure().path("fleetwave-render"))


@pytest.fixture(scope="module")
def kustomizer() -> Kustomizer:
    return Kustomizer(binaries.ensure().path("kustomize"))


def render(r: Renderer, *templates: str, data: dict[str, Any] | None = None, **res: Any) -> list[Any]:
    named = [(f"t{i}", t) for i, t in enumerate(templates)]
    return asyncio.run(r.render(named, data=data or {}, resources=res))


def tgz(files: dict[str, str], *, symlink: tuple[str, str] | None = None) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, text in files.items():
            info = tarfile.TarInfo(name)
            data = text.encode()
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        if symlink:
            link = tarfile.TarInfo(symlink[0])
            link.type, link.linkname = tarfile.SYMTYPE, symlink[1]
            tar.addfile(link)
    return buf.getvalue()


CLUSTER = {"metadata": {"name": "dev-1", "namespace": "fleet", "labels": {"region": "eu"}}}


def test_go_templates_render_with_sprig_and_the_cluster(renderer: Renderer) -> None:
    out = render(
        renderer,
        "{{ .Cluster.metadata.name | upper }}-{{ .Cluster.metadata.labels.region | quote }}",
        '{{ dict "a" 1 | toYaml }}',
        '{{ index .Cluster.metadata.labels "zone" | default "none" }}',  # index: no missingkey error
        data={"Cluster": CLUSTER},
    )
    assert [o.output for o in out] == ['DEV-1-"eu"', "a: 1", "none"]


def test_a_missing_key_is_an_error_naming_where_as_go_reports_it(renderer: Renderer) -> None:
    (out,) = render(renderer, "x: {{ .Cluster.metadata.labels.zone }}", data={"Cluster": CLUSTER})
    assert out.output is None
    assert 'map has no entry for key "zone"' in out.error
    assert "t0:1:" in out.error


def test_sveltos_helpers_read_and_reshape_management_resources(renderer: Renderer) -> None:
    cm = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "cfg", "namespace": "a", "uid": "u", "resourceVersion": "9"},
        "data": {"replicas": "3"},
    }
    out = render(
        renderer,
        '{{ (getResource "cfg").data.replicas }}',
        '{{ getField "cfg" "data.replicas" }}',
        '{{ setField "cfg" "metadata.namespace" "b" }}',
        '{{ (getResource "cfg").metadata.namespace }}',  # setField changed a copy
        '{{ copy "cfg" }}',
        cfg=cm,
    )
    assert [o.output for o in out[:2]] == ["3", "3"]
    assert yaml.safe_load(out[2].output)["metadata"] == {"name": "cfg", "namespace": "b"}
    assert out[3].output == "a"
    assert "uid" not in out[4].output
    assert "resourceVersion" not in out[4].output


def test_the_environment_and_dns_are_not_reachable_from_a_template(renderer: Renderer) -> None:
    out = render(renderer, '{{ env "HOME" }}', '{{ expandenv "$HOME" }}', '{{ getHostByName "x" }}')
    assert all(o.output is None and "not defined" in o.error for o in out)


def test_a_template_that_prints_without_end_stops_at_the_output_cap(renderer: Renderer) -> None:
    (out,) = render(renderer, "{{ range until 10000000 }}0123456789{{ end }}")
    assert out.output is None
    assert "output larger than" in out.error


def test_a_template_that_allocates_without_end_stops_at_the_memory_budget() -> None:
    small = Renderer(
        binaries.ensure().path("fleetwave-render"), bounded.Limits(memory_bytes=1024 * 1024 * 1024)
    )
    with pytest.raises(RenderError, match=r"ran out of the renderer's memory budget \(1024 MiB\)"):
        render(small, "{{ range until 100000000 }}{{ end }}")


def test_a_missing_renderer_says_how_to_get_it() -> None:
    with pytest.raises(RenderError, match="fleetwave-render is not installed"):
        render(Renderer("/nonexistent/fleetwave-render"), "x")


BASE = {
    "base/kustomization.yaml": "resources: [cm.yaml]\n",
    "base/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app}\ndata: {level: info}\n",
    "overlays/prod/kustomization.yaml": "resources: [../../base]\nnamePrefix: prod-\n",
    "components/debug/kustomization.yaml": (
        "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\n"
        "patches:\n- patch: |\n    - op: replace\n      path: /data/level\n      value: debug\n"
        "  target: {kind: ConfigMap}\n"
    ),
}


def test_kustomize_builds_an_overlay_with_components_and_a_target_namespace(kustomizer: Kustomizer) -> None:
    out = asyncio.run(
        kustomizer.build(
            tgz(BASE), path="./overlays/prod/", components=["../../components/debug"], target_namespace="eng"
        )
    )
    (cm,) = list(yaml.safe_load_all(out))
    assert cm["metadata"] == {"name": "prod-app", "namespace": "eng"}
    assert cm["data"] == {"level": "debug"}


@pytest.mark.parametrize(
    ("archive", "path", "message"),
    [
        (tgz({"../evil.yaml": "x"}), ".", "must stay inside the archive"),
        (tgz({"/etc/evil.yaml": "x"}), ".", "must stay inside the archive"),
        (tgz(BASE, symlink=("base/link", "/etc/passwd")), ".", "not a regular file or directory"),
        (b"not an archive", ".", "is not a tar archive"),
        (tgz(BASE), "../..", "must stay inside the archive"),
        (tgz(BASE), "nowhere", "is not a directory of the archive"),
    ],
)
def test_a_hostile_or_broken_archive_is_refused_before_kustomize_runs(
    kustomizer: Kustomizer, archive: bytes, path: str, message: str
) -> None:
    with pytest.raises(KustomizeError, match=message):
        asyncio.run(kustomizer.build(archive, path=path))


def test_a_remote_base_is_not_fetched(kustomizer: Kustomizer) -> None:
    archive = tgz({"kustomization.yaml": "resources:\n- https://example.com/app.yaml\n"})
    with pytest.raises(KustomizeError, match="kustomize build failed") as info:
        asyncio.run(kustomizer.build(archive, path="."))
    assert "127.0.0.1:9" in str(info.value)  # the request went to the proxy that goes nowhere
    assert "/tmp/" not in str(info.value)  # our temporary paths are not part of the message


def test_patches_strategic_merge_and_json6902_with_targets(kustomizer: Kustomizer) -> None:
    objects = [
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "a"}},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "db", "namespace": "a"}},
    ]
    patches = [
        {
            "patch": "- op: add\n  path: /spec\n  value: {replicas: 3}\n",
            "target": {"kind": "Deployment", "name": "web"},
        },
        {
            "patch": "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: unused\n"
            "  labels: {tier: backend}\n",
            "target": {"kind": "Deployment", "labelSelector": ""},
        },
    ]
    out = {
        d["metadata"]["name"]: d for d in yaml.safe_load_all(asyncio.run(kustomizer.patch(objects, patches)))
    }
    assert out["web"]["spec"] == {"replicas": 3}
    assert "spec" not in out["db"]
    assert out["db"]["metadata"]["labels"] == {"tier": "backend"}
    assert out["web"]["metadata"]["labels"] == {"tier": "backend"}


async def test_a_tool_out_of_its_cpu_budget_is_reported_as_such() -> None:
    """The kernel sends SIGXCPU at the soft limit only when it is below the hard one; with both equal
    it sent SIGKILL, reported as memory (found by bench/bench_artifact_fuzz.py)."""
    spin = [sys.executable, "-I", "-c", "while True: pass"]
    with pytest.raises(bounded.ToolError, match="CPU budget spent"):
        await bounded.run(spin, limits=bounded.Limits(cpu_seconds=1, wall_seconds=20))
