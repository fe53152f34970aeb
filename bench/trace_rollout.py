"""Where a 3-stage rollout's time goes: a timeline of every watch event it causes (ADR 0068).

    .venv/bin/python bench/trace_rollout.py [--trials 3] [--state-dir DIR] [--controller-log]
        [--staged-run]

Same fleet, content and promotion as bench_gates' ratio trials (a Namespace, a ConfigMap and a
Deployment; dev -> staging -> production with no gates). Per trial a new revision is applied and
every event of the promotion, its stage profiles, their summaries (management cluster) and of the
Deployment on each member is printed with its receive time in ms since the revision was applied,
so the hops between "member Available" and "next stage's first write" can be read off.
`--staged-run` traces bench_gates' ClusterStagedUpdateRun of the same content instead (each trial's
time is from the run's creation; the timeline starts when the content is edited). With
`--controller-log` the controller runs at DEBUG and its lines (each reconcile with its queue wait and
duration, each HTTP request it sent) are merged in by their wall-clock time (millisecond resolution).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx2
from lightkube import ApiError, AsyncClient, codecs
from lightkube.resources.apps_v1 import Deployment
from lightkube.types import on_error_retry

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_gates as bg
from fleetwave.kube import client as kubeclient
from fleetwave.kube import kinds
from fleetwave.local import binaries, fleet
from fleetwave.ux import demo_setup as setup

NAME = "trace-rollout"


class Timeline:
    def __init__(self) -> None:
        self.t0 = time.monotonic()
        self.wall0 = time.time()
        self.lines: list[tuple[float, str]] = []

    def mark(self, what: str) -> None:
        self.lines.append((time.monotonic() - self.t0, what))

    def reset(self) -> None:
        self.t0 = time.monotonic()
        self.wall0 = time.time()
        self.lines.clear()

    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    def merge_log(self, log: Path | None, until: float) -> None:
        """Add the controller's log lines written between the reset and `until` seconds after it."""
        if log is None:
            return
        for line in log.read_text(errors="replace").splitlines():
            stamp, _, rest = line[:23], line[23:24], line[24:]
            try:
                at = dt.datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp() - self.wall0
            except ValueError:
                continue
            if 0 <= at <= until:
                self.lines.append((at, "  ctl " + rest.replace("fleetwave.runtime.controller: ", "")))
        self.lines.sort(key=lambda pair: pair[0])


def _describe(kind: str, obj: dict[str, Any]) -> str:
    meta, status = obj.get("metadata") or {}, obj.get("status") or {}
    name = meta.get("name", "?")
    if kind == "ClusterPromotion":
        rollout = status.get("rollout") or {}
        stages = " ".join(f"{s.get('name')}={s.get('phase')}" for s in rollout.get("stages") or [])
        return f"promotion {rollout.get('phase')} [{stages}]"
    if kind == "ClusterProfile":
        refs = len((obj.get("spec") or {}).get("clusterRefs") or [])
        return f"profile {name} refs={refs} gen={meta.get('generation')}"
    features = " ".join(
        f"{f.get('featureID')}={f.get('status')}" for f in status.get("featureSummaries") or []
    )
    fins = ",".join(meta.get("finalizers") or [])
    ready: dict[str, Any] = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), {})
    return (
        f"summary {name} ready={ready.get('status')} ({ready.get('reason')}) "
        f"observed={str(status.get('observedContentHash'))[:8]} {features} fin=[{fins}]"
    )


def _describe_run(obj: dict[str, Any]) -> str:
    status = obj.get("status") or {}
    stages = " ".join(
        f"{s.get('stageName')}="
        + ",".join(c["type"] for c in s.get("conditions") or [] if c.get("status") == "True")
        for s in status.get("stagesStatus") or []
    )
    done = [c["type"] for c in status.get("conditions") or [] if c.get("status") == "True"]
    return f"run {(obj.get('metadata') or {}).get('name')} {','.join(done)} [{stages}]"


async def _watch_mgmt(client: AsyncClient, kind: str, tl: Timeline, name_part: str) -> None:
    resource = kinds.resource(kind)
    namespace = "*" if kind == "ClusterSummary" else None
    async for event, obj in client.watch(resource, namespace=namespace, on_error=on_error_retry):
        raw = obj.to_dict() if hasattr(obj, "to_dict") else dict(obj)
        name = (raw.get("metadata") or {}).get("name", "")
        if name_part in name:
            line = _describe_run(raw) if kind == "ClusterStagedUpdateRun" else _describe(kind, raw)
            tl.mark(f"{event:8s} {line}")


async def _watch_member(member: str, client: AsyncClient, tl: Timeline, namespace: str) -> None:
    async for event, d in client.watch(Deployment, namespace=namespace):
        s, meta = d.status, d.metadata
        tl.mark(
            f"{event:8s} {member} Deployment gen={meta.generation if meta else None} "
            f"observed={s.observedGeneration if s else None} "
            f"updated={s.updatedReplicas if s else None} available={s.availableReplicas if s else None}"
        )


