"""What a member API server spends on one delivered object, by what the apply carries (issue 47).

    PYTHONPATH=src .venv/bin/python bench/bench_apply_cost.py [--trials 7] [--objects 100]

One light member API server with its own etcd (as `bench_scale.py` starts them). Each trial applies
`--objects` Namespaces, each holding one ConfigMap whose data changes every trial, all at once, in
four ways, interleaved, each on objects of its own:
  - plain: the objects as written, server-side apply with force (what `bench_scale.py`'s direct
    apply sends);
  - label: the same, carrying fleetwave's inventory label;
  - label+annotation: and its owner annotation (`fleetwave.io/deployed-by`);
  - fleetwave: `delivery.manifests.apply`, as every delivery to a member calls it (the label, the
    annotation, the resourceVersion precondition of the version its last apply returned).
Reported per way: medians, over the trials after the first (which creates the objects), of the
wall time and of the CPU seconds of the member API server, of its etcd and of the client (this
process, whose applies are all of its work in a step), each against plain.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from lightkube import codecs

import bench_scale  # the light fleet and the process CPU reader are shared
from fleetwave.delivery import content, manifests
from fleetwave.delivery.known_versions import KnownVersions
from fleetwave.delivery.target import MemberTarget
from fleetwave.kube import client as kubeclient
from fleetwave.local import binaries, fleet

Obj = dict[str, Any]
Apply = Callable[[int, int], Awaitable[None]]  # (trial, object index)
SETTLE = 1.0  # seconds of quiet before each timed step


def objects(prefix: str, trial: int, index: int) -> list[Obj]:
    namespace = f"{prefix}-{index}"
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "content", "namespace": namespace},
            "data": {"trial": str(trial)},
        },
    ]


def inventory(index: int) -> str:
    return f"bench/placement-{index}"


def labelled(obj: Obj, index: int, *, annotated: bool) -> Obj:
    """`obj` with the metadata a fleetwave delivery stamps on it (the label; and the annotation)."""
    out = content.with_inventory(obj, content.inventory_key(inventory(index)))
    if annotated:
        out["metadata"]["annotations"] = {manifests.OWNER_ANNOTATION: inventory(index)}
    return out


def ways(client: kubeclient.AsyncClient, member: MemberTarget) -> dict[str, Apply]:
    known = KnownVersions()

    def stamped(prefix: str, label: bool, annotated: bool) -> Apply:
        async def apply(trial: int, index: int) -> None:
            for obj in objects(prefix, trial, index):
                body = labelled(obj, index, annotated=annotated) if label else obj
                await client.apply(codecs.from_dict(body), force=True)

        return apply

    async def delivered(trial: int, index: int) -> None:
        report = await manifests.apply(
            member, objects("fleetwave", trial, index), inventory=inventory(index), known=known
        )
        if not report.ok:
            raise RuntimeError("; ".join(report.errors))

    return {
        "plain": stamped("plain", False, False),
        "label": stamped("label", True, False),
        "label+annotation": stamped("annotated", True, True),
        "fleetwave": delivered,
    }


def cpu(state: fleet.FleetState) -> dict[str, float]:
    return {p.name: bench_scale.cpu_seconds([p.pid]) for p in state.processes}


async def step(state: fleet.FleetState, apply: Apply, trial: int, count: int) -> tuple[float, ...]:
    """One way's apply of every object: (wall, member API server CPU, member etcd CPU, the
    client's CPU: this process's) seconds."""
    member = f"{state.members[0].name}/apiserver"
    await asyncio.sleep(SETTLE)
    before, started, own = cpu(state), time.monotonic(), time.process_time()
    await asyncio.gather(*(apply(trial, i) for i in range(count)))
    wall, after, own = time.monotonic() - started, cpu(state), time.process_time() - own
    return wall, after[member] - before[member], after["etcd-members"] - before["etcd-members"], own


async def measure(state: fleet.FleetState, trials: int, count: int) -> dict[str, list[float]]:
    config = state.members[0].kubeconfig
    client = kubeclient.async_client(kubeclient.config_from_file(config))
    rows: dict[str, list[tuple[float, ...]]] = {}
    applies = ways(client, MemberTarget.from_file("member", config))  # versions kept across trials
    try:
        for trial in range(1, trials + 1):
            for name, apply in applies.items():
                got = await step(state, apply, trial, count)
                print(f"trial {trial} {name:17s} " + _text(got), flush=True)
                if trial > 1:  # the first trial creates the objects
                    rows.setdefault(name, []).append(got)
    finally:
        await client.close()
    return {name: [statistics.median(c) for c in zip(*got, strict=True)] for name, got in rows.items()}


def _text(values: tuple[float, ...] | list[float]) -> str:
    wall, api, etcd, client = values
    return f"wall {wall:.2f} s, member API server {api:.2f} s, its etcd {etcd:.2f} s, client {client:.2f} s"


def report(medians: dict[str, list[float]], count: int) -> None:
    base = medians["plain"]
    print(f"medians over the trials after the first, {2 * count} applies each:")
    for name, values in medians.items():
        ratios = ", ".join(f"{v / b:.2f}x" for v, b in zip(values, base, strict=True) if b > 0)
        print(f"  {name:17s} {_text(values)} ({ratios} plain)")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--trials", type=int, default=7)
    parser.add_argument("--objects", type=int, default=100, help="Namespaces (each with a ConfigMap)")
    args = parser.parse_args()
    bins = binaries.ensure()
    with tempfile.TemporaryDirectory(prefix="fleetwave-bench-apply-") as tmp:
        state_dir = Path(tmp) / "fleet"
        state = bench_scale.light_fleet(state_dir, 1, bins)
        try:
            report(asyncio.run(measure(state, args.trials, args.objects)), args.objects)
        finally:
            fleet.down(state_dir)


if __name__ == "__main__":
    main()
