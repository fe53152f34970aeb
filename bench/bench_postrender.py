"""Cost of helm's post-renderer (ADR 0105): what patching a chart adds to one release's install.

p50/p99 over `--trials` runs of the post-renderer exactly as helm runs it (`python -I
delivery/postrender.py PATCHES KUSTOMIZE`, the chart's rendered manifests on stdin, helm's
environment), for `tests/charts/hello` rendered by the real `helm template` with one strategic-merge
and one JSON 6902 patch; and, for comparison, the same patches through `Kustomizer.patch_text` in
this process (kustomize alone, no Python start, no self-confinement).

Run: .venv/bin/python bench/bench_postrender.py [--trials 20]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from fleetwave.delivery import postrender
from fleetwave.delivery.kustomize import Kustomizer
from fleetwave.local import binaries

CHART = Path(__file__).resolve().parents[1] / "tests" / "charts" / "hello"
PATCHES = [
    {
        "patch": "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: bench}\nspec: {replicas: 3}\n",
        "target": {"kind": "Deployment"},
    },
    {"patch": "- op: add\n  path: /data/patched\n  value: 'yes'\n", "target": {"kind": "ConfigMap"}},
]


def _percentiles(samples: list[float]) -> str:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return f"p50 {statistics.median(ordered) * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms (n={len(ordered)})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20)
    trials = parser.parse_args().trials
    found = binaries.ensure()
    rendered = subprocess.run(
        [found.path("helm"), "template", "bench", str(CHART)], capture_output=True, text=True, check=True
    ).stdout
    with tempfile.TemporaryDirectory() as tmp:
        patches = Path(tmp) / postrender.PATCHES_FILE
        patches.write_bytes(postrender.patches_file(PATCHES))
        flags = postrender.helm_flags(str(patches), found.path("kustomize"))
        argv = [sys.executable, *(f.removeprefix("--post-renderer-args=") for f in flags[2:])]
        whole: list[float] = []
        for _ in range(trials):
            start = time.perf_counter()
            subprocess.run(
                argv, input=rendered, capture_output=True, text=True, check=True, env={"PATH": "/usr/bin"}
            )
            whole.append(time.perf_counter() - start)
    kustomizer = Kustomizer(found.path("kustomize"))
    alone: list[float] = []
    for _ in range(trials):
        start = time.perf_counter()
        asyncio.run(kustomizer.patch_text(rendered, PATCHES))
        alone.append(time.perf_counter() - start)
    print(f"post-renderer as helm runs it: {_percentiles(whole)}")
    print(f"kustomize patch alone (in process): {_percentiles(alone)}")


if __name__ == "__main__":
    main()
