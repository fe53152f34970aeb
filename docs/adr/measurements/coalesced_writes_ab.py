"""A/B of ADR 0133's coalesced request writes: a request's head and body sent together (SEND_AT
64 KiB) vs each write sent as httpcore makes it (SEND_AT 0), interleaved rounds against one real
management API server. Runs only with coalesced-writes-2026-12-01.diff applied (it adds SEND_AT).

    PYTHONPATH=src .venv/bin/python docs/adr/measurements/coalesced_writes_ab.py WORKERS APPLIES BYTES ROUNDS
"""
import asyncio, datetime as dt, statistics, sys, tempfile, time, os
from pathlib import Path
import uvloop
from lightkube import codecs
from fleetwave.kube import asyncio_streams, client as kubeclient
from fleetwave.local import fleet, processes

W, N, SIZE, ROUNDS = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])

def cpu(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")

async def round_(kc, send_at, tag):
    asyncio_streams.SEND_AT = send_at
    client = kubeclient.async_client(kubeclient.config_from_file(kc), target="management")
    async def worker(w):
        for i in range(N):
            cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"ab-{w}", "namespace": "default"},
                  "data": {"v": f"{tag}-{i}-" + "x" * SIZE}}
            await client.apply(codecs.from_dict(cm), field_manager="ab", force=True)
    t0, c0 = time.monotonic(), time.process_time()
    await asyncio.gather(*(worker(w) for w in range(W)))
    el, cc = time.monotonic() - t0, time.process_time() - c0
    await client.close()
    return el, cc

async def main(state):
    api = next(p for p in state.processes if p.name == "management/apiserver")
    kc = str(Path(state.state_dir) / "management" / "kubeconfig")
    res = {0: [], 65536: []}
    await round_(kc, 65536, "warm")
    for r in range(ROUNDS):
        for send_at in ((0, 65536) if r % 2 == 0 else (65536, 0)):
            a0 = cpu(api.pid)
            el, cc = await round_(kc, send_at, f"r{r}")
            res[send_at].append((el, cc, cpu(api.pid) - a0))
    for send_at, rows in res.items():
        n = W * N
        print(f"SEND_AT={send_at:>6} W={W} size={SIZE}: {n/statistics.median(r[0] for r in rows):.0f} req/s, "
              f"client CPU/req {1000*statistics.median(r[1] for r in rows)/n:.3f} ms, "
              f"apiserver CPU/req {1000*statistics.median(r[2] for r in rows)/n:.3f} ms")

with tempfile.TemporaryDirectory(prefix="fleetwave-ab-") as tmp:
    state = fleet.up(Path(tmp) / "fleet", members={}, now=dt.datetime.now(dt.UTC))
    try:
        uvloop.run(main(state))
    finally:
        fleet.down(Path(tmp) / "fleet")
