"""Pins `fleetwave.kube.internals` against the installed lightkube.

Every function there leans on a private attribute or an undocumented module of lightkube. Each one is
exercised here for real (clients are built from a kubeconfig pointing at 127.0.0.1:1 and never
connect; the watch runs against an in-memory transport), so a lightkube upgrade that moves what they
depend on fails in this file, loudly, instead of in a controller at run time.
"""

from __future__ import annotations

import inspect
import json
import ssl
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
import yaml
from lightkube import AsyncClient, Client, KubeConfig, codecs
from lightkube.core.resource_registry import resource_registry
from lightkube.resources.apiextensions_v1 import CustomResourceDefinition
from lightkube.resources.apps_v1 import Deployment
from lightkube.resources.core_v1 import ConfigMap, Namespace

from fleetwave.kube import client as kubeclient
from fleetwave.kube import internals
from fleetwave.kube.asyncio_streams import AsyncioBackend

SERVER = "https://127.0.0.1:1"
TOKEN = "pinned-token"


def _kubeconfig(server: str = SERVER) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "pin",
        "clusters": [{"name": "pin", "cluster": {"server": server, "insecure-skip-tls-verify": True}}],
        "users": [{"name": "pin", "user": {"token": TOKEN}}],
        "contexts": [{"name": "pin", "context": {"cluster": "pin", "user": "pin", "namespace": "pinned"}}],
    }


@pytest.fixture
def kubeconfig_path(tmp_path: Path) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(_kubeconfig()))
    return path


@pytest.fixture
def config(kubeconfig_path: Path) -> KubeConfig:
    return kubeclient.config_from_file(kubeconfig_path)


@pytest.fixture
def sync_client(config: KubeConfig) -> Iterator[Client]:
    client = kubeclient.client(config)
    yield client
    client.close()


def _authorization(http: httpx2.Client | httpx2.AsyncClient) -> str | None:
    """The Authorization header the client's auth puts on a request (no request is sent)."""
    request = httpx2.Request("GET", f"{SERVER}/version")
    flow = http.auth.sync_auth_flow(request)
    sent = next(flow)
    return sent.headers.get("Authorization")


def test_http_is_a_plain_client_with_the_kubeconfig_server_credentials_and_timeout(
    config: KubeConfig,
) -> None:
    with internals.http(config, timeout=3.0) as http:
        assert isinstance(http, httpx2.Client)
        assert str(http.base_url).rstrip("/") == SERVER
        assert http.timeout == httpx2.Timeout(3.0)
        assert _authorization(http) == f"Bearer {TOKEN}"
        assert http.trust_env is False


def test_http_also_takes_the_single_context_config_a_client_keeps(sync_client: Client) -> None:
    with internals.http(internals.config_of(sync_client)) as http:
        assert str(http.base_url).rstrip("/") == SERVER
        assert _authorization(http) == f"Bearer {TOKEN}"


def test_http_refuses_a_kubeconfig_without_a_current_context() -> None:
    bare = {**_kubeconfig()}
    del bare["current-context"]
    with pytest.raises((ValueError, kubeclient.ConfigError), match=r"(?i)no current context"):
        internals.http(KubeConfig.from_dict(bare))


async def test_async_http_is_the_async_twin(config: KubeConfig) -> None:
    http = internals.async_http(config, timeout=4.0)
    try:
        assert isinstance(http, httpx2.AsyncClient)
        assert str(http.base_url).rstrip("/") == SERVER
        assert http.timeout == httpx2.Timeout(4.0)
        assert _authorization(http) == f"Bearer {TOKEN}"
    finally:
        await http.aclose()


async def test_raw_http_is_the_session_inside_an_async_client(config: KubeConfig) -> None:
    client = kubeclient.async_client(config)
    try:
        session = internals.raw_http(client)
        assert isinstance(session, httpx2.AsyncClient)
        assert str(session.base_url).rstrip("/") == SERVER
        assert _authorization(session) == f"Bearer {TOKEN}"
        assert internals.raw_http(client) is session  # the same pool, not a new one per call
    finally:
        await client.close()


def test_raw_sync_http_is_the_session_inside_a_sync_client_with_its_proxy_setting(config: KubeConfig) -> None:
    for trust_env in (True, False):
        with kubeclient.client(config, trust_env=trust_env) as client:
            session = internals.raw_sync_http(client)
            assert isinstance(session, httpx2.Client)
            assert str(session.base_url).rstrip("/") == SERVER
            assert session.trust_env is trust_env  # HTTPS_PROXY for the management CLI, never members
            assert internals.raw_sync_http(client) is session


