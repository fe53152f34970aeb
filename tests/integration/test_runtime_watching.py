"""Runtime against the real management apiserver: informers (incl. relist after watch failures),
controllers driven by watches and timers, and guarded status writes on a test CRD."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx2
import pytest
from lightkube import AsyncClient, Client
from lightkube.config import client_adapter
from lightkube.generic_resource import create_namespaced_resource
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.apiextensions_v1 import CustomResourceDefinition
from lightkube.resources.core_v1 import ConfigMap, Namespace, Secret
from lightkube.types import PatchType

from fleetwave.kube import client as kubeclient
from fleetwave.kube import status
from fleetwave.local import fleet
from fleetwave.runtime import controller, watching

GROUP = "runtime-test.fleetwave.io"
Probe = create_namespaced_resource(GROUP, "v1alpha1", "RuntimeProbe", "runtimeprobes")
_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": f"runtimeprobes.{GROUP}"},
    "spec": {
        "group": GROUP,
        "names": {"plural": "runtimeprobes", "singular": "runtimeprobe", "kind": "RuntimeProbe"},
        "scope": "Namespaced",
        "versions": [
            {
                "name": "v1alpha1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                            "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                        },
                    }
                },
            }
        ],
    },
}


@pytest.fixture
async def aclient(local_fleet: fleet.FleetState) -> AsyncIterator[AsyncClient]:
    c = kubeclient.async_client(kubeclient.config_from_file(local_fleet.cluster(fleet.MANAGEMENT).kubeconfig))
    yield c
    await c.close()


@pytest.fixture(scope="session")
def probe_crd(management: Client) -> type[Any]:
    management.apply(CustomResourceDefinition.from_dict(_CRD), force=True)
    for _ in range(600):
        try:
            list(management.list(Probe, namespace="default"))  # served once this stops 404-ing
            return Probe
        except httpx2.HTTPStatusError as e:
            if e.response.status_code not in (404, 429):  # not served yet / watch cache still initialising
                raise
        time.sleep(0.05)
    raise AssertionError("CRD never served")


class Seen:
    """Collects informer events; `wait_for` blocks until a matching one arrives."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []
        self._changed = asyncio.Event()

    def __call__(self, event_type: str, obj: Any) -> None:
        self.events.append((event_type, obj.metadata.name))
        self._changed.set()

    async def wait_for(self, event: tuple[str, str]) -> None:
        async with asyncio.timeout(20):
            while event not in self.events:
                self._changed.clear()
                await self._changed.wait()


async def start(informer: watching.Informer) -> asyncio.Task[None]:
    task = asyncio.create_task(informer.run())
    async with asyncio.timeout(20):
        await informer.has_synced.wait()
    return task


async def stop(task: asyncio.Task[Any]) -> None:
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def test_informer_sees_create_update_delete_of_a_crd_object(
    aclient: AsyncClient, management: Client, namespace: str, probe_crd: type[Any]
) -> None:
    management.create(probe_crd(metadata={"name": "before", "namespace": namespace}, spec={"n": 0}))
    informer = watching.Informer(aclient, probe_crd, namespace=namespace)
    seen = Seen()
    informer.on_change(seen)
    task = await start(informer)
    try:
        assert ("ADDED", "before") in seen.events, "the initial list reports existing objects"
        management.create(probe_crd(metadata={"name": "p", "namespace": namespace}, spec={"n": 1}))
        await seen.wait_for(("ADDED", "p"))
        management.patch(probe_crd, "p", {"spec": {"n": 2}}, namespace=namespace, patch_type=PatchType.MERGE)
        await seen.wait_for(("MODIFIED", "p"))
        assert informer.get(f"{namespace}/p")["spec"] == {"n": 2}
        # The store keeps objects without their managedFields, listed or watched; the server has them.
        assert management.get(probe_crd, "p", namespace=namespace).metadata.managedFields
        assert informer.get(f"{namespace}/before").metadata.managedFields is None
        assert informer.get(f"{namespace}/p").metadata.managedFields is None
        management.delete(probe_crd, "p", namespace=namespace)
        await seen.wait_for(("DELETED", "p"))
        assert informer.get(f"{namespace}/p") is None
        assert set(informer.store) == {f"{namespace}/before"}
    finally:
        await stop(task)


