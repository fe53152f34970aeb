"""Kubernetes API clients for the management cluster and the members.

One place decides how fleetwave talks to an API server: field manager, timeouts, no proxy settings
taken from the environment, and how a kubeconfig (a file, or the bytes kept in a member's Secret)
becomes a client. Controllers annotate with the aliases here and never import lightkube.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx2
import yaml
from lightkube import AsyncClient, Client, ConfigError, KubeConfig

from fleetwave.kube import internals

__all__ = [
    "FIELD_MANAGER",
    "AsyncClient",
    "Client",
    "ConfigError",
    "KubeConfig",
    "async_client",
    "async_http",
    "client",
    "config_from_bytes",
    "config_from_file",
    "http",
]

FIELD_MANAGER = "fleetwave"
_TIMEOUT = httpx2.Timeout(30.0, connect=10.0)

http = internals.http
async_http = internals.async_http


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
