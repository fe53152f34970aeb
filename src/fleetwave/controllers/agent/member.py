"""The agent's own member: the cluster it runs in (its pod's ServiceAccount) or a kubeconfig file.

Delivery code reaches members through `MemberTarget`, whose kubeconfig must pass the member policy
(inline credentials, https). In a pod the ServiceAccount's token and CA are read again for each
target, so the kubelet's token rotation is followed (a new token is a new pooled client)."""

from __future__ import annotations

import base64
import json
import os
from dataclasses import dataclass
from pathlib import Path

from fleetwave.delivery.target import MemberTarget
from fleetwave.kube.client import SERVICE_ACCOUNT_DIR

MAX_KUBECONFIG_BYTES = 256 * 1024


class MemberConfigError(Exception):
    """The agent cannot tell how to reach its own cluster; the message says what to pass."""


@dataclass(frozen=True, slots=True)
class Member:
    """How the agent reaches its cluster: `kubeconfig` (a file), else the pod's ServiceAccount."""

    cluster: str  # namespace/name, as the hub registered it
    kubeconfig: Path | None = None
    account_dir: Path = SERVICE_ACCOUNT_DIR

    def target(self) -> MemberTarget:
        return MemberTarget(self.cluster, self._kubeconfig_bytes())

    def _kubeconfig_bytes(self) -> bytes:
        if self.kubeconfig is not None:
            try:
                with self.kubeconfig.open("rb") as f:
                    data = f.read(MAX_KUBECONFIG_BYTES + 1)
            except OSError as e:
                raise MemberConfigError(f"--kubeconfig {self.kubeconfig}: {e.strerror or e}") from None
            if len(data) > MAX_KUBECONFIG_BYTES:
                raise MemberConfigError(f"--kubeconfig {self.kubeconfig}: over {MAX_KUBECONFIG_BYTES} bytes")
            return data
        return in_cluster_kubeconfig(self.account_dir)


def in_cluster_kubeconfig(account_dir: Path = SERVICE_ACCOUNT_DIR) -> bytes:
    """The pod's identity as a kubeconfig with inline credentials (what the member policy accepts)."""
    host, port = os.environ.get("KUBERNETES_SERVICE_HOST"), os.environ.get("KUBERNETES_SERVICE_PORT", "443")
    if not host or not (account_dir / "token").is_file():
        raise MemberConfigError(
            "not running in a pod with a ServiceAccount token: pass --kubeconfig with the member's kubeconfig"
        )
    ca = base64.b64encode((account_dir / "ca.crt").read_bytes()).decode()
    token = (account_dir / "token").read_text().strip()
    server = f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}"
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "member", "cluster": {"server": server, "certificate-authority-data": ca}}],
        "users": [{"name": "agent", "user": {"token": token}}],
        "contexts": [{"name": "member", "context": {"cluster": "member", "user": "agent"}}],
        "current-context": "member",
    }
    return json.dumps(doc).encode()
