"""From a Git push to dev's first apply, through Flux's real source-controller (ADR 0103).

    .venv/bin/python bench/bench_git_push.py [--trials 12] [--json]

A local fleet (3 members), Flux's source-controller and a Git server on loopback, and the controller
as a `fleetwave controller run --flux-sources` subprocess. A ClusterPromotion delivers the manifests
under `apps/` of a GitRepository to dev. Per trial a new commit is pushed and the source asked to
reconcile at once (Flux's `reconcile.fluxcd.io/requestedAt`, what `flux reconcile source git` sets);
this script polls every 10 ms:

  push -> artifact:   until the GitRepository's status.artifact names the new commit (Flux's part);
  artifact -> apply:  from then until dev's member holds the new content (fleetwave's part: wake-up,
                      download, digest check, unpack, pin, the stage profile and summary, the apply);
  fetch cost:         the same artifact downloaded, verified, unpacked and read by an ArtifactStore in
                      this process (what one revision costs the controller, once, for every cluster).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import functools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import yaml
from lightkube import ApiError, Client
from lightkube.resources.core_v1 import ConfigMap
from lightkube.types import PatchType

from fleetwave.delivery.artifact_store import ArtifactStore
from fleetwave.delivery.artifacts import artifact_of
from fleetwave.kube import client as kubeclient
from fleetwave.kube import kinds
from fleetwave.local import binaries, fleet, processes
from fleetwave.local import flux as local_flux
from fleetwave.mgmt import install, manifests
from fleetwave.promapi import guards
from fleetwave.ux import demo_setup as setup

NS = "bench-git"
GIT = kinds.served_resource(kinds.FLUX_SOURCE_API_VERSION, "GitRepository", "gitrepositories", True)
POLL = 0.01
T = TypeVar("T")


def until(probe: Callable[[], T | None], what: str, timeout: float = 120.0) -> tuple[T, float]:
    """The first truthy answer of `probe` and when it came (monotonic seconds)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            found = probe()
        except ApiError as e:
            if e.status.code != 404:
                raise
            found = None
        if found:
            return found, time.monotonic()
        time.sleep(POLL)
    raise SystemExit(f"timed out after {timeout:.0f}s waiting for {what}")


def manifest(value: str) -> str:
    """What each commit holds: the namespace (fleetwave never creates one) and a ConfigMap."""
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "from-git", "namespace": NS}}
    return yaml.safe_dump_all([namespace, {**body, "data": {"value": value}}])


def push(flux: local_flux.Flux, tmp: Path, value: str) -> str:
    tree = tmp / f"tree-{value}"
    (tree / "apps").mkdir(parents=True)
    (tree / "apps" / "from-git.yaml").write_text(manifest(value))
    return flux.push("bench", tree, message=value)


def request_fetch(client: Client) -> None:
    stamp = dt.datetime.now(dt.UTC).isoformat()
    patch = {"metadata": {"annotations": {"reconcile.fluxcd.io/requestedAt": stamp}}}
    client.patch(GIT, "bench", patch, namespace=NS, patch_type=PatchType.MERGE)


def artifact_named(client: Client, sha: str) -> dict[str, Any] | None:
    obj = client.get(GIT, "bench", namespace=NS)
    artifact = (obj.status or {}).get("artifact") or {}
    return (
        {"metadata": {"namespace": NS, "name": "bench"}, "status": obj.status}
        if str(artifact.get("revision", "")).endswith(sha)
        else None
    )


def holds(member: Client, value: str) -> bool:
    return value_on(member) == value


def value_on(member: Client) -> str | None:
    return str((member.get(ConfigMap, "from-git", namespace=NS).data or {}).get("value") or "") or None


def setup_content(client: Client, flux: local_flux.Flux) -> None:
    url = flux.create_repo("bench")
    docs = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}},
        {
            "apiVersion": kinds.FLUX_SOURCE_API_VERSION,
            "kind": "GitRepository",
            "metadata": {"name": "bench", "namespace": NS},
            "spec": {"url": url, "interval": "10m", "ref": {"branch": "main"}},
        },
        {
            "apiVersion": "config.projectsveltos.io/v1beta1",
            "kind": "ClusterPromotion",
            "metadata": {"name": "bench-git"},
            "spec": {
                "profileSpec": {
                    "syncMode": "Continuous",
                    "policyRefs": [
                        {"kind": "GitRepository", "namespace": NS, "name": "bench", "path": "apps"}
                    ],
                },
                "stages": [{"name": "dev", "clusterSelector": {"matchLabels": {"env": "dev"}}}],
            },
        },
    ]
    manifests.apply(client, manifests.documents(yaml.safe_dump_all(docs)))