async def test_add_default_headers_keeps_every_value_of_a_repeated_header(config: KubeConfig) -> None:
    client = kubeclient.async_client(config)
    try:
        session = internals.raw_http(client)
        internals.add_default_headers(session, [("Impersonate-Group", "a"), ("Impersonate-Group", "b")])
        request = session.build_request("GET", "/api")
        assert request.headers.get_list("Impersonate-Group") == ["a", "b"]
        assert _authorization(session) == f"Bearer {TOKEN}"  # its credentials stay
    finally:
        await client.close()


def test_config_of_returns_the_single_context_config_of_a_sync_client(sync_client: Client) -> None:
    single = internals.config_of(sync_client)
    assert single.cluster.server == SERVER
    assert single.context.namespace == "pinned"
    assert single.user.token == TOKEN


def test_is_namespaced_on_known_kinds() -> None:
    assert internals.is_namespaced(ConfigMap)
    assert internals.is_namespaced(Deployment)
    assert not internals.is_namespaced(Namespace)
    assert not internals.is_namespaced(CustomResourceDefinition)


def test_builtin_class_finds_lightkubes_typed_classes_and_nothing_else() -> None:
    assert internals.builtin_class("v1", "ConfigMap") is ConfigMap
    assert internals.builtin_class("apps/v1", "Deployment") is Deployment
    assert internals.builtin_class("apiextensions.k8s.io/v1", "CustomResourceDefinition") is (
        CustomResourceDefinition
    )
    assert internals.builtin_class("v1", "NoSuchKind") is None
    assert internals.builtin_class("widgets.example.com/v1", "Widget") is None  # a CRD's kind


def test_builtin_plural_on_known_kinds() -> None:
    assert internals.builtin_plural("v1", "ConfigMap") == ("configmaps", True)
    assert internals.builtin_plural("v1", "Namespace") == ("namespaces", False)
    assert internals.builtin_plural("apps/v1", "Deployment") == ("deployments", True)
    assert internals.builtin_plural("rbac.authorization.k8s.io/v1", "ClusterRole") == ("clusterroles", False)
    assert internals.builtin_plural("apiextensions.k8s.io/v1", "CustomResourceDefinition") == (
        "customresourcedefinitions",
        False,
    )
    assert internals.builtin_plural("v1", "NoSuchKind") is None
    assert internals.builtin_plural("widgets.example.com/v1", "Widget") is None


def _path_of(client: Client | AsyncClient, method: str, res: type[Any], **kwargs: Any) -> str:
    request = client._client.prepare_request(method, res=res, **kwargs)
    return str(request.url).lstrip("/")


@pytest.mark.parametrize("namespaced", [True, False])
def test_generic_class_is_a_working_dict_resource_left_out_of_the_registry(
    sync_client: Client, namespaced: bool
) -> None:
    kind = "PinnedWidget" if namespaced else "PinnedClusterWidget"
    plural = kind.lower() + "s"
    cls = internals.generic_class("pin.example.com", "v1", kind, plural, namespaced=namespaced)
    assert internals.is_namespaced(cls) is namespaced
    body = {"apiVersion": "pin.example.com/v1", "kind": kind, "metadata": {"name": "w"}, "spec": {"a": [1]}}
    obj = cls(body)
    assert dict(obj) == body  # dict in, dict out: content round-trips verbatim
    assert obj.metadata.name == "w"
    # lightkube builds requests for it...
    where = {"namespace": "ns"} if namespaced else {}
    path = _path_of(sync_client, "get", cls, name="w", **where)
    prefix = "apis/pin.example.com/v1/" + ("namespaces/ns/" if namespaced else "")
    assert path == f"{prefix}{plural}/w"
    # ...but does not learn it: codecs keep answering as before for that apiVersion/kind.
    assert resource_registry.get("pin.example.com/v1", kind) is None


def test_registered_class_is_known_to_codecs_and_has_a_status_subresource(sync_client: Client) -> None:
    cls = internals.registered_class(
        "pin.example.com", "v1", "PinnedGadget", "pinnedgadgets", namespaced=True
    )
    assert resource_registry.get("pin.example.com/v1", "PinnedGadget") is cls
    decoded = codecs.from_dict(
        {
            "apiVersion": "pin.example.com/v1",
            "kind": "PinnedGadget",
            "metadata": {"name": "g", "namespace": "n"},
        }
    )
    assert isinstance(decoded, cls)
    path = _path_of(sync_client, "get", cls.Status, name="g", namespace="n")
    assert path == "apis/pin.example.com/v1/namespaces/n/pinnedgadgets/g/status"
    # Asking again is harmless (every process registers fleetwave's kinds once, on first use).
    again = internals.registered_class(
        "pin.example.com", "v1", "PinnedGadget", "pinnedgadgets", namespaced=True
    )
    assert resource_registry.get("pin.example.com/v1", "PinnedGadget") is again


def test_watch_with_bookmarks_keeps_its_signature() -> None:
    params = inspect.signature(internals.watch_with_bookmarks).parameters
    assert list(params) == ["client", "resource", "namespace", "labels", "resource_version", "server_timeout"]
    assert all(
        p.kind is inspect.Parameter.KEYWORD_ONLY
        for name, p in params.items()
        if name not in ("client", "resource")
    )


