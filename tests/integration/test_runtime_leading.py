"""Runtime against the real management apiserver: leader election on a Lease, Events, and the
Manager (probes, metrics, graceful stop with lease release, stopping when the lease is lost)."""

from __future__ import annotations

import asyncio
import datetime as dt
import time
import urllib.request
from collections.abc import AsyncIterator
from typing import Any

import pytest
from lightkube import AsyncClient, Client
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.coordination_v1 import Lease
from lightkube.resources.core_v1 import ConfigMap, Event
from lightkube.types import PatchType

from fleetwave.kube import client as kubeclient
from fleetwave.local import fleet
from fleetwave.runtime import controller, events, leader, manager, watching
from fleetwave.runtime.lease_loop import LeaseLoop

FAST = {"lease_duration": 3.0, "renew_deadline": 2.0, "retry_period": 0.25}


@pytest.fixture
async def aclient(local_fleet: fleet.FleetState) -> AsyncIterator[AsyncClient]:
    c = kubeclient.async_client(kubeclient.config_from_file(local_fleet.cluster(fleet.MANAGEMENT).kubeconfig))
    yield c
    await c.close()


def elector(client: AsyncClient, namespace: str, identity: str) -> leader.LeaderElector:
    return leader.LeaderElector(client, namespace, "lock", identity, **FAST)