def _report(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        print("watch failed:", task.exception())


async def trace(state: fleet.FleetState, trials: int, log: Path | None, staged: bool) -> None:
    mk = kubeclient.config_from_file(state.cluster(fleet.MANAGEMENT).kubeconfig)
    client = kubeclient.async_client(mk)
    members = {
        m.name: kubeclient.async_client(kubeclient.config_from_file(m.kubeconfig)) for m in state.members
    }
    tl = Timeline()
    name = bg.STAGED if staged else NAME
    watched = (
        ("ClusterStagedUpdateRun",) if staged else ("ClusterPromotion", "ClusterProfile", "ClusterSummary")
    )
    tasks = [asyncio.create_task(_watch_mgmt(client, k, tl, name)) for k in watched]
    tasks += [asyncio.create_task(_watch_member(n, c, tl, name)) for n, c in members.items()]
    for task in tasks:
        task.add_done_callback(
            lambda t: t.cancelled() or t.exception() is None or print("watch:", t.exception())
        )
    if staged:
        try:
            await _trace_staged(client, tl, trials, log)
        finally:
            for task in tasks:
                task.cancel()
            with contextlib.suppress(BaseException):
                await asyncio.gather(*tasks, return_exceptions=True)
            for c in (client, *members.values()):
                await c.close()
        return
    w = bg.Watcher(client, NAME)
    w.start()
    try:
        await client.apply(codecs.from_dict(bg.policy_configmap(NAME, 0)), force=True)
        await client.apply(codecs.from_dict(bg.promotion(NAME, gated=False)), force=True)
        await w.until(lambda: w.rollout().get("phase") == "Succeeded")
        await asyncio.sleep(1.0)
        for trial in range(1, trials + 1):
            tl.reset()
            took = await bg.rollout_time(client, w, trial)
            await asyncio.sleep(0.5)  # the events that trail the last status write
            tl.merge_log(log, took + 0.5)
            print(f"--- trial {trial}: {took * 1000:.0f} ms")
            for at, line in tl.lines:
                print(f"{at * 1000:8.1f} ms  {line}")
    finally:
        w.stop()
        for task in tasks:
            task.cancel()
        with contextlib.suppress(BaseException):
            await asyncio.gather(*tasks, return_exceptions=True)
        await client.delete(kinds.resource("ClusterPromotion"), NAME)
        for c in (client, *members.values()):
            await c.close()


async def _served(client: AsyncClient) -> None:
    """Until the KubeFleet kinds answer: right after install their storage is still initialising (429)."""
    kinds_ = ("ClusterStagedUpdateStrategy", "ClusterResourcePlacement", "ClusterResourceSnapshot")
    for _ in range(300):
        try:
            for kind in kinds_:
                async for _obj in client.list(kinds.resource(kind)):
                    break
            return
        except (ApiError, httpx2.HTTPStatusError):
            await asyncio.sleep(0.2)
    raise TimeoutError("the KubeFleet kinds are not served")


async def _trace_staged(client: AsyncClient, tl: Timeline, trials: int, log: Path | None) -> None:
    await _served(client)
    await client.apply(codecs.from_dict(bg.staged_strategy()), force=True)
    await client.apply(codecs.from_dict(bg.staged_placement()), force=True)
    _, index = await bg.staged_run_time(client, 0, -1)
    await asyncio.sleep(1.0)
    for trial in range(1, trials + 1):
        tl.reset()
        took, index = await bg.staged_run_time(client, trial, index)
        await asyncio.sleep(0.5)
        tl.merge_log(log, tl.elapsed())
        print(f"--- trial {trial}: {took * 1000:.0f} ms from the run's creation")
        for at, line in tl.lines:
            print(f"{at * 1000:8.1f} ms  {line}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--state-dir", type=Path, default=None, help="reuse/keep a fleet here")
    parser.add_argument("--controller-log", action="store_true", help="merge the controller's DEBUG log in")
    parser.add_argument("--staged-run", action="store_true", help="trace a ClusterStagedUpdateRun instead")
    args = parser.parse_args()
    bins = binaries.ensure()
    with tempfile.TemporaryDirectory(prefix="fleetwave-trace-") as tmp:
        state_dir = args.state_dir or Path(tmp) / "fleet"
        state = fleet.up(
            state_dir,
            members=fleet.default_member_labels(3),
            now=dt.datetime.now(dt.UTC),
            bin_dir=bins.directory,
        )
        controller = None
        try:
            mgmt = kubeclient.client(kubeclient.config_from_file(state.cluster(fleet.MANAGEMENT).kubeconfig))
            setup.install_and_register(mgmt, state, setup.DemoConfig())
            mgmt.close()
            log = Path(tmp) / "controller.log"
            extra = ("--log-level", "DEBUG") if args.controller_log else ()
            controller = bg.start_controller(state, bins.path("helm"), log, extra)
            asyncio.run(trace(state, args.trials, log if args.controller_log else None, args.staged_run))
        finally:
            if controller is not None:
                bg.stop_controller(controller)
            if args.state_dir is None:
                fleet.down(state_dir)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