class _WatchServer:
    """Answers watch requests from memory: one stream (an object, then a bookmark), then 410 Gone."""

    def __init__(self) -> None:
        self.requests: list[httpx2.Request] = []

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(request)
        if len(self.requests) > 1:
            gone = {
                "kind": "Status",
                "apiVersion": "v1",
                "status": "Failure",
                "reason": "Expired",
                "code": 410,
            }
            return httpx2.Response(410, json={**gone, "message": "too old resource version"}, request=request)
        added = {
            "type": "ADDED",
            "object": {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "a", "namespace": "ns", "resourceVersion": "11"},
                "data": {"k": "v"},
            },
        }
        bookmark = {
            "type": "BOOKMARK",
            "object": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"resourceVersion": "12"}},
        }
        lines = "".join(json.dumps(event) + "\n" for event in (added, bookmark))
        return httpx2.Response(200, content=lines.encode(), request=request)


async def _collect(stream: AsyncIterator[tuple[str, Any]], into: list[tuple[str, Any]]) -> None:
    async for event in stream:
        into.append(event)


async def test_watch_with_bookmarks_asks_for_bookmarks_resumes_from_them_and_raises_errors(
    config: KubeConfig,
) -> None:
    server = _WatchServer()
    client = AsyncClient(config=config, transport=httpx2.MockTransport(server.handle), trust_env=False)
    events: list[tuple[str, Any]] = []
    try:
        stream = internals.watch_with_bookmarks(
            client, ConfigMap, namespace="ns", labels={"app": "x"}, resource_version="10", server_timeout=7
        )
        with pytest.raises(httpx2.HTTPStatusError) as raised:
            await _collect(stream, events)
    finally:
        await client.close()
    assert raised.value.response.status_code == 410
    first, second = server.requests
    assert first.url.path == "/api/v1/namespaces/ns/configmaps"
    assert dict(first.url.params) == {
        "watch": "true",
        "resourceVersion": "10",
        "allowWatchBookmarks": "true",
        "timeoutSeconds": "7",
        "labelSelector": "app=x",
    }
    assert [kind for kind, _ in events] == ["ADDED", "BOOKMARK"]
    added = events[0][1]
    assert isinstance(added, ConfigMap)
    assert added.metadata.name == "a"
    assert added.data == {"k": "v"}
    # The driver re-opens a normally ended watch from the latest resourceVersion, the bookmark's.
    assert second.url.params["resourceVersion"] == "12"
    assert second.url.params["allowWatchBookmarks"] == "true"


def test_every_function_in_internals_is_pinned_here() -> None:
    public = {
        name
        for name, value in vars(internals).items()
        if inspect.isfunction(value) and value.__module__ == internals.__name__ and not name.startswith("_")
    }
    source = Path(__file__).read_text()
    unpinned = sorted(name for name in public if f"internals.{name}(" not in source)
    assert not unpinned, f"kube/internals.py functions without a pin in {Path(__file__).name}: {unpinned}"


def test_tls_context_is_lightkubes_own_for_the_kubeconfig(config: KubeConfig) -> None:
    context = internals.tls_context(config)
    assert isinstance(context, ssl.SSLContext)
    assert context.verify_mode == ssl.CERT_NONE  # the pinned kubeconfig skips verification
    bare = {**_kubeconfig()}
    bare["clusters"] = [{"name": "pin", "cluster": {"server": SERVER}}]
    assert internals.tls_context(KubeConfig.from_dict(bare)).verify_mode == ssl.CERT_REQUIRED


async def test_an_async_client_keeps_idle_connections_as_long_as_a_pooled_member_client(
    config: KubeConfig,
) -> None:
    client = kubeclient.async_client(config)
    try:
        pool = internals.raw_http(client)._transport.inner.inner.inner._pool  # type: ignore[attr-defined]
        assert pool._keepalive_expiry == kubeclient.KEEPALIVE_SECONDS
    finally:
        await client.close()


def test_transport_over_is_httpxs_own_pool_but_for_the_backend(config: KubeConfig) -> None:
    """httpx builds its pool from the arguments given; the pin is that the replacement keeps them."""
    backend, context = AsyncioBackend(), internals.tls_context(config)
    limits = httpx2.Limits(max_connections=7, max_keepalive_connections=3, keepalive_expiry=42.0)
    transport = internals.transport_over(backend, ssl_context=context, limits=limits)
    pool = transport._pool
    assert pool._network_backend is backend
    assert pool._ssl_context is context
    kept = (pool._max_connections, pool._max_keepalive_connections, pool._keepalive_expiry)
    assert kept == (7, 3, 42.0)
    assert (pool._http1, pool._http2) == (True, False)