async def test_informer_of_builtin_secrets_is_scoped_to_its_namespace(
    aclient: AsyncClient, management: Client, namespace: str
) -> None:
    informer = watching.Informer(aclient, Secret, namespace=namespace)
    seen = Seen()
    informer.on_change(seen)
    task = await start(informer)
    try:
        management.create(Secret(metadata=ObjectMeta(name="s1", namespace=namespace), stringData={"k": "v"}))
        management.create(Secret(metadata=ObjectMeta(name="elsewhere", namespace="default"), stringData={}))
        await seen.wait_for(("ADDED", "s1"))
        assert all(key.startswith(f"{namespace}/") for key in informer.store)
    finally:
        management.delete(Secret, "elsewhere", namespace="default")
        await stop(task)


class FailingWatches(httpx2.AsyncBaseTransport):
    """Real transport to the real apiserver; while `failing`, watch requests get a 410 Gone."""

    def __init__(self, inner: httpx2.AsyncBaseTransport) -> None:
        self.inner = inner
        self.failing = False
        self.failed = asyncio.Event()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        if self.failing and request.url.params.get("watch") == "true":
            self.failed.set()
            gone = {
                "kind": "Status",
                "apiVersion": "v1",
                "status": "Failure",
                "reason": "Expired",
                "code": 410,
            }
            return httpx2.Response(410, json={**gone, "message": "too old resource version"}, request=request)
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


async def test_informer_relists_after_watch_errors_and_catches_up_on_missed_changes(
    local_fleet: fleet.FleetState, management: Client, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger=watching.__name__)
    config = kubeclient.config_from_file(local_fleet.cluster(fleet.MANAGEMENT).kubeconfig)
    single = config.get()
    ssl_ctx = client_adapter.verify_cluster(single.cluster, single.user, single.abs_file, trust_env=False)
    transport = FailingWatches(httpx2.AsyncHTTPTransport(verify=ssl_ctx))
    client = AsyncClient(config=config, transport=transport, trust_env=False)
    management.create(ConfigMap(metadata=ObjectMeta(name="a", namespace=namespace)))
    # A 1 s server timeout makes the informer re-open its watch often, so the fault bites quickly.
    informer = watching.Informer(client, ConfigMap, namespace=namespace, server_timeout=1)
    seen = Seen()
    informer.on_change(seen)
    task = await start(informer)
    try:
        relists_before = informer.relists
        transport.failing = True
        async with asyncio.timeout(20):
            await transport.failed.wait()
        # While every watch fails, only a relist can reveal these changes.
        management.delete(ConfigMap, "a", namespace=namespace)
        management.create(ConfigMap(metadata=ObjectMeta(name="b", namespace=namespace)))
        await seen.wait_for(("DELETED", "a"))
        await seen.wait_for(("ADDED", "b"))
        assert informer.relists > relists_before
        assert isinstance(informer.last_error, httpx2.HTTPStatusError)
        assert informer.last_error.response.status_code == 410
        # A 410 Gone is how a server says "relist": the first ones are no warning, a lasting one is.
        gone = [r for r in caplog.records if "410" in r.getMessage() and "relisting" in r.getMessage()]
        assert gone
        assert gone[0].levelno == logging.DEBUG
        transport.failing = False
        management.patch(ConfigMap, "b", {"data": {"x": "1"}}, namespace=namespace)
        await seen.wait_for(("MODIFIED", "b"))
        assert f"{namespace}/a" not in informer.store
    finally:
        await stop(task)
        await client.close()


class FailingWatchesIn(FailingWatches):
    """Watches of one namespace only fail while `failing`."""

    def __init__(self, inner: httpx2.AsyncBaseTransport, namespace: str) -> None:
        super().__init__(inner)
        self.namespace = namespace

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        if f"/namespaces/{self.namespace}/" not in request.url.path:
            return await self.inner.handle_async_request(request)
        return await super().handle_async_request(request)


