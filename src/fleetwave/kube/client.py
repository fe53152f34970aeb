"""Kubernetes API clients for the management cluster and the members.

One place decides how fleetwave talks to an API server: field manager, timeouts, no proxy settings
taken from the environment, and how a kubeconfig (a file, or the bytes kept in a member's Secret)
becomes a client. Controllers annotate with the aliases here and never import lightkube.
"""

from __future__ import annotations

import base64
import json
import os
import ssl
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx2
from lightkube import AsyncClient, Client, ConfigError, KubeConfig

from fleetwave.api import yamlsafe
from fleetwave.kube import fence, internals, kubeconfig_policy, lanes, request_metrics
from fleetwave.kube.asyncio_streams import AsyncioBackend
from fleetwave.kube.kubeconfig_policy import KubeconfigRefused

__all__ = [
    "FIELD_MANAGER",
    "AsyncClient",
    "Client",
    "ConfigError",
    "KubeConfig",
    "KubeconfigRefused",
    "MemberKubeConfig",
    "async_client",
    "async_http",
    "client",
    "config_from_bytes",
    "config_from_file",
    "config_from_files",
    "http",
    "impersonation_headers",
    "in_cluster",
    "in_cluster_config",
    "member_config",
    "member_kubeconfig_text",
]

FIELD_MANAGER = "fleetwave"
_TIMEOUT = httpx2.Timeout(30.0, connect=10.0)
# An idle connection is kept this long (httpx's default is 5 s), as long as the session pool keeps a
# member's client (`delivery.sessions.IDLE_SECONDS`): a member delivered to, probed or judged every
# few seconds no longer pays a TCP and TLS handshake, on both sides, each time (ADR 0068, addendum bf5b632).
KEEPALIVE_SECONDS = 60.0
# Requests in flight at once per client, one HTTP/1.1 connection each, and every connection a burst
# opened is kept for the next (httpx keeps 20: a burst of 40 status writes closed 20 connections and
# the next burst paid 20 handshakes). Not HTTP/2: its one connection serialises every request
# through locks whose every hand-over costs an event-loop turn, and under a busy loop (1,000
# clusters) that capped the controller at ~one request per turn (ADR 0068, addendum 7cdf8b3).
CONNECTIONS = 100
_LIMITS = httpx2.Limits(
    max_connections=CONNECTIONS, max_keepalive_connections=CONNECTIONS, keepalive_expiry=KEEPALIVE_SECONDS
)
# Of those, requests in the bulk lane (`lanes.bulk()`: per-cluster work) in flight at once; the rest
# are kept for a rollout's own decisions, which then wait behind at most these (ADR 0068, addendum 929c24d).
BULK_SLOTS = 32

http = internals.http
async_http = internals.async_http


def config_from_file(path: str | Path, *, context: str | None = None) -> KubeConfig:
    """A kubeconfig file; `context` picks one of its contexts instead of its current-context."""
    return config_from_files([Path(path)], context=context)


def config_from_files(paths: Sequence[Path], *, context: str | None = None) -> KubeConfig:
    """kubectl's merge of a `$KUBECONFIG` list: for each cluster, user and context name the first
    file that defines it wins, and the current-context is the first one set; a file a kubeconfig
    names (a CA, a client certificate) is found beside the kubeconfig that names it. Every problem
    is a ConfigError naming the file, read with the bounded loader."""
    where = ", ".join(str(p) for p in paths)
    merged = _merged([_read_kubeconfig(p) for p in paths])
    if not merged["clusters"] or not merged["contexts"]:
        raise ConfigError(f"{where}: no clusters or contexts: not a kubeconfig, or an empty one")
    if context:
        if context not in {c.get("name") for c in merged["contexts"]}:
            raise ConfigError(f"context {context!r} is not in {where}")
        merged["current-context"] = context
    if not merged.get("current-context"):
        raise ConfigError(f"{where} sets no current-context: pass --context NAME")
    try:
        return KubeConfig.from_dict(merged, fname=str(paths[0]))
    except Exception as e:  # lightkube's reading of a malformed entry raises assorted types
        raise ConfigError(f"{where}: not a valid kubeconfig ({type(e).__name__})") from None


# Fields that name a file, relative to the kubeconfig that holds them.
_FILE_FIELDS = (
    ("clusters", "cluster", ("certificate-authority",)),
    ("users", "user", ("client-certificate", "client-key", "tokenFile")),
)


def _read_kubeconfig(path: Path) -> dict[str, Any]:
    try:
        data = path.read_bytes()
    except OSError as e:
        raise ConfigError(f"{path}: cannot be read ({e.strerror or e})") from None
    try:
        parsed = yamlsafe.load(data, what=str(path))
    except yamlsafe.YamlError as e:
        raise ConfigError(str(e)) from None
    if parsed is None:
        return {}
    if not isinstance(parsed, dict):
        raise ConfigError(f"{path}: not a kubeconfig (expected a mapping with clusters, users and contexts)")
    for section, field, keys in _FILE_FIELDS:
        for entry in parsed.get(section) or []:
            body = entry.get(field) if isinstance(entry, dict) else None
            if isinstance(body, dict):
                entry[field] = {
                    k: (
                        str(path.parent / v)
                        if k in keys and isinstance(v, str) and v and not os.path.isabs(v)
                        else v
                    )
                    for k, v in body.items()
                }
    return parsed


