"""The Lease holder's times are taken before the request that renews, never after its response.

A fake API server whose requests "take" time on injected clocks (no real waiting, no timing
assertions): what the elector writes and when it gives up are compared with the clock readings.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
from typing import Any

import httpx2
import pytest
from lightkube.models.coordination_v1 import LeaseSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.coordination_v1 import Lease

from fleetwave.kube import ops
from fleetwave.runtime import leader

T0 = dt.datetime(2030, 1, 1, tzinfo=dt.UTC)


class Clocks:
    """A monotonic and a wall clock that move together, only when a fake request says so."""

    def __init__(self) -> None:
        self.t = 0.0

    def monotonic(self) -> float:
        return self.t

    def wall(self) -> dt.datetime:
        return T0 + dt.timedelta(seconds=self.t)


class SlowApi:
    """One Lease; each request advances the clocks by a scripted duration, or fails."""

    def __init__(self, clocks: Clocks, durations: list[float | Exception]) -> None:
        self.clocks, self.durations = clocks, durations
        self.lease: Lease | None = None
        self.version = 0
        self.written: list[tuple[float, LeaseSpec]] = []  # (clock when the write finished, spec)
        self.requests = 0
        self.replaced_over: list[str] = []  # the resourceVersion each accepted replace was sent over

    def _take(self) -> None:
        self.requests += 1
        step = self.durations.pop(0) if self.durations else 0.5
        if isinstance(step, Exception):
            self.clocks.t += 2.0
            raise step
        self.clocks.t += step

    def _store(self, lease: Lease) -> Lease:
        self.version += 1
        assert lease.metadata is not None
        stored = Lease(
            metadata=ObjectMeta(name=lease.metadata.name, namespace="ns", resourceVersion=str(self.version)),
            spec=lease.spec,
        )
        self.lease = stored
        assert lease.spec is not None
        self.written.append((self.clocks.t, lease.spec))
        return stored

    async def get(self, _resource: Any, _name: str, *, namespace: str) -> Lease:
        self._take()
        if self.lease is None:
            raise ops.ApiError(
                response=httpx2.Response(
                    404,
                    json={"kind": "Status", "code": 404, "message": "not found"},
                    request=httpx2.Request("GET", "https://api/lease"),
                )
            )
        return self.lease

    async def create(self, lease: Lease) -> Lease:
        self._take()
        return self._store(lease)

    async def replace(self, lease: Lease) -> Lease:
        self._take()
        assert lease.metadata is not None
        if lease.metadata.resourceVersion != str(self.version):  # as the API server's precondition
            raise _refused(409, "the object has been modified")
        self.replaced_over.append(str(lease.metadata.resourceVersion))
        return self._store(lease)

    def taken_by(self, other: str) -> None:
        """Another replica writes the lease (it took it over)."""
        assert self.lease is not None
        assert self.lease.spec is not None
        self.version += 1
        self.lease = Lease(
            metadata=ObjectMeta(name="lock", namespace="ns", resourceVersion=str(self.version)),
            spec=LeaseSpec(holderIdentity=other, leaseDurationSeconds=15, renewTime=T0),
        )


def _refused(code: int, message: str) -> ops.ApiError:
    return ops.ApiError(
        response=httpx2.Response(
            code,
            json={"kind": "Status", "code": code, "message": message},
            request=httpx2.Request("PUT", "https://api/lease"),
        )
    )


def _elector(api: SlowApi, clocks: Clocks) -> leader.LeaderElector:
    return leader.LeaderElector(
        api,  # type: ignore[arg-type]
        "ns",
        "lock",
        "me",
        lease_duration=15.0,
        renew_deadline=10.0,
        retry_period=0.001,
        monotonic=clocks.monotonic,
        wall_clock=clocks.wall,
    )


async def test_renew_time_is_the_wall_time_before_the_request_not_after_the_response() -> None:
    clocks = Clocks()
    api = SlowApi(clocks, [3.0, 4.0])  # the GET takes 3 s, the create 4 s
    elector = _elector(api, clocks)

    assert await elector.try_acquire_or_renew() is leader.Attempt.HELD

    finished, spec = api.written[-1]
    assert finished == 7.0
    assert spec.renewTime == T0  # read before the GET was sent
    assert spec.acquireTime == T0
    assert elector.renewed_at == 0.0

    clocks.t = 20.0
    api.durations = [1.0, 6.0]
    assert await elector.try_acquire_or_renew() is leader.Attempt.HELD
    _, spec = api.written[-1]
    assert spec.renewTime == T0 + dt.timedelta(seconds=20)
    assert spec.acquireTime == T0  # still the same holder
    assert elector.renewed_at == 20.0


async def test_the_renew_deadline_counts_from_the_start_of_the_last_successful_attempt() -> None:
    clocks = Clocks()
    refused = httpx2.ConnectError("connection refused")
    # Acquire at once (GET 404 + create); then a renewal (one write) that takes 9 s and succeeds;
    # then failures (each moves the clocks by 2 s).
    api = SlowApi(clocks, [0.0, 0.0, 9.0, refused, refused, refused, refused, refused, refused])
    elector = _elector(api, clocks)

    await elector.run()  # returns when leadership is lost

    # The slow renewal began at 0 s and its response came at 9 s: the deadline is 0 + 10 s, so the
    # first failure (ending at 11 s) loses the lease. Counting from the response (9 s) would have
    # kept leading until 19 s, through four more failures.
    assert api.requests == 4
    assert clocks.t == 11.0
    assert elector.renewed_at == 0.0
    assert not elector.is_leader


class HungApi:
    """An API server that takes requests and never answers."""

    async def get(self, _resource: Any, _name: str, *, namespace: str) -> Lease:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


async def test_a_renewal_that_gets_no_answer_loses_the_lease_at_the_deadline_and_says_why(
    caplog: pytest.LogCaptureFixture,
) -> None:
    elector = leader.LeaderElector(
        HungApi(),  # type: ignore[arg-type]
        "ns",
        "lock",
        "me",
        lease_duration=0.3,
        renew_deadline=0.05,
        retry_period=0.01,
    )
    elector.renewed_at = asyncio.get_running_loop().time()
    with caplog.at_level(logging.WARNING, logger=leader.__name__):
        assert await elector.renew() is False
    messages = [r.getMessage() for r in caplog.records]
    assert any("no answer to the renewal within" in m for m in messages), messages
    assert any("lost the lease" in m for m in messages), messages


def test_a_cancellation_swallowed_on_the_way_still_stops_the_renewal_loop() -> None:
    """As `asyncio.wait_for` does on Python 3.11 when the renewal finishes as the stop arrives: the
    CancelledError is caught below the loop; the loop's check must still end the task."""

    async def renewals(checked: list[bool]) -> None:
        with contextlib.suppress(asyncio.CancelledError):  # swallowed, as wait_for's race does
            await asyncio.sleep(10)
        checked.append(True)
        leader.stop_if_cancelled()
        await asyncio.sleep(10)  # the next renewal: never reached

    async def main() -> tuple[list[bool], bool]:
        checked: list[bool] = []
        task = asyncio.create_task(renewals(checked))
        await asyncio.sleep(0)
        task.cancel()
        done, _ = await asyncio.wait([task], timeout=2)
        return checked, bool(done) and task.cancelled()

    checked, stopped = asyncio.run(main())
    assert checked == [True]
    assert stopped


