"""The write fence (ADR 0115): once armed, a write goes out only while every lease held is within its
renew deadline on this process's clock; lease requests pass; reads always pass; a renewal after a
pause opens it again; without election it never refuses."""

from __future__ import annotations

import asyncio
import datetime as dt
import threading
import time
from pathlib import Path

import httpx2
import pytest
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.coordination_v1 import Lease

from fleetwave.delivery import helm
from fleetwave.delivery.target import MemberTarget
from fleetwave.kube import fence
from fleetwave.runtime import leader


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


class Counting(httpx2.AsyncBaseTransport):
    def __init__(self) -> None:
        self.sent: list[str] = []

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        self.sent.append(request.method)
        return httpx2.Response(200, text="ok")


def test_unarmed_fence_never_refuses() -> None:
    f = fence.Fence(Clock())
    f.check("PATCH request")
    assert f.refused == 0


def test_armed_fence_is_closed_until_a_lease_is_held_and_again_past_its_deadline() -> None:
    clock = Clock()
    f = fence.Fence(clock)
    f.arm()
    assert not f.is_open()
    f.renewed("ns/lock/me", 10.0)
    assert f.is_open()
    clock.t += 9.9
    assert f.is_open()
    clock.t += 0.2  # paused past the renew deadline: no write until the lease is confirmed again
    with pytest.raises(fence.FencedWrite):
        f.check("PUT request")
    assert f.refused == 1
    f.renewed("ns/lock/me", 10.0)
    f.check("PUT request")
    f.dropped("ns/lock/me")
    assert not f.is_open()


def test_every_held_lease_must_be_live_and_a_lease_handed_over_no_longer_counts() -> None:
    clock = Clock()
    f = fence.Fence(clock)
    f.arm()
    f.renewed("shard-0", 10.0)
    f.renewed("shard-1", 2.0)
    clock.t += 3.0
    assert not f.is_open()
    f.dropped("shard-1")
    assert f.is_open()


async def test_the_transport_refuses_writes_but_not_reads_nor_lease_requests() -> None:
    clock = Clock()
    f = fence.Fence(clock)
    f.arm()
    inner = Counting()
    http = httpx2.AsyncClient(transport=fence.Fenced(inner), base_url="https://api")
    assert (await http.delete("/api/v1/namespaces/x/configmaps/y")).status_code == 200  # no fence here
    with fence.enforced(f):
        for method in ("POST", "PUT", "PATCH", "DELETE"):
            with pytest.raises(fence.FencedWrite):
                await http.request(method, "/api/v1/namespaces/x/configmaps/y")
        assert (await http.get("/api/v1/configmaps")).status_code == 200
        with fence.exempt():
            assert (await http.put("/apis/coordination.k8s.io/v1/namespaces/x/leases/l")).status_code == 200
        f.renewed("lease", 5.0)
        assert (await http.patch("/api/v1/namespaces/x/configmaps/y")).status_code == 200
    await http.aclose()
    assert inner.sent == ["DELETE", "GET", "PUT", "PATCH"]


async def test_a_fence_is_carried_into_the_tasks_started_under_it_and_nowhere_else() -> None:
    f = fence.Fence(Clock())
    f.arm()
    with fence.enforced(f):
        inside = asyncio.get_running_loop().create_task(asyncio.sleep(0, result=None))
        child = asyncio.create_task(_check())
    outside = asyncio.create_task(_check())
    await inside
    with pytest.raises(fence.FencedWrite):
        await child
    await outside  # a task started outside the manager's context is not fenced


async def _check() -> None:
    fence.check("PATCH request")


class Api:
    """A Lease store whose requests take no time (the elector's clock moves only when told)."""

    def __init__(self) -> None:
        self.lease: object | None = None
        self.version = 0

    async def get(self, _resource: object, _name: str, *, namespace: str) -> object:
        if self.lease is None:
            raise leader.ops.ApiError(
                response=httpx2.Response(
                    404,
                    json={"kind": "Status", "code": 404, "message": "not found"},
                    request=httpx2.Request("GET", "https://api/lease"),
                )
            )
        assert isinstance(self.lease, Lease)
        return Lease(
            metadata=ObjectMeta(name="lock", namespace="ns", resourceVersion=str(self.version)),
            spec=self.lease.spec,
        )

    async def create(self, lease: object) -> object:
        return await self.replace(lease)

    async def replace(self, lease: object) -> object:
        self.version += 1
        self.lease = lease
        return await self.get(None, "lock", namespace="ns")


