"""The few API calls the local fleet makes while it starts, over stdlib HTTPS.

Kept on the standard library on purpose: bringing the fleet up must not depend on the Kubernetes
client the controller uses, so a client bug can never hide behind an infrastructure failure.
"""

from __future__ import annotations

import base64
import json
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any


def _context(ca_cert: Path) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(ca_cert))


def is_ready(server: str, ca_cert: Path, *, timeout: float) -> bool:
    try:
        with urllib.request.urlopen(f"{server}/readyz", timeout=timeout, context=_context(ca_cert)) as r:
            return bool(r.status == 200)
    except urllib.error.HTTPError as e:
        e.close()  # an HTTPError owns the open socket
        return False
    except (OSError, ssl.SSLError):
        return False


def wait_etcd(port: int, *, timeout: float, check_alive: Callable[[], bool]) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                if json.loads(r.read()).get("health") == "true":
                    return
        except (OSError, ValueError):
            pass
        if not check_alive():
            raise RuntimeError(
                "etcd exited during start-up; see etcd.log or etcd-members.log in the fleet's state dir"
            )
        if time.monotonic() > deadline:
            raise RuntimeError(f"etcd not healthy after {timeout:.0f}s")
        time.sleep(0.2)


def request(server: str, ca_cert: Path, token: str, method: str, path: str, body: Any = None) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(
        f"{server}{path}",
        data=data,
        method=method,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=30, context=_context(ca_cert)) as r:
        return json.loads(r.read() or b"null")


def create_fake_node(server: str, ca_cert: Path, token: str, *, name: str) -> None:
    """A Node that kwok keeps Ready and whose pods it drives to Running (and Jobs' pods to Succeeded)."""
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {"node.alpha.kubernetes.io/ttl": "0", "kwok.x-k8s.io/node": "fake"},
            "labels": {"type": "kwok", "kubernetes.io/hostname": name, "kubernetes.io/os": "linux"},
        },
        "status": {
            "allocatable": {"cpu": "64", "memory": "256Gi", "pods": "500"},
            "capacity": {"cpu": "64", "memory": "256Gi", "pods": "500"},
        },
    }
    try:
        request(server, ca_cert, token, "POST", "/api/v1/nodes", node)
    except urllib.error.HTTPError as e:
        e.close()
        if e.code != 409:
            raise


def write_kubeconfig(path: Path, *, cluster: str, server: str, ca_cert: Path, token: str) -> None:
    # Self-contained (CA embedded) so the file can be copied into a Secret when registering a member.
    ca_data = base64.b64encode(ca_cert.read_bytes()).decode()
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": cluster, "cluster": {"server": server, "certificate-authority-data": ca_data}}],
        "users": [{"name": f"{cluster}-admin", "user": {"token": token}}],
        "contexts": [{"name": cluster, "context": {"cluster": cluster, "user": f"{cluster}-admin"}}],
        "current-context": cluster,
    }
    path.write_text(json.dumps(config, indent=2))  # JSON is valid YAML
    path.chmod(0o600)