async def test_the_holder_renews_in_one_request_over_the_version_its_last_write_returned() -> None:
    clocks = Clocks()
    api = SlowApi(clocks, [0.0] * 5)  # acquire (GET 404 + create), then three renewals
    elector = _elector(api, clocks)
    assert await elector.try_acquire_or_renew() is leader.Attempt.HELD
    assert api.requests == 2

    for expected in ("1", "2", "3"):
        clocks.t += 2.0
        assert await elector.try_acquire_or_renew() is leader.Attempt.HELD
        assert api.replaced_over[-1] == expected  # no read: the version the last write returned
    assert api.requests == 5  # one write per renewal
    assert elector.renewed_at == 6.0


async def test_a_holder_whose_lease_was_taken_reads_it_and_gives_up() -> None:
    clocks = Clocks()
    api = SlowApi(clocks, [0.0, 0.0])
    elector = _elector(api, clocks)
    assert await elector.try_acquire_or_renew() is leader.Attempt.HELD

    api.taken_by("them")  # e.g. we were paused past the lease's duration
    clocks.t += 2.0
    # The write over our version is refused (409); the lease read then names another live holder.
    assert await elector.try_acquire_or_renew() is leader.Attempt.OTHER
    assert api.requests == 4  # GET 404, create, the refused write, the read
    assert api.lease is not None
    assert api.lease.spec is not None
    assert api.lease.spec.holderIdentity == "them"

    # The next attempt reads first: nothing is written over another holder's lease.
    assert await elector.try_acquire_or_renew() is leader.Attempt.OTHER
    assert api.requests == 5
