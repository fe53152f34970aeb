"""Cost of per-cluster templating (ADR 0089), side by side in one run: what a ClusterSummary's delivery
adds when its content is a template, a kustomization or patched, against the same content static.

Per cluster and per delivery, p50/p99 of:
- static: resolving a profile whose policyRef is plain YAML (what every delivery costs anyway),
- template: rendering the same objects as a Go template with `.Cluster` and a templateResourceRef
  (one fleetwave-render process),
- kustomize: building a small overlay from its archive (one kustomize process),
- patches: one strategic-merge and one JSON 6902 patch over the delivered objects (one kustomize process).

Run: .venv/bin/python bench/bench_content_tools.py [--trials 40]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import io
import tarfile
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import yaml

from fleetwave.api.sveltos import ClusterProfileSpec
from fleetwave.controllers.fleet.boundary import Boundary
from fleetwave.controllers.sveltos import content, templated_content
from fleetwave.delivery.gotemplate import Renderer
from fleetwave.delivery.kustomize import Kustomizer
from fleetwave.local import binaries

OBJECTS = 20
TEMPLATE = "\n---\n".join(
    f"""apiVersion: v1
kind: ConfigMap
metadata:
  name: settings-{i}
  namespace: apps
  labels:
    cluster: "{{{{ .Cluster.metadata.name }}}}"
data:
  region: "{{{{ .Cluster.metadata.labels.region }}}}"
  replicas: "{{{{ (getResource "sizes").data.replicas }}}}\""""
    for i in range(OBJECTS)
)
STATIC = (
    TEMPLATE.replace("{{ .Cluster.metadata.name }}", "eu-1")
    .replace("{{ .Cluster.metadata.labels.region }}", "eu")
    .replace('{{ (getResource "sizes").data.replicas }}', "3")
)
CLUSTER = {"metadata": {"name": "eu-1", "namespace": "fleet", "labels": {"region": "eu"}}}


class Objects:
    def __init__(self, objects: dict[tuple[str, str, str], dict[str, Any]]) -> None:
        self.objects = objects

    def get(self, kind: str, namespace: str, name: str) -> Mapping[str, Any] | None:
        return self.objects.get((kind, namespace, name))


def _cm(name: str, data: dict[str, str], template: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "fw"}
    if template:
        meta["annotations"] = {content.TEMPLATE_ANNOTATION: "ok"}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data}


def _archive() -> str:
    files = {
        "base/kustomization.yaml": "resources: [settings.yaml]\n",
        "base/settings.yaml": STATIC.replace("  namespace: apps\n", ""),
        "overlay/kustomization.yaml": "resources: [../base]\nnamePrefix: eu-\nnamespace: apps\n",
    }
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, text in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(text.encode())
            tar.addfile(info, io.BytesIO(text.encode()))
    return base64.b64encode(buf.getvalue()).decode()


def _spec(**fields: Any) -> ClusterProfileSpec:
    return ClusterProfileSpec.model_validate(fields)


REF = [{"kind": "ConfigMap", "name": "app", "namespace": "fw"}]
SIZES = {"resource": {"kind": "ConfigMap", "name": "sizes", "namespace": "fw"}, "identifier": "sizes"}
PATCHES = [
    {
        "patch": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: any\n  labels: {patched: 'yes'}\n",
        "target": {"kind": "ConfigMap"},
    },
    {"patch": "- op: add\n  path: /data/extra\n  value: x\n", "target": {"kind": "ConfigMap"}},
]


async def _timed(trials: int, call: Callable[[], Awaitable[object]]) -> list[float]:
    await call()  # warm the page cache for the binaries
    out = []
    for _ in range(trials):
        start = time.perf_counter()
        await call()
        out.append((time.perf_counter() - start) * 1000)
    return out


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def measure(trials: int) -> None:
    found = binaries.ensure()
    tools = templated_content.Tools(
        Renderer(found.path("fleetwave-render")), Kustomizer(found.path("kustomize"))
    )
    boundary = Boundary(controller_namespace="fleetwave-system")
    cases: dict[str, tuple[ClusterProfileSpec, Objects]] = {
        "static": (
            _spec(policyRefs=REF),
            Objects({("ConfigMap", "fw", "app"): _cm("app", {"a.yaml": STATIC})}),
        ),
        "template": (
            _spec(policyRefs=REF, templateResourceRefs=[SIZES]),
            Objects(
                {
                    ("ConfigMap", "fw", "app"): _cm("app", {"a.yaml": TEMPLATE}, template=True),
                    ("ConfigMap", "fw", "sizes"): _cm("sizes", {"replicas": "3"}),
                }
            ),
        ),
        "kustomize": (
            _spec(
                kustomizationRefs=[{"kind": "ConfigMap", "name": "kz", "namespace": "fw", "path": "overlay"}]
            ),
            Objects(
                {
                    ("ConfigMap", "fw", "kz"): {
                        "metadata": {"name": "kz", "namespace": "fw"},
                        "binaryData": {content.KUSTOMIZE_ARCHIVE_KEY: _archive()},
                    }
                }
            ),
        ),
        "patches": (
            _spec(policyRefs=REF, patches=PATCHES),
            Objects({("ConfigMap", "fw", "app"): _cm("app", {"a.yaml": STATIC})}),
        ),
    }
    print(
        f"{OBJECTS} ConfigMaps per delivery, {trials} trials each (ms per cluster delivery, before any apply)"
    )
    base = 0.0
    for label, (spec, objects) in cases.items():

        async def deliver(spec: ClusterProfileSpec = spec, objects: Objects = objects) -> object:
            body = content.resolve(spec, objects, default_namespace="fw", path="spec", boundary=boundary).body
            done = await templated_content.instantiate(
                body, cluster=CLUSTER, lookup=objects, boundary=boundary, tools=tools
            )
            assert sum(len(p["objects"]) for p in done["policies"]) == OBJECTS
            return done

        times = await _timed(trials, deliver)
        p50 = _p(times, 0.5)
        base = base or p50
        print(f"  {label:10} p50 {p50:7.1f}  p99 {_p(times, 0.99):7.1f}  ratio to static {p50 / base:5.1f}x")
    print(yaml.safe_dump({"binaries": str(found.directory)}).strip())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--trials", type=int, default=40)
    args = parser.parse_args()
    asyncio.run(measure(args.trials))


if __name__ == "__main__":
    main()