async def first_leader(*electors: leader.LeaderElector) -> leader.LeaderElector:
    waits = {asyncio.ensure_future(e.leading.wait()): e for e in electors}
    try:
        done, _ = await asyncio.wait(waits, timeout=20, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for fut in waits:
            fut.cancel()
    assert done, "nobody became leader"
    return waits[done.pop()]


async def stop(task: asyncio.Task[Any]) -> None:
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def test_two_electors_one_leader_and_takeover_after_release_and_after_death(
    aclient: AsyncClient, namespace: str
) -> None:
    loop = asyncio.get_running_loop()
    a, b = elector(aclient, namespace, "a"), elector(aclient, namespace, "b")
    tasks = {a: asyncio.create_task(a.run()), b: asyncio.create_task(b.run())}
    winner = await first_leader(a, b)
    loser = b if winner is a else a
    # The loser must stay out for well over a lease duration while the winner keeps renewing.
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(loser.leading.wait(), timeout=FAST["lease_duration"] * 2)
    assert winner.is_leader

    await stop(tasks[winner])
    assert await winner.release()
    assert await first_leader(loser) is loser
    assert not winner.is_leader

    # Now the leader dies without releasing: a newcomer must wait out a full lease duration.
    await stop(tasks[loser])
    newcomer = elector(aclient, namespace, "c")
    started = loop.time()
    newcomer_task = asyncio.create_task(newcomer.run())
    try:
        await first_leader(newcomer)
        assert loop.time() >= started + FAST["lease_duration"], "took over a lease that had not expired"
    finally:
        await stop(newcomer_task)
        await newcomer.release()


async def test_a_leader_that_sees_another_holder_steps_down(
    aclient: AsyncClient, management: Client, namespace: str
) -> None:
    a = elector(aclient, namespace, "a")
    task = asyncio.create_task(a.run())
    await first_leader(a)
    management.patch(Lease, "lock", {"spec": {"holderIdentity": "intruder"}}, namespace=namespace)
    async with asyncio.timeout(20):
        await task  # run() returns once leadership is lost
    assert not a.is_leader


async def test_event_recorder_writes_one_event_and_counts_repeats(
    aclient: AsyncClient, management: Client, namespace: str
) -> None:
    cm = management.create(ConfigMap(metadata=ObjectMeta(name="subject", namespace=namespace)))
    recorder = events.EventRecorder(aclient, component="fleetwave-test")
    ref = events.ObjectRef.of(cm)
    for _ in range(3):
        await recorder.record(ref, events.EventType.NORMAL, "StageStarted", "stage canary started")
    await recorder.record(ref, events.EventType.WARNING, "GateFailed", "health check failed")
    await recorder.close()  # written in the background, in order: wait for the queue to drain
    found = list(management.list(Event, namespace=namespace, fields={"involvedObject.name": "subject"}))
    by_reason = {e.reason: e for e in found}
    assert len(found) == 2
    assert by_reason["StageStarted"].count == 3
    assert by_reason["StageStarted"].type == "Normal"
    assert by_reason["GateFailed"].type == "Warning"
    assert by_reason["GateFailed"].involvedObject.uid == cm.metadata.uid
    assert by_reason["GateFailed"].source.component == "fleetwave-test"


def http_get(url: str) -> tuple[int, str]:
    with urllib.request.urlopen(url, timeout=10) as resp:
        return resp.status, resp.read().decode()


def bare_manager(client: AsyncClient, namespace: str, identity: str, **leases: Any) -> manager.Manager:
    """A leader-elected manager on ephemeral ports; `leases`: its `lease_client` and `lease_loop`."""
    election = manager.Election(lease_name="mgr", identity=identity, **FAST)
    return manager.Manager(
        client,
        namespace=namespace,
        leader_election=True,
        metrics_port=0,
        health_port=0,
        election=election,
        handle_signals=False,
        **leases,
    )


def make_manager(
    client: AsyncClient, namespace: str, identity: str, **leases: Any
) -> tuple[manager.Manager, asyncio.Queue[str]]:
    """`bare_manager` with a controller of ConfigMaps that reports each key it reconciles."""
    mgr = bare_manager(client, namespace, identity, **leases)
    reconciled: asyncio.Queue[str] = asyncio.Queue()

    async def reconcile(key: str) -> controller.Result:
        await reconciled.put(key)
        return controller.Result()

    informer = mgr.add_informer(watching.Informer(client, ConfigMap, namespace=namespace))
    ctl = mgr.add_controller("configmaps", reconcile)
    ctl.watch(informer, lambda obj: [watching.object_key(obj)])
    return mgr, reconciled


async def test_manager_serves_probes_and_metrics_and_releases_the_lease_on_stop(
    aclient: AsyncClient, management: Client, namespace: str
) -> None:
    mgr, reconciled = make_manager(aclient, namespace, "m1")
    before = dt.datetime.now(dt.UTC)
    run = asyncio.create_task(mgr.run())
    try:
        async with asyncio.timeout(20):
            await mgr.synced.wait()
            assert mgr.elector is not None
            await mgr.elector.leading.wait()
        management.create(ConfigMap(metadata=ObjectMeta(name="watched", namespace=namespace)))
        async with asyncio.timeout(20):
            while await reconciled.get() != f"{namespace}/watched":
                pass
        # When the controllers began, once leading: what first deliveries are judged against (ADR 0121).
        assert mgr.controllers_started is not None
        assert before <= mgr.controllers_started <= dt.datetime.now(dt.UTC)
        status, body = await asyncio.to_thread(http_get, mgr.probes.url("/healthz"))
        assert (status, body) == (200, "ok")
        status, _ = await asyncio.to_thread(http_get, mgr.probes.url("/readyz"))
        assert status == 200
        status, text = await asyncio.to_thread(http_get, mgr.probes.url("/metrics"))
        assert status == 200
        assert 'fleetwave_reconcile_total{controller="configmaps",result="success"}' in text
        assert "fleetwave_event_to_reconcile_seconds_bucket" in text
        assert "fleetwave_leader 1.0" in text
    finally:
        mgr.stop()
        async with asyncio.timeout(20):
            await run
    lease = management.get(Lease, "mgr", namespace=namespace)
    assert not lease.spec.holderIdentity, "a graceful stop hands the lease back"


async def test_manager_stops_its_controllers_and_raises_when_the_lease_is_lost(
    aclient: AsyncClient, management: Client, namespace: str
) -> None:
    mgr, reconciled = make_manager(aclient, namespace, "m2")
    run = asyncio.create_task(mgr.run())
    async with asyncio.timeout(20):
        assert mgr.elector is not None
        await mgr.elector.leading.wait()
    management.patch(
        Lease, "mgr", {"spec": {"holderIdentity": "usurper"}}, namespace=namespace, patch_type=PatchType.MERGE
    )
    with pytest.raises(manager.LeadershipLost):
        async with asyncio.timeout(20):
            await run
    while not reconciled.empty():
        reconciled.get_nowait()
    management.create(ConfigMap(metadata=ObjectMeta(name="after-loss", namespace=namespace)))
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(reconciled.get(), timeout=2)
    lease = management.get(Lease, "mgr", namespace=namespace)
    assert lease.spec.holderIdentity == "usurper", "a deposed leader must not release someone else's lease"


def hold_the_loop(seconds: float) -> None:
    """Python code that keeps the event loop for `seconds`, as a long reconcile pass does: it hands
    the interpreter lock to other threads every few milliseconds, but never yields to the loop."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


async def _leases_on(lease_loop: LeaseLoop | None, config: Any) -> AsyncClient:
    async def build() -> AsyncClient:
        return kubeclient.async_client(config)

    return await (build() if lease_loop is None else lease_loop.run(build()))


@pytest.mark.parametrize("threaded", [True, False], ids=["lease-loop", "same-loop"])
async def test_a_long_turn_of_the_managers_loop_keeps_the_lease_only_on_a_lease_loop(
    local_fleet: fleet.FleetState, aclient: AsyncClient, management: Client, namespace: str, threaded: bool
) -> None:
    lease_loop = LeaseLoop() if threaded else None
    if lease_loop is not None:
        lease_loop.start()
    config = kubeclient.config_from_file(local_fleet.cluster(fleet.MANAGEMENT).kubeconfig)
    leases = await _leases_on(lease_loop, config)
    mgr, _ = make_manager(aclient, namespace, "m3", lease_client=leases, lease_loop=lease_loop)
    run = asyncio.create_task(mgr.run())
    try:
        async with asyncio.timeout(20):
            await mgr.leading.wait()
        before = management.get(Lease, "mgr", namespace=namespace).spec.renewTime
        hold_the_loop(FAST["renew_deadline"] * 2.5)
        # Read before this loop runs again: only a renewal on another thread can have opened it.
        assert mgr.fence.is_open() is threaded
        if threaded:
            after = management.get(Lease, "mgr", namespace=namespace).spec.renewTime
            assert after - before >= dt.timedelta(seconds=FAST["renew_deadline"]), "not renewed meanwhile"
            await asyncio.sleep(FAST["lease_duration"])
            assert not run.done(), "the manager stopped although its lease was renewed"
    finally:
        mgr.stop()
        async with asyncio.timeout(20):
            await asyncio.gather(run, return_exceptions=True)
        await (leases.close() if lease_loop is None else lease_loop.run(leases.close()))
        if lease_loop is not None:
            await lease_loop.stop()
    if threaded:
        lease = management.get(Lease, "mgr", namespace=namespace)
        assert not lease.spec.holderIdentity, "the lease loop hands the lease back on a graceful stop"


async def test_a_pass_finishing_its_write_while_the_manager_stops_still_holds_the_lease(
    local_fleet: fleet.FleetState, aclient: AsyncClient, management: Client, namespace: str
) -> None:
    """The elector stops only after the controllers have: a pass that is cancelled in the middle
    of its work and finishes its last write on the way out is not refused by the fence."""
    lease_loop = LeaseLoop()
    lease_loop.start()
    leases = await _leases_on(
        lease_loop, kubeclient.config_from_file(local_fleet.cluster(fleet.MANAGEMENT).kubeconfig)
    )
    mgr = bare_manager(aclient, namespace, "m4", lease_client=leases, lease_loop=lease_loop)
    started, outcome = asyncio.Event(), asyncio.get_running_loop().create_future()

    async def reconcile(key: str) -> controller.Result:
        started.set()
        try:
            await asyncio.Event().wait()
        finally:
            await asyncio.sleep(0.5)  # the rest of the pass, longer than the elector takes to stop
            try:
                await aclient.patch(ConfigMap, "busy", {"data": {"last": "write"}}, namespace=namespace)
                outcome.set_result("written")
            except Exception as exc:
                outcome.set_result(repr(exc))
        return controller.Result()

    informer = mgr.add_informer(watching.Informer(aclient, ConfigMap, namespace=namespace))
    mgr.add_controller("configmaps", reconcile).watch(informer, lambda obj: [watching.object_key(obj)])
    management.create(ConfigMap(metadata=ObjectMeta(name="busy", namespace=namespace)))
    run = asyncio.create_task(mgr.run())
    try:
        async with asyncio.timeout(20):
            await started.wait()
    finally:
        mgr.stop()
        async with asyncio.timeout(20):
            await asyncio.gather(run, return_exceptions=True)
        await lease_loop.run(leases.close())
        await lease_loop.stop()
    assert outcome.result() == "written"
    assert management.get(ConfigMap, "busy", namespace=namespace).data == {"last": "write"}
    assert not management.get(Lease, "mgr", namespace=namespace).spec.holderIdentity