def _merged(docs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    merged: dict[str, Any] = {"clusters": [], "users": [], "contexts": [], "current-context": None}
    for doc in docs:
        merged["current-context"] = merged["current-context"] or doc.get("current-context")
        for section in ("clusters", "users", "contexts"):
            entries = doc.get(section) or []
            taken = {e["name"] for e in merged[section]}
            for entry in entries if isinstance(entries, list) else []:
                if (
                    isinstance(entry, dict)
                    and isinstance(entry.get("name"), str)
                    and entry["name"] not in taken
                ):
                    taken.add(entry["name"])
                    merged[section].append(entry)
    return merged


# Where the kubelet mounts a pod's ServiceAccount token, CA and namespace.
SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


def in_cluster(account_dir: Path = SERVICE_ACCOUNT_DIR) -> bool:
    """Whether this process runs in a pod with a mounted ServiceAccount token."""
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and (account_dir / "token").is_file()


def in_cluster_config(account_dir: Path = SERVICE_ACCOUNT_DIR) -> KubeConfig:
    """The pod's own identity: the API server from the service environment, the mounted CA, and the
    token file (re-read when the server answers 401, so the kubelet's token rotation is followed)."""
    return KubeConfig.from_service_account(service_account=account_dir)


def config_from_bytes(data: bytes | str) -> KubeConfig:
    """A kubeconfig the operator trusts (the management cluster's); parsed with the bounded loader."""
    parsed = yamlsafe.load(data, what="kubeconfig")
    if not isinstance(parsed, dict):
        raise ConfigError("kubeconfig: expected a mapping with clusters, users and contexts")
    return KubeConfig.from_dict(parsed)


class MemberKubeConfig(KubeConfig):
    """A member's canonical kubeconfig, with the identity it acts as when its user says `as`
    (lightkube reads no impersonation: the clients built here send the headers themselves)."""

    impersonate: tuple[str, tuple[str, ...]] | None = None


def impersonation_headers(config: KubeConfig) -> list[tuple[str, str]]:
    """Impersonate-User and one Impersonate-Group per group, for a member config that acts as
    someone else; none otherwise."""
    who = config.impersonate if isinstance(config, MemberKubeConfig) else None
    if who is None:
        return []
    user, groups = who
    return [("Impersonate-User", user), *(("Impersonate-Group", g) for g in groups)]


def member_config(data: bytes | str, *, allow_insecure: bool = False) -> KubeConfig:
    """A member cluster's kubeconfig: data from someone else, so it must pass `kubeconfig_policy`
    (inline credentials, https) before anything reads it; `KubeconfigRefused` otherwise. The client
    is built from the policy's canonical document only, and its TLS material is loaded here once,
    so a certificate that is not PEM is a refusal now rather than an error in a later request."""
    document = kubeconfig_policy.load(data, allow_insecure=allow_insecure)
    config = MemberKubeConfig.from_dict(document)
    if isinstance(config, MemberKubeConfig):  # from_dict builds `cls`
        config.impersonate = kubeconfig_policy.impersonation(document)
    try:
        internals.tls_context(config)
    except (ssl.SSLError, ValueError, OSError):
        raise KubeconfigRefused(
            "kubeconfig refused: certificate-authority-data or client-certificate-data/client-key-data "
            "is not a valid PEM certificate and key"
        ) from None
    return config


def member_kubeconfig_text(data: bytes | str, *, allow_insecure: bool = False) -> str:
    """The canonical member kubeconfig as a document for tools that read a file (helm): the same
    entries `member_config` builds a client from, never the author's own text."""
    member_config(data, allow_insecure=allow_insecure)
    return json.dumps(kubeconfig_policy.load(data, allow_insecure=allow_insecure))


def client(config: KubeConfig, *, namespace: str | None = None, trust_env: bool = False) -> Client:
    """`trust_env`: honour HTTPS_PROXY/NO_PROXY (the CLI talking to the user's own management
    cluster, as kubectl does); never for a member, whose kubeconfig someone else wrote."""
    made = Client(
        config=config, namespace=namespace, field_manager=FIELD_MANAGER, timeout=_TIMEOUT, trust_env=trust_env
    )
    internals.add_default_headers(internals.raw_sync_http(made), impersonation_headers(config))
    return made


def async_client(config: KubeConfig, *, namespace: str | None = None, target: str = "member") -> AsyncClient:
    """`target` labels the client's requests in the API request metrics: "management" or "member"."""
    made = AsyncClient(
        config=config,
        namespace=namespace,
        field_manager=FIELD_MANAGER,
        timeout=_TIMEOUT,
        trust_env=False,
        transport=_transport(config, target),
    )
    internals.add_default_headers(internals.raw_http(made), impersonation_headers(config))
    return made


def _transport(config: KubeConfig, target: str) -> lanes.Laned:
    """lightkube's own TLS set-up (CA, client certificate, insecure) on a pool with `_LIMITS`, whose
    connections are asyncio's own transports (`asyncio_streams`: TLS in the event loop, not in
    Python): a transport given to the client is where httpx takes all three from. Its bulk lane
    holds `BULK_SLOTS`; every request is counted and timed (`request_metrics`); a mutating one asks
    the write fence last, after any wait for a slot, right before it goes out (`fence`, ADR 0115)."""
    context = internals.tls_context(config)
    pool = internals.transport_over(AsyncioBackend(), ssl_context=context, limits=_LIMITS)
    return lanes.Laned(request_metrics.Measured(fence.Fenced(pool), target), BULK_SLOTS)


def server_and_ca(config: KubeConfig) -> tuple[str, bytes | None]:
    """The API server URL of the config's current context and its CA certificate (PEM), inline or
    read from the file it names: what an agent needs to reach this cluster."""
    single = config.get()
    if single is None:
        raise ConfigError("kubeconfig: no current context")
    cluster = single.cluster
    if cluster.certificate_auth_data:
        return cluster.server, base64.b64decode(cluster.certificate_auth_data)
    if cluster.certificate_auth:
        return cluster.server, Path(cluster.certificate_auth).read_bytes()
    return cluster.server, None
