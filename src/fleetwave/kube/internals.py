"""Everything fleetwave needs from lightkube that lightkube does not offer publicly.

Each function here depends on a private attribute or an undocumented module of lightkube; the test
`tests/unit/kube/test_internals.py` exercises every one against the installed lightkube, so an upgrade
that moves them fails there, loudly, instead of in a controller at run time.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpcore2
import httpx2
from lightkube import AsyncClient, Client, KubeConfig
from lightkube.config import client_adapter
from lightkube.core import resource as lk_resource
from lightkube.core.exceptions import LoadResourceError
from lightkube.core.resource_registry import resource_registry
from lightkube.core.selector import build_selector
from lightkube.generic_resource import (
    GenericGlobalResource,
    GenericNamespacedResource,
    create_api_info,
    create_global_resource,
    create_namespaced_resource,
)
from lightkube.types import on_error_raise


def _single(config: Any) -> Any:
    if not isinstance(config, KubeConfig):
        return config  # already one context (what a client keeps)
    single = config.get()
    if single is None:
        raise ValueError("kubeconfig has no current context")
    return single


def http(config: Any, *, timeout: float = 5.0) -> httpx2.Client:
    """A plain HTTP client with the kubeconfig's server, TLS and credentials, for non-resource paths
    (/readyz, /version, discovery documents)."""
    params = client_adapter.ConnectionParams(timeout=httpx2.Timeout(timeout), trust_env=False)
    return client_adapter.Client(_single(config), params)


def async_http(config: KubeConfig, *, timeout: float = 5.0) -> httpx2.AsyncClient:
    """The async twin of `http`."""
    params = client_adapter.ConnectionParams(timeout=httpx2.Timeout(timeout), trust_env=False)
    return client_adapter.AsyncClient(_single(config), params)


def tls_context(config: KubeConfig) -> Any:
    """The ssl.SSLContext lightkube would build for the kubeconfig (its CA, client certificate,
    insecure-skip-tls-verify), for a transport of our own."""
    single = _single(config)
    if single.user is None:
        raise ValueError("kubeconfig context names no user")
    return client_adapter.verify_cluster(single.cluster, single.user, single.abs_file, trust_env=False)


def transport_over(
    backend: httpcore2.AsyncNetworkBackend, *, ssl_context: Any, limits: httpx2.Limits
) -> httpx2.AsyncHTTPTransport:
    """An httpx transport whose connections `backend` opens. httpx takes no network backend of its
    own, but builds its connection pool (`_pool`) from these same arguments: the pool is replaced by
    one that httpcore, which documents its backend as pluggable, is given the backend for."""
    transport = httpx2.AsyncHTTPTransport(verify=ssl_context, trust_env=False, limits=limits)
    transport._pool = httpcore2.AsyncConnectionPool(
        ssl_context=ssl_context,
        max_connections=limits.max_connections,
        max_keepalive_connections=limits.max_keepalive_connections,
        keepalive_expiry=limits.keepalive_expiry,
        http1=True,
        http2=False,
        network_backend=backend,
    )
    return transport


def raw_http(client: AsyncClient) -> httpx2.AsyncClient:
    """The HTTP session inside an async client: same server, TLS and credentials, no second pool."""
    session: httpx2.AsyncClient = client._client._client
    return session


def raw_sync_http(client: Client) -> httpx2.Client:
    """The HTTP session inside a sync client: its server, TLS, credentials and proxy settings (a
    management client honours HTTPS_PROXY, a member's does not), no second pool."""
    session: httpx2.Client = client._client._client
    return session


def add_default_headers(session: httpx2.Client | httpx2.AsyncClient, pairs: list[tuple[str, str]]) -> None:
    """Headers sent with every request of `session`, repeated names kept (Impersonate-Group)."""
    if pairs:
        session.headers = httpx2.Headers([*session.headers.multi_items(), *pairs])


def config_of(client: Client) -> Any:
    """The single-context config a sync client was built from (what `http` accepts as well)."""
    return client.config


def is_namespaced(resource: type[Any]) -> bool:
    return issubclass(resource, lk_resource.NamespacedResource)


def builtin_class(api_version: str, kind: str) -> type[Any] | None:
    """lightkube's typed class of a built-in Kubernetes kind (or of a registered one); None if unknown."""
    try:
        known: type[Any] = resource_registry.load(api_version, kind)
    except (LoadResourceError, ImportError):
        return None
    return known


def builtin_plural(api_version: str, kind: str) -> tuple[str, bool] | None:
    """(plural, namespaced) of a kind in lightkube's table of built-in Kubernetes kinds."""
    known = builtin_class(api_version, kind)
    if known is None:
        return None
    return known._api_info.plural, is_namespaced(known)


def generic_class(group: str, version: str, kind: str, plural: str, *, namespaced: bool) -> type[Any]:
    """A dict-in, dict-out resource class, deliberately left out of lightkube's global registry:
    registering would change what `codecs.from_dict` returns for built-in kinds elsewhere."""
    base: type[Any] = GenericNamespacedResource if namespaced else GenericGlobalResource
    api_info = create_api_info(group, version, kind, plural)
    return type(kind, (base,), {"_api_info": api_info})


def registered_class(group: str, version: str, kind: str, plural: str, *, namespaced: bool) -> type[Any]:
    """A generic resource class registered with lightkube, so `codecs.from_dict` knows the kind and
    `.Status` reaches the status subresource: used for fleetwave's own kinds only."""
    create = create_namespaced_resource if namespaced else create_global_resource
    made: type[Any] = create(group, version, kind, plural)
    return made


def watch_with_bookmarks(
    client: AsyncClient,
    resource: type[Any],
    *,
    namespace: str | None,
    labels: dict[str, Any] | None,
    resource_version: str,
    server_timeout: int,
) -> AsyncIterator[tuple[str, Any]]:
    """A watch stream that asks for bookmarks. lightkube's own watch() cannot; its request builder
    and stream driver can, and the driver resumes from the latest resourceVersion (bookmarks
    included) when the server ends a watch normally. Errors raise."""
    generic = client._client
    params = {
        "resourceVersion": resource_version,
        "allowWatchBookmarks": "true",
        "timeoutSeconds": server_timeout,
        "labelSelector": build_selector(labels) if labels else None,
    }
    request = generic.prepare_request("list", res=resource, namespace=namespace, watch=True, params=params)
    stream: AsyncIterator[tuple[str, Any]] = generic.watch(request, on_error=on_error_raise)
    return stream