async def test_an_informer_over_some_namespaces_sees_only_those_and_relists_each_on_its_own(
    local_fleet: fleet.FleetState, management: Client, namespace: str
) -> None:
    """--watch-namespace (ADR 0074): one list-and-watch per namespace over one store; a relist of one
    namespace diffs only its own slice, so the others' objects stay (no spurious DELETED)."""
    second = f"{namespace}-b"
    management.create(Namespace(metadata=ObjectMeta(name=second)))
    config = kubeclient.config_from_file(local_fleet.cluster(fleet.MANAGEMENT).kubeconfig)
    single = config.get()
    ssl_ctx = client_adapter.verify_cluster(single.cluster, single.user, single.abs_file, trust_env=False)
    transport = FailingWatchesIn(httpx2.AsyncHTTPTransport(verify=ssl_ctx), second)
    client = AsyncClient(config=config, transport=transport, trust_env=False)
    management.create(ConfigMap(metadata=ObjectMeta(name="one", namespace=namespace)))
    management.create(ConfigMap(metadata=ObjectMeta(name="two", namespace=second)))
    management.create(ConfigMap(metadata=ObjectMeta(name="unwatched", namespace="default")))
    informer = watching.Informer(client, ConfigMap, namespaces=(second, namespace), server_timeout=1)
    assert informer.namespaces == tuple(sorted((namespace, second)))
    seen = Seen()
    informer.on_change(seen)
    task = await start(informer)
    try:
        assert {k for k in informer.store if not k.endswith("kube-root-ca.crt")} == {
            f"{namespace}/one",
            f"{second}/two",
        }
        management.create(ConfigMap(metadata=ObjectMeta(name="three", namespace=namespace)))
        await seen.wait_for(("ADDED", "three"))
        transport.failing = True  # only the second namespace's watch: only its slice relists
        async with asyncio.timeout(20):
            await transport.failed.wait()
        management.delete(ConfigMap, "two", namespace=second)
        await seen.wait_for(("DELETED", "two"))
        assert f"{namespace}/one" in informer.store
        assert f"{namespace}/three" in informer.store
        assert ("DELETED", "one") not in seen.events
        assert ("DELETED", "three") not in seen.events
        assert not [k for k in informer.store if k.startswith("default/")]
    finally:
        await stop(task)
        await client.close()
        management.delete(ConfigMap, "unwatched", namespace="default")
        management.delete(Namespace, second)


async def test_controller_reconciles_on_change_and_requeue_after_fires_not_before_its_time(
    aclient: AsyncClient, management: Client, namespace: str
) -> None:
    loop = asyncio.get_running_loop()
    calls: list[tuple[str, float]] = []
    returned: dict[str, float] = {}
    delays = {"slow": 1.5, "fast": 0.5}
    changed = asyncio.Event()

    async def reconcile(key: str) -> controller.Result:
        calls.append((key, loop.time()))
        changed.set()
        name = key.split("/")[1]
        if sum(1 for k, _ in calls if k == key) == 1:
            returned[key] = loop.time()
            return controller.Result(requeue_after=delays[name])
        return controller.Result()

    informer = watching.Informer(aclient, ConfigMap, namespace=namespace)
    ctl: controller.Controller[str] = controller.Controller("cm", reconcile, workers=2)
    ctl.watch(informer, lambda obj: [watching.object_key(obj)] if obj.metadata.name in delays else [])
    inf_task = await start(informer)
    ctl_task = asyncio.create_task(ctl.run())
    try:
        management.create(ConfigMap(metadata=ObjectMeta(name="slow", namespace=namespace)))
        management.create(ConfigMap(metadata=ObjectMeta(name="fast", namespace=namespace)))
        async with asyncio.timeout(20):
            while sum(1 for k, _ in calls if k.endswith(("/slow", "/fast"))) < 4:
                changed.clear()
                await changed.wait()
        second = dict(calls[2:])
        for key, at in second.items():
            name = key.split("/")[1]
            assert at >= returned[key] + delays[name], f"{key} requeued early"
        order = [k.split("/")[1] for k, _ in calls[2:]]
        assert order == ["fast", "slow"], "timers fire in deadline order"
    finally:
        await stop(ctl_task)
        await stop(inf_task)


async def test_status_write_is_skipped_when_unchanged_and_conflicts_on_a_stale_object(
    aclient: AsyncClient, management: Client, namespace: str, probe_crd: type[Any]
) -> None:
    management.create(probe_crd(metadata={"name": "s", "namespace": namespace}, spec={"n": 1}))
    obj = await aclient.get(probe_crd, "s", namespace=namespace)
    wanted = {"phase": "Progressing", "stages": [{"name": "canary"}], "extra": {"a": 1}}

    async def write(current: Any, new: dict[str, Any]) -> status.StatusWrite:
        return await status.write_status(aclient, probe_crd, current, new)

    assert await write(obj, wanted) is status.StatusWrite.WRITTEN
    fresh = await aclient.get(probe_crd, "s", namespace=namespace)
    assert fresh["status"] == wanted
    assert await write(fresh, wanted) is status.StatusWrite.UNCHANGED
    assert (await aclient.get(probe_crd, "s", namespace=namespace)).metadata.resourceVersion == (
        fresh.metadata.resourceVersion
    ), "an unchanged status is not written"
    # `obj` predates the first write: its resourceVersion is stale.
    assert await write(obj, {"phase": "Succeeded"}) is status.StatusWrite.CONFLICT
    assert await write(fresh, {"phase": "Succeeded"}) is status.StatusWrite.WRITTEN
    final = await aclient.get(probe_crd, "s", namespace=namespace)
    assert final["status"] == {"phase": "Succeeded"}, "keys dropped from the new status are removed"
