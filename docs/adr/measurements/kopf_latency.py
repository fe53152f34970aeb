"""Measurement behind ADR 0002: kopf's write->handler latency, for comparison with runtime_latency.py.

Run in the scratch venv that has kopf and lightkube (see compare_clients.py):
    /tmp/cmp/bin/python docs/adr/measurements/kopf_latency.py KUBECONFIG [N]
kopf runs in-process (standalone, one namespace) with two handlers on ConfigMaps:
`on.event` (raw watch events, no state kept) and `on.update` (kopf's change-detection handler,
which diffs against and then patches its last-handled-configuration annotation).
"""

import asyncio
import base64
import json
import logging
import statistics
import sys
import tempfile
import time

import kopf
from lightkube import AsyncClient, KubeConfig, codecs
from lightkube.resources.core_v1 import Namespace

KUBECONFIG = sys.argv[1]
N = int(sys.argv[2]) if len(sys.argv) > 2 else 100
NS = "kopf-latency"
written: dict[str, float] = {}
lat: dict[str, list[float]] = {"event": [], "update": []}
arrived: dict[str, asyncio.Event] = {}


@kopf.on.login()
def login(**_: object) -> kopf.ConnectionInfo:
    with open(KUBECONFIG) as f:
        cfg = json.load(f)
    ca = base64.b64decode(cfg["clusters"][0]["cluster"]["certificate-authority-data"])
    with tempfile.NamedTemporaryFile("wb", delete=False, suffix=".crt") as out:
        out.write(ca)
    return kopf.ConnectionInfo(
        server=cfg["clusters"][0]["cluster"]["server"], ca_path=out.name, token=cfg["users"][0]["user"]["token"]
    )


@kopf.on.event("configmaps", field="metadata.name", value="ev")
def on_event(name: str, type: str, **_: object) -> None:  # noqa: A002
    if type == "MODIFIED" and "ev" in written:
        lat["event"].append(time.perf_counter() - written.pop("ev"))
        arrived["ev"].set()


@kopf.on.update("configmaps", field="data", when=lambda name, **_: name == "up")
def on_update(name: str, **_: object) -> None:
    if "up" in written:
        lat["update"].append(time.perf_counter() - written.pop("up"))
        arrived["up"].set()


def summary(xs: list[float]) -> str:
    xs = sorted(xs)
    p99 = xs[min(len(xs) - 1, int(len(xs) * 0.99))]
    return f"median {statistics.median(xs) * 1000:.2f} ms, p99 {p99 * 1000:.2f} ms, max {xs[-1] * 1000:.2f} ms"


async def main() -> None:
    logging.getLogger("kopf").setLevel(logging.WARNING)
    client = AsyncClient(config=KubeConfig.from_file(KUBECONFIG), field_manager="cmp")
    try:
        await client.create(Namespace(metadata={"name": NS}))
    except Exception:
        pass
    for name in ("ev", "up"):
        arrived[name] = asyncio.Event()
        await client.apply(codecs.from_dict(cm(name, -1)), force=True)
    ready, stop = asyncio.Event(), asyncio.Event()
    op = asyncio.create_task(kopf.operator(standalone=True, namespaces=[NS], ready_flag=ready, stop_flag=stop))
    await ready.wait()
    await asyncio.sleep(2)  # let kopf finish its initial pass over existing objects
    for name in ("ev", "up"):
        for i in range(N):
            arrived[name].clear()
            written[name] = time.perf_counter()
            await client.apply(codecs.from_dict(cm(name, i)), force=True)
            await asyncio.wait_for(arrived[name].wait(), timeout=30)
    stop.set()
    await op
    await client.close()
    print(f"kopf on.event  write->handler ({N}): {summary(lat['event'])}")
    print(f"kopf on.update write->handler ({N}): {summary(lat['update'])}")


def cm(name: str, i: int) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": NS}, "data": {"i": str(i)}}


asyncio.run(main())