def fetch_cost(source: dict[str, Any]) -> float:
    """Download, digest check, unpack and read of the artifact by a fresh store, in seconds."""

    async def once() -> float:
        store = ArtifactStore()
        artifact = artifact_of("GitRepository", source)
        start = time.perf_counter()
        await store.ensure(artifact, ["apps"])
        assert store.texts(artifact, "apps"), "the artifact's path was not read"
        return time.perf_counter() - start

    return asyncio.run(once())


def trials(
    n: int, client: Client, member: Client, flux: local_flux.Flux, tmp: Path
) -> list[dict[str, float]]:
    out = []
    for i in range(n + 1):  # the first revision starts the rollout: not counted
        value = f"v{i}-{time.time_ns()}"
        sha = push(flux, tmp, value)
        pushed = time.monotonic()
        request_fetch(client)
        source, seen = until(functools.partial(artifact_named, client, sha), f"the artifact of {sha[:7]}")
        _, applied = until(functools.partial(holds, member, value), f"dev running {value}", timeout=180)
        if i:
            out.append(
                {
                    "push_to_artifact": seen - pushed,
                    "artifact_to_apply": applied - seen,
                    "push_to_apply": applied - pushed,
                    "fetch_cost": fetch_cost(source),
                }
            )
    return out


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def report(results: list[dict[str, float]], as_json: bool) -> None:
    summary = {
        key: {
            "p50_ms": round(pct([r[key] for r in results], 0.5) * 1000, 1),
            "p99_ms": round(pct([r[key] for r in results], 0.99) * 1000, 1),
            "mean_ms": round(statistics.mean(r[key] for r in results) * 1000, 1),
        }
        for key in ("push_to_artifact", "artifact_to_apply", "push_to_apply", "fetch_cost")
    }
    if as_json:
        print(json.dumps({"trials": len(results), "summary": summary}, indent=2))
        return
    print(f"{len(results)} trials, polled every {POLL * 1000:.0f} ms")
    for key, row in summary.items():
        print(
            f"  {key:<18} p50 {row['p50_ms']:>8.1f} ms   p99 {row['p99_ms']:>8.1f} ms"
            f"   mean {row['mean_ms']:>8.1f} ms"
        )


def start_controller(state: fleet.FleetState, helm: str, log: Path) -> subprocess.Popen[bytes]:
    argv = [
        sys.executable,
        "-m",
        "fleetwave",
        "controller",
        "run",
        "--kubeconfig",
        state.cluster(fleet.MANAGEMENT).kubeconfig,
        "--helm",
        helm,
        "--flux-sources",
        "--allow-loopback-targets",
        "--metrics-port",
        str(processes.free_port()),
        "--health-port",
        str(processes.free_port()),
    ]
    with log.open("wb") as out:
        return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=12)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    guards.allow_loopback_targets()  # the artifacts are served on 127.0.0.1 (fetch cost, here)
    bins = binaries.ensure()
    with tempfile.TemporaryDirectory(prefix="fleetwave-bench-git-") as tmp:
        state = fleet.up(
            Path(tmp) / "fleet",
            members=fleet.default_member_labels(3),
            now=dt.datetime.now(dt.UTC),
            bin_dir=bins.directory,
        )
        mk = state.cluster(fleet.MANAGEMENT).kubeconfig
        flux = local_flux.start(Path(tmp) / "flux", kubeconfig=mk, kubectl_binary=bins.path("kubectl"))
        controller = None
        try:
            client = kubeclient.client(kubeclient.config_from_file(mk))
            setup.install_and_register(client, state, setup.DemoConfig())
            install.install(client, flux_sources=True)
            controller = start_controller(state, bins.path("helm"), Path(tmp) / "controller.log")
            setup_content(client, flux)
            member = kubeclient.client(kubeclient.config_from_file(state.cluster("member-1").kubeconfig))
            report(trials(args.trials, client, member, flux, Path(tmp)), args.json)
        finally:
            if controller is not None:
                controller.terminate()
                controller.wait(30)
            local_flux.stop(flux)
            fleet.down(Path(tmp) / "fleet")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
