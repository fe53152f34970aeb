"""The agents of the local fleet's pull members (`fleetwave local up --pull-members K`, ADR 0106).

A pull member's agent runs beside it as `python -m fleetwave agent run`, recorded with the fleet's
processes (`<member>/agent`) so that `local status` counts it and `local down` stops it first. On its
member it acts as a ServiceAccount of its own (`fleetwave-agent/fleetwave-agent`, bound to
cluster-admin), never as the member's admin: the member's audit log tells its requests apart from
those of the admin identity the hub and the member's own controllers use.

Registering the member on the hub is not done here (this layer cannot reach the management code):
the caller passes the hub kubeconfig registration issued, which is written 0600 in the state dir.
"""

from __future__ import annotations

import base64
import json
import os
import sys
import time
import urllib.error
from pathlib import Path
from typing import Any

from fleetwave.api import pullmode
from fleetwave.local import api, processes
from fleetwave.local.fleet import MANAGEMENT, ClusterInfo, FleetError, FleetState, replace_processes

ACCOUNT = "fleetwave-agent"  # the agent's ServiceAccount on its member, in a namespace of that name
TOKEN_SECONDS = 365 * 24 * 3600  # as long as the hub credential `cluster register --pull` issues
HUB_KUBECONFIG, MEMBER_KUBECONFIG = "hub-kubeconfig", "agent-kubeconfig"
START_TIMEOUT = 120.0  # seconds for a new agent to take its lease: Python starting on a busy machine
_SRC = Path(__file__).resolve().parents[2]  # the directory holding this fleetwave package


def process_name(member: str) -> str:
    return f"{member}/agent"


def username() -> str:
    """The agent's user name on its member, as the member's API server (and audit log) knows it."""
    return f"system:serviceaccount:{ACCOUNT}:{ACCOUNT}"


def identity(member: str) -> str:
    """The agent's holder identity on its lease on the hub."""
    return f"local-{member}"


def pending(state: FleetState) -> list[ClusterInfo]:
    """Pull members whose agent is not running (never started, or exited): `local up` registers
    them and starts their agents."""
    alive = {p.name for p in state.processes if processes.is_ours(p)}
    return [c for c in state.members if c.pull and process_name(c.name) not in alive]


def start(
    state: FleetState, member: ClusterInfo, *, hub_kubeconfig: bytes, cluster_namespace: str
) -> FleetState:
    """Start the member's agent with its hub credential and its own identity on the member; the
    state (saved) records it, replacing an earlier record of an agent that exited."""
    cdir = Path(member.kubeconfig).parent
    hub = _write_private(cdir / HUB_KUBECONFIG, hub_kubeconfig)
    own = member_kubeconfig(state, member)
    bins = Path(state.bin_dir)
    argv = [
        *(sys.executable, "-m", "fleetwave", "agent", "run"),
        *("--cluster", member.name, "--cluster-namespace", cluster_namespace),
        *("--hub-kubeconfig", str(hub), "--kubeconfig", str(own)),
        *("--helm", str(bins / "helm"), "--identity", identity(member.name)),
        *("--metrics-port", str(processes.free_port()), "--health-port", str(processes.free_port())),
    ]
    record = processes.start(
        process_name(member.name), argv, log=cdir / "agent.log", marker=state.state_dir, env=_same_fleetwave()
    )
    return replace_processes(state, {record.name}, [record])


def _same_fleetwave() -> dict[str, str]:
    """The agent runs the fleetwave that started it (a checkout's, not another one installed)."""
    rest = os.environ.get("PYTHONPATH")
    return {"PYTHONPATH": f"{_SRC}{os.pathsep}{rest}" if rest else str(_SRC)}


def wait_holding(state: FleetState, member: ClusterInfo, *, cluster_namespace: str) -> str:
    """Wait until the member's agent holds its lease on the hub (so it reached both clusters and
    acts); returns the holder. FleetError, naming its log, when the agent exits or takes too long."""
    record = next(p for p in state.processes if p.name == process_name(member.name))
    deadline = time.monotonic() + START_TIMEOUT
    while (holder := lease_holder(state, member, cluster_namespace=cluster_namespace)) is None:
        if not processes.is_ours(record):
            raise FleetError(f"the agent of {member.name} exited during start-up; see {record.log}")
        if time.monotonic() > deadline:
            raise FleetError(
                f"the agent of {member.name} holds no lease after {START_TIMEOUT:.0f}s; see {record.log}"
            )
        time.sleep(0.5)
    return holder


def lease_holder(state: FleetState, member: ClusterInfo, *, cluster_namespace: str) -> str | None:
    """The holder of the member's agent lease on the hub (read as the hub's admin); None when there
    is no lease yet or nobody holds it."""
    hub = state.cluster(MANAGEMENT)
    namespace = pullmode.hub_namespace(f"{cluster_namespace}/{member.name}")
    path = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{pullmode.LEASE_NAME}"
    try:
        lease = api.request(hub.server, Path(state.ca_cert), hub.token, "GET", path)
    except urllib.error.HTTPError as e:
        e.close()
        if e.code != 404:
            raise
        return None
    holder = (lease.get("spec") or {}).get("holderIdentity")
    return holder if isinstance(holder, str) and holder else None


def member_kubeconfig(state: FleetState, member: ClusterInfo) -> Path:
    """The agent's kubeconfig for its member: the ServiceAccount (made if missing, bound to
    cluster-admin: the agent applies whatever its work holds) and a fresh token for it from the
    TokenRequest API, written 0600 beside the member's admin kubeconfig (which stays as it is)."""
    ca = Path(state.ca_cert)
    for path, body in _account_objects():
        _create(member, ca, path, body)
    issued = api.request(
        member.server,
        ca,
        member.token,
        "POST",
        f"/api/v1/namespaces/{ACCOUNT}/serviceaccounts/{ACCOUNT}/token",
        {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": TOKEN_SECONDS},
        },
    )
    return _write_private(
        Path(member.kubeconfig).parent / MEMBER_KUBECONFIG,
        _kubeconfig(member, ca.read_bytes(), issued["status"]["token"]),
    )


def _account_objects() -> list[tuple[str, dict[str, Any]]]:
    meta = {"name": ACCOUNT}
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": meta,
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"kind": "ServiceAccount", "name": ACCOUNT, "namespace": ACCOUNT}],
    }
    return [
        ("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": meta}),
        (
            f"/api/v1/namespaces/{ACCOUNT}/serviceaccounts",
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta},
        ),
        ("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", binding),
    ]


def _create(member: ClusterInfo, ca: Path, path: str, body: dict[str, Any]) -> None:
    """Create one object as the member's admin; one already there is kept (`local up` again)."""
    try:
        api.request(member.server, ca, member.token, "POST", path, body)
    except urllib.error.HTTPError as e:
        e.close()
        if e.code != 409:
            raise


def _kubeconfig(member: ClusterInfo, ca: bytes, token: str) -> bytes:
    """Self-contained (CA and token inline): what the agent's member policy accepts."""
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": member.name,
                "cluster": {
                    "server": member.server,
                    "certificate-authority-data": base64.b64encode(ca).decode(),
                },
            }
        ],
        "users": [{"name": ACCOUNT, "user": {"token": token}}],
        "contexts": [{"name": member.name, "context": {"cluster": member.name, "user": ACCOUNT}}],
        "current-context": member.name,
    }
    return json.dumps(doc, indent=2).encode()


def _write_private(path: Path, data: bytes) -> Path:
    """A credential, created 0600 and never wider (not written and then narrowed)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        os.fchmod(f.fileno(), 0o600)
        f.write(data)
    return path
