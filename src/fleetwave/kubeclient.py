"""Kubernetes API clients (lightkube) for the management cluster and the members.

One place decides how fleetwave talks to an API server: field manager, timeouts, and how a
kubeconfig (a file, or the bytes kept in a member's Secret) becomes a client.

may import: stdlib, lightkube, yaml
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx2
import yaml
from lightkube import AsyncClient, Client, KubeConfig
from lightkube.config import client_adapter

FIELD_MANAGER = "fleetwave"
_TIMEOUT = httpx2.Timeout(30.0, connect=10.0)


def config_from_file(path: str | Path) -> KubeConfig:
    return KubeConfig.from_file(str(path))


def config_from_bytes(data: bytes | str) -> KubeConfig:
    parsed: dict[str, Any] = yaml.safe_load(data)
    return KubeConfig.from_dict(parsed)


def client(config: KubeConfig, *, namespace: str | None = None) -> Client:
    return Client(
        config=config, namespace=namespace, field_manager=FIELD_MANAGER, timeout=_TIMEOUT, trust_env=False
    )


def async_client(config: KubeConfig, *, namespace: str | None = None) -> AsyncClient:
    return AsyncClient(
        config=config, namespace=namespace, field_manager=FIELD_MANAGER, timeout=_TIMEOUT, trust_env=False
    )


def http(config: KubeConfig, *, timeout: float = 5.0) -> httpx2.Client:
    """A plain HTTP client with the kubeconfig's server, TLS and credentials, for non-resource paths
    such as /readyz and /version."""
    params = client_adapter.ConnectionParams(timeout=httpx2.Timeout(timeout), trust_env=False)
    single = config.get()
    if single is None:
        raise ValueError("kubeconfig has no current context")
    return client_adapter.Client(single, params)


def async_http(config: KubeConfig, *, timeout: float = 5.0) -> httpx2.AsyncClient:
    """The async twin of `http`."""
    params = client_adapter.ConnectionParams(timeout=httpx2.Timeout(timeout), trust_env=False)
    single = config.get()
    if single is None:
        raise ValueError("kubeconfig has no current context")
    return client_adapter.AsyncClient(single, params)
