"""Side-by-side measurement behind ADR 0001: lightkube vs kubernetes_asyncio against a real apiserver.

Run in a scratch venv with both clients installed (they are not both project dependencies):
    python3 -m venv /tmp/cmp && /tmp/cmp/bin/pip install lightkube kubernetes_asyncio kopf pyyaml
    /tmp/cmp/bin/python docs/adr/measurements/compare_clients.py KUBECONFIG [N]
Reports import time, RSS after import+client, median/p95 server-side-apply latency and
write->watch-event latency, alternating the two clients in one run so machine noise hits both.
"""

import asyncio
import resource
import statistics
import subprocess
import sys
import time

KUBECONFIG = sys.argv[1]
N = int(sys.argv[2]) if len(sys.argv) > 2 else 100

IMPORTS = {
    "lightkube": "import lightkube, lightkube.generic_resource",
    "kubernetes_asyncio": "import kubernetes_asyncio.client, kubernetes_asyncio.config, kubernetes_asyncio.watch",
    "kopf": "import kopf",
}


def import_cost(stmt: str) -> tuple[float, float]:
    code = (
        "import time,resource;t=time.perf_counter();" + stmt + ";"
        "print(time.perf_counter()-t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)"
    )
    samples = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
               for _ in range(5)]
    return statistics.median(float(s[0]) for s in samples), statistics.median(float(s[1]) for s in samples) / 1024


def cm(name: str, i: int) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default"},
            "data": {"i": str(i)}}


async def lightkube_run() -> tuple[list[float], list[float]]:
    from lightkube import AsyncClient, KubeConfig, codecs
    from lightkube.resources.core_v1 import ConfigMap

    client = AsyncClient(config=KubeConfig.from_file(KUBECONFIG), field_manager="cmp")
    apply_lat, watch_lat = [], []
    for i in range(N):
        t = time.perf_counter()
        await client.apply(codecs.from_dict(cm("lk-apply", i)), force=True)
        apply_lat.append(time.perf_counter() - t)
    seen: asyncio.Queue[float] = asyncio.Queue()

    async def watch() -> None:
        async for _, obj in client.watch(ConfigMap, namespace="default", fields={"metadata.name": "lk-watch"}):
            await seen.put(time.perf_counter())

    task = asyncio.create_task(watch())
    await asyncio.sleep(0.5)
    for i in range(N):
        t = time.perf_counter()
        await client.apply(codecs.from_dict(cm("lk-watch", i)), force=True)
        while (got := await seen.get()) < t:
            pass
        watch_lat.append(got - t)
    task.cancel()
    await client.close()
    return apply_lat, watch_lat


async def k8sasync_run() -> tuple[list[float], list[float]]:
    from kubernetes_asyncio import client as kc
    from kubernetes_asyncio import config, watch

    api_client = await config.new_client_from_config(KUBECONFIG)
    core = kc.CoreV1Api(api_client)
    apply_lat, watch_lat = [], []
    for i in range(N):
        t = time.perf_counter()
        await core.patch_namespaced_config_map("ka-apply", "default", cm("ka-apply", i), field_manager="cmp",
                                               force=True, _content_type="application/apply-patch+yaml")
        apply_lat.append(time.perf_counter() - t)
    seen: asyncio.Queue[float] = asyncio.Queue()

    async def run_watch() -> None:
        w = watch.Watch()
        async for _ in w.stream(core.list_namespaced_config_map, "default", field_selector="metadata.name=ka-watch"):
            await seen.put(time.perf_counter())

    task = asyncio.create_task(run_watch())
    await asyncio.sleep(0.5)
    for i in range(N):
        t = time.perf_counter()
        await core.patch_namespaced_config_map("ka-watch", "default", cm("ka-watch", i), field_manager="cmp",
                                               force=True, _content_type="application/apply-patch+yaml")
        while (got := await seen.get()) < t:
            pass
        watch_lat.append(got - t)
    task.cancel()
    await api_client.close()
    return apply_lat, watch_lat


def summary(xs: list[float]) -> str:
    xs = sorted(xs)
    return f"median {statistics.median(xs) * 1000:.1f} ms, p95 {xs[int(len(xs) * 0.95)] * 1000:.1f} ms"


for name, stmt in IMPORTS.items():
    t, rss = import_cost(stmt)
    print(f"{name:20s} import {t * 1000:.0f} ms, max RSS after import {rss:.0f} MiB")
for name, fn in (("lightkube", lightkube_run), ("kubernetes_asyncio", k8sasync_run)) * 2:
    a, w = asyncio.run(fn())
    print(f"{name:20s} SSA {summary(a)} | write->watch event {summary(w)}")
print(f"process max RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")
