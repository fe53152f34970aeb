"""The real KubeFleet on a local fleet: its CRDs, its hub agent, and one member agent per member.

Built from the pinned source by `tools/kubefleet/build.sh` (docs/adr/0116). Webhooks and leader
election are off (no webhook service or certificates on a local fleet; one replica of each). Every
agent is recorded with the fleet (`fleet.replace_processes`) so `fleet.down` stops it even when the
benchmark dies; the hub agent ignores SIGTERM once its manager stops and is killed after the grace.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

from lightkube import Client
from lightkube.generic_resource import create_global_resource

from fleetwave.kube import client as kubeclient
from fleetwave.local import binaries, fleet, processes
from fleetwave.local.processes import ProcessRecord

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "tools" / "kubefleet" / "build.sh"
MEMBER_CRD = "placement.kubernetes-fleet.io_appliedworks.yaml"  # what a member agent needs on its member
MEMBER_CLUSTER = create_global_resource(
    "cluster.kubernetes-fleet.io", "v1beta1", "MemberCluster", "memberclusters"
)
JOIN_TIMEOUT = 300.0


def build(source: str | None) -> Path:
    """The directory holding bin/ and crds/ of the pinned KubeFleet (built on first use)."""
    argv = [str(BUILD), *([source] if source else [])]
    out = subprocess.run(argv, check=True, stdout=subprocess.PIPE, text=True).stdout
    return Path(out.strip().splitlines()[-1])


def kubectl_apply(bins: binaries.Binaries, kubeconfig: str, paths: list[Path]) -> None:
    argv = [bins.path("kubectl"), "--kubeconfig", kubeconfig, "apply", "--server-side"]
    for path in paths:
        argv += ["-f", str(path)]
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
    wait = [bins.path("kubectl"), "--kubeconfig", kubeconfig, "wait", "--for=condition=Established"]
    deadline = time.monotonic() + 120
    # A CRD just created has no conditions yet, and `kubectl wait` fails on that instead of waiting.
    argv = [*wait, "crd", "--all", "--timeout=60s"]
    while subprocess.run(argv, capture_output=True, check=False).returncode:
        if time.monotonic() > deadline:
            raise RuntimeError(f"KubeFleet's CRDs not Established within 120 s ({kubeconfig})")
        time.sleep(0.5)


def install_crds(state: fleet.FleetState, bins: binaries.Binaries, kf: Path) -> None:
    """Every KubeFleet CRD on the hub; the AppliedWork CRD on each member (the member agent checks it)."""
    kubectl_apply(bins, state.cluster(fleet.MANAGEMENT).kubeconfig, sorted((kf / "crds").glob("*.yaml")))
    for member in state.members:
        kubectl_apply(bins, member.kubeconfig, [kf / "crds" / MEMBER_CRD])


def _hub_agent(state: fleet.FleetState, kf: Path, log_dir: Path) -> ProcessRecord:
    argv = [
        str(kf / "bin" / "hubagent"),
        f"--kubeconfig={state.cluster(fleet.MANAGEMENT).kubeconfig}",
        "--leader-elect=false",
        "--enable-webhook=false",
        f"--health-probe-bind-address=127.0.0.1:{processes.free_port()}",
        "--metrics-bind-address=0",
        "--v=0",
    ]
    return processes.start("kubefleet/hubagent", argv, log=log_dir / "hubagent.log", marker=state.state_dir)


def _hub_token(state: fleet.FleetState, log_dir: Path) -> Path:
    """The hub's bearer token in a file, written once and whole before any agent starts: rewritten
    per agent, it was empty for an agent that read it while the next one's write truncated it, and
    that agent exited ("read empty token from file")."""
    token = log_dir / "hub-token"
    partial = token.with_suffix(".partial")
    partial.write_text(state.cluster(fleet.MANAGEMENT).token)
    partial.replace(token)
    return token


def _member_agent(
    state: fleet.FleetState, member: fleet.ClusterInfo, kf: Path, log_dir: Path, token: Path
) -> ProcessRecord:
    hub = state.cluster(fleet.MANAGEMENT)
    env = {
        "HUB_SERVER_URL": hub.server,
        "CONFIG_PATH": str(token),  # the hub's bearer token, read from this file
        "CA_BUNDLE": state.ca_cert,
        "MEMBER_CLUSTER_NAME": member.name,
    }
    argv = [
        str(kf / "bin" / "memberagent"),
        f"--kubeconfig={member.kubeconfig}",
        "--leader-elect=false",
        f"--hub-health-probe-bind-address=127.0.0.1:{processes.free_port()}",
        "--hub-metrics-bind-address=0",
        f"--health-probe-bind-address=127.0.0.1:{processes.free_port()}",
        "--metrics-bind-address=0",
        "--v=0",
    ]
    log = log_dir / f"memberagent-{member.name}.log"
    return processes.start(
        f"kubefleet/memberagent/{member.name}", argv, log=log, marker=state.state_dir, env=env
    )


def start(state: fleet.FleetState, kf: Path, log_dir: Path) -> tuple[fleet.FleetState, list[ProcessRecord]]:
    """The hub agent and every member agent, recorded with the fleet (so `fleet.down` stops them)."""
    log_dir.mkdir(parents=True, exist_ok=True)
    token = _hub_token(state, log_dir)
    records = [_hub_agent(state, kf, log_dir)]
    records += [_member_agent(state, m, kf, log_dir, token) for m in state.members]
    state = fleet.replace_processes(state, [r.name for r in records], records)
    return state, records


def _name(obj: Any) -> str:
    return str(obj.metadata.name)


def joined(obj: Any) -> bool:
    conditions = (obj.status or {}).get("conditions") or []
    return any(c.get("type") == "Joined" and c.get("status") == "True" for c in conditions)


def wait_joined(state: fleet.FleetState, agents: list[ProcessRecord]) -> float:
    """Until every MemberCluster shows Joined; returns how long it took. An agent that exits fails it."""
    started = time.monotonic()
    names = {m.name for m in state.members}
    with kubeclient.client(kubeclient.config_from_file(state.cluster(fleet.MANAGEMENT).kubeconfig)) as hub:
        while True:
            done = {_name(o) for o in hub.list(MEMBER_CLUSTER) if joined(o)}
            if names <= done:
                return time.monotonic() - started
            dead = [r.name for r in agents if not processes.is_ours(r)]
            if dead or time.monotonic() - started > JOIN_TIMEOUT:
                missing = sorted(names - done)
                raise RuntimeError(f"KubeFleet members not joined: {missing} (agents exited: {dead})")
            time.sleep(0.5)


def hub_client(state: fleet.FleetState) -> Client:
    return kubeclient.client(kubeclient.config_from_file(state.cluster(fleet.MANAGEMENT).kubeconfig))
