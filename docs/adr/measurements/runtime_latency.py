"""Measurement behind ADR 0002: event->reconcile latency and timer lateness of fleetwave.runtime.

Run with the project venv against any apiserver (e.g. `fleetwave local up --state-dir D`):
    .venv/bin/python docs/adr/measurements/runtime_latency.py D/management/kubeconfig [N]
1. write->reconcile: an Informer on ConfigMaps feeds a Controller; each of N server-side applies is
   timed from just before the request to the start of the reconcile that sees it.
2. timer lateness: a reconcile returns requeue_after=0.2 s; lateness = actual - due, N times.
"""

import asyncio
import statistics
import sys
import time

from lightkube import codecs
from lightkube.resources.core_v1 import ConfigMap, Namespace

from fleetwave import kubeclient
from fleetwave.runtime import controller, watching

KUBECONFIG = sys.argv[1]
N = int(sys.argv[2]) if len(sys.argv) > 2 else 200
NS = "runtime-latency"


def summary(xs: list[float]) -> str:
    xs = sorted(xs)
    p99 = xs[min(len(xs) - 1, int(len(xs) * 0.99))]
    return f"median {statistics.median(xs) * 1000:.2f} ms, p99 {p99 * 1000:.2f} ms, max {xs[-1] * 1000:.2f} ms"


async def main() -> None:
    client = kubeclient.async_client(kubeclient.config_from_file(KUBECONFIG))
    try:
        await client.create(Namespace(metadata={"name": NS}))
    except Exception:
        pass
    written: dict[str, float] = {}
    write_lat: list[float] = []
    timer_late: list[float] = []
    due: dict[str, float] = {}
    done = asyncio.Event()

    async def reconcile(key: str) -> controller.Result:
        now = time.perf_counter()
        name = key.split("/")[1]
        if name == "timer":
            if name in due:
                timer_late.append(now - due.pop(name))
            if len(timer_late) >= N:
                done.set()
                return controller.Result()
            due[name] = time.perf_counter() + 0.2
            return controller.Result(requeue_after=0.2)
        if name in written:
            write_lat.append(now - written.pop(name))
        return controller.Result()

    informer = watching.Informer(client, ConfigMap, namespace=NS)
    ctl: controller.Controller[str] = controller.Controller("latency", reconcile, workers=2)
    ctl.watch(informer, lambda obj: [watching.object_key(obj)])
    tasks = [asyncio.create_task(informer.run()), asyncio.create_task(ctl.run())]
    await informer.has_synced.wait()
    for i in range(N):
        cm = codecs.from_dict(
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "w", "namespace": NS}, "data": {"i": str(i)}}
        )
        written["w"] = time.perf_counter()
        await client.apply(cm, force=True)
        while "w" in written:
            await asyncio.sleep(0.001)
    ctl.enqueue(f"{NS}/timer")
    await done.wait()
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await client.close()
    print(f"write->reconcile  ({N}): {summary(write_lat)}")
    print(f"timer lateness    ({N}): {summary(timer_late)}")


asyncio.run(main())