async def test_the_elector_opens_the_fence_for_its_renew_deadline_and_a_paused_holder_is_refused() -> None:
    clock = Clock()
    f = fence.Fence(clock)
    f.arm()
    elector = leader.LeaderElector(
        Api(),  # type: ignore[arg-type]
        "ns",
        "lock",
        "me",
        lease_duration=15.0,
        renew_deadline=10.0,
        retry_period=1.0,
        monotonic=clock,
        wall_clock=lambda: dt.datetime(2030, 1, 1, tzinfo=dt.UTC),
        write_fence=f,
    )
    assert await elector.try_acquire_or_renew() is leader.Attempt.HELD
    f.check("PATCH request")
    clock.t += 12.0  # SIGSTOP, then SIGCONT: the controllers' timers fire before the elector's
    with pytest.raises(fence.FencedWrite):
        f.check("helm upgrade")
    assert await elector.try_acquire_or_renew() is leader.Attempt.HELD  # nobody took it meanwhile
    f.check("PATCH request")
    assert await elector.release()
    with pytest.raises(fence.FencedWrite):
        f.check("PATCH request")


async def test_helm_starts_no_install_upgrade_uninstall_or_rollback_past_the_fence(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    binary = tmp_path / "helm"
    binary.write_text(f'#!/bin/sh\necho "$1" >> {marker}\n')
    binary.chmod(0o755)
    session = helm._Helm(str(binary), MemberTarget("m", b""), tmp_path / "kubeconfig")
    closed = fence.Fence(Clock())
    closed.arm()
    with fence.enforced(closed):
        for command in sorted(helm.HELM_WRITES):
            with pytest.raises(fence.FencedWrite):
                await session.run(command, "--namespace", "x", "--", "release")
        assert not marker.exists(), "a helm that writes was started past the fence"
        await session.run("upgrade", "--dry-run=server", "--", "release")
        await session.run("status", "--", "release")
    await asyncio.sleep(0)
    assert marker.read_text().split() == ["upgrade", "status"]


def test_a_closed_spell_warns_once_and_says_how_many_were_refused_when_it_opens(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    f = fence.Fence(clock)
    f.arm()
    f.renewed("ns/lock/me", 1.0)
    clock.t += 2.0
    caplog.set_level("DEBUG", logger=fence.__name__)
    for _ in range(3):  # a stopping replica's queued writes: one warning, not one each
        with pytest.raises(fence.FencedWrite):
            f.check("PATCH request")
    levels = [r.levelname for r in caplog.records if "fenced write refused" in r.getMessage()]
    assert levels == ["WARNING", "DEBUG", "DEBUG"]
    f.renewed("ns/lock/me", 10.0)
    assert any("(3 refused meanwhile)" in r.getMessage() for r in caplog.records)
    caplog.clear()
    clock.t += 11.0  # a new spell warns again
    with pytest.raises(fence.FencedWrite):
        f.check("PUT request")
    assert [r.levelname for r in caplog.records] == ["WARNING"]
    assert f.refused == 4


def test_time_left_is_the_first_held_lease_deadline_and_none_while_nothing_is_held() -> None:
    clock = Clock()
    f = fence.Fence(clock)
    assert f.time_left() is None  # not armed
    f.arm()
    assert f.time_left() is None  # a standby: no lease to lose
    f.renewed("shard-0", 10.0)
    f.renewed("shard-1", 4.0)
    clock.t += 1.0
    assert f.time_left() == pytest.approx(3.0)
    f.dropped("shard-1")
    assert f.time_left() == pytest.approx(9.0)


def test_checks_on_one_thread_see_whole_sets_while_another_renews_and_drops() -> None:
    """The leader Lease may be renewed on a thread of its own (ADR 0140): a check iterating the
    deadlines while that thread adds and drops leases must neither fail nor see half a change."""
    f = fence.Fence()
    f.arm()
    f.renewed("ns/lock/me", 3600.0)
    stop = threading.Event()

    def churn() -> None:
        i = 0
        while not stop.is_set():
            f.renewed(f"shard-{i % 50}", 3600.0)
            f.dropped(f"shard-{(i + 25) % 50}")
            i += 1

    renewer = threading.Thread(target=churn)
    renewer.start()
    try:
        deadline = time.monotonic() + 0.5
        while time.monotonic() < deadline:
            assert f.is_open()
            left = f.time_left()
            assert left is not None
            assert left > 3000
    finally:
        stop.set()
        renewer.join()
