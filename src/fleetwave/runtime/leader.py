"""Leader election on a coordination.k8s.io/v1 Lease, guarded by resourceVersion.

Like client-go, a candidate judges a lease expired by *its own* monotonic clock: the lease must
stay unchanged for a full leaseDurationSeconds since this candidate last saw it change. Wall-clock
renewTime is written for humans only, so clock skew between replicas cannot split the brain.
The holder gives up once it fails to renew for `renew_deadline` (< lease_duration), before any
other candidate may take over; and every write of the process waits on the same deadline
(`kube.fence`, ADR 0115): a holder paused past it writes nothing until a renewal succeeds again.

Both of the holder's times are taken *before* the request that renews: the deadline counts from the
moment the attempt began (the server may have committed the write at any point after that, and other
candidates start counting from when they see it), and the renewTime written is the wall time at that
same moment, so the lease never claims a renewal later than the holder can vouch for.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import math
import socket
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any

from lightkube.models.coordination_v1 import LeaseSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.coordination_v1 import Lease

from fleetwave.kube import fence, ops
from fleetwave.kube.client import AsyncClient

log = logging.getLogger(__name__)


class Attempt(Enum):
    HELD = "held"  # we hold the lease (acquired or renewed)
    OTHER = "other"  # a live lease held by someone else
    FAILED = "failed"  # conflict or API error: try again later


@dataclass(frozen=True, slots=True)
class Observation:
    resource_version: str
    seen_at: float  # our monotonic clock, when this resourceVersion was first seen


def may_acquire(
    *, holder: str | None, identity: str, observed: Observation, duration: float, now: float
) -> bool:
    """A candidate may write the lease if it holds it, it is free, or it has not changed for `duration`."""
    return not holder or holder == identity or now >= observed.seen_at + duration


def _wall_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def default_identity() -> str:
    return f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"


def stop_if_cancelled() -> None:
    """Raise CancelledError if the running task was asked to stop. On Python 3.11,
    `asyncio.wait_for` drops a cancellation that arrives just as the awaitable finishes (gh-86296).
    The renewal loop, which goes on renewing, then never ends: a stopped manager waited on it for
    good."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


class LeaderElector:
    def __init__(
        self,
        client: AsyncClient,
        namespace: str,
        name: str,
        identity: str,
        *,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        monotonic: Callable[[], float] | None = None,
        wall_clock: Callable[[], dt.datetime] = _wall_now,
        write_fence: fence.Fence | None = None,
    ) -> None:
        """`monotonic` (default: the running loop's clock), `wall_clock` and the process's write fence
        (`write_fence`, told of each renewal and loss) are injectable for tests."""
        if not retry_period < renew_deadline < lease_duration:
            raise ValueError("need retry_period < renew_deadline < lease_duration")
        self._api = client
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.leading = asyncio.Event()
        self._observed: Observation | None = None
        self._monotonic = monotonic
        self._wall_clock = wall_clock
        self._fence = write_fence or fence.Fence()  # not armed: enforces nothing
        self.renewed_at: float | None = None  # monotonic time at which the last successful attempt began
        self._held: Lease | None = None  # the lease as our last write returned it, while we hold it
        # Called once this candidate leads, on the loop the elector runs on (the manager's may be
        # another: `runtime.lease_loop`).
        self.on_leading: Callable[[], None] = lambda: None

    def _now(self) -> float:
        return self._monotonic() if self._monotonic is not None else asyncio.get_running_loop().time()

    @property
    def is_leader(self) -> bool:
        return self.leading.is_set()

    async def run(self) -> None:
        """Acquire the lease, then renew it; returns once leadership is lost."""
        try:
            while await self.try_acquire_or_renew() is not Attempt.HELD:
                stop_if_cancelled()
                await asyncio.sleep(self.retry_period)
            log.info("leader election %s/%s: %s is the leader", self.namespace, self.name, self.identity)
            self.leading.set()
            self.on_leading()
            while True:
                await asyncio.sleep(self.retry_period)
                if not await self.renew():
                    return
                stop_if_cancelled()
        finally:
            self.leading.clear()
            self._held = None
            self._fence.dropped(self._fence_key)

    async def renew(self) -> bool:
        """One renewal by the holder; False once the lease is lost: another holds it, or no attempt
        succeeded within `renew_deadline` of the last one that did."""
        deadline = self._last_renew() + self.renew_deadline
        attempt = await self._bounded_attempt(deadline - self._now())
        if attempt is Attempt.OTHER or (attempt is Attempt.FAILED and self._now() >= deadline):
            self._held = None
            self._fence.dropped(self._fence_key)
            log.error("leader election %s/%s: %s lost the lease", self.namespace, self.name, self.identity)
            return False
        return True

    def observe(self, resource_version: str, now: float) -> None:
        """Note a resourceVersion of the lease read elsewhere (a list), so the expiry clock of a lease
        held by another runs even while this candidate is not contending for it."""
        if self._observed is None or self._observed.resource_version != resource_version:
            self._observed = Observation(resource_version, now)

    def _last_renew(self) -> float:
        assert self.renewed_at is not None, "only called while leading"
        return self.renewed_at

    async def _bounded_attempt(self, remaining: float) -> Attempt:
        # A hung request must not let us keep acting past the renew deadline.
        try:
            return await asyncio.wait_for(self.try_acquire_or_renew(), timeout=max(remaining, 0.001))
        except TimeoutError:
            # Say so: a renewal that times out quietly is a lost lease with no cause in the log.
            log.warning(
                "leader election %s/%s: no answer to the renewal within %.1fs",
                self.namespace,
                self.name,
                max(remaining, 0.0),
            )
            return Attempt.FAILED

    @property
    def _fence_key(self) -> str:
        return f"{self.namespace}/{self.name}/{self.identity}"

    async def try_acquire_or_renew(self) -> Attempt:
        # The lease's own requests pass the fence: they are how a lease is re-confirmed.
        with fence.exempt():
            return await self._try_acquire_or_renew()

    async def _try_acquire_or_renew(self) -> Attempt:
        # Both clocks are read before any request: see the module docstring.
        now, wall = self._now(), self._wall_clock()
        if self._held is not None:
            renewed = await self._renew_in_one_request(self._held, now, wall)
            if renewed is not None:
                return renewed
        try:
            lease = await self._api.get(Lease, self.name, namespace=self.namespace)
        except ops.ApiError as exc:
            if not ops.is_not_found(exc):
                log.warning("leader election: reading the lease failed: %s", exc)
                return Attempt.FAILED
            return await self._write(None, now, wall)
        except Exception as exc:
            log.warning("leader election: reading the lease failed: %s", exc)
            return Attempt.FAILED
        rv = str(lease.metadata.resourceVersion if lease.metadata else "")
        if self._observed is None or self._observed.resource_version != rv:
            self._observed = Observation(rv, now)
        spec = lease.spec or LeaseSpec()
        duration = float(spec.leaseDurationSeconds or self.lease_duration)
        holder = spec.holderIdentity
        observed = self._observed
        if not may_acquire(
            holder=holder, identity=self.identity, observed=observed, duration=duration, now=now
        ):
            return Attempt.OTHER
        return await self._write(lease, now, wall)

    async def _renew_in_one_request(self, held: Lease, now: float, wall: dt.datetime) -> Attempt | None:
        """The holder's renewal in one request, as client-go's: the lease written over the version our
        last write returned, with no read before it. Under load every request to the API server
        waits its turn, and a renewal of two requests waits twice. None when the server refused it
        (someone else wrote the lease, or deleted it): the caller reads it and judges it afresh."""
        try:
            return await self._write(held, now, wall, quiet=True)
        except ops.ApiError:
            self._held = None
            return None

    async def _write(
        self, lease: Lease | None, now: float, wall: dt.datetime, *, quiet: bool = False
    ) -> Attempt:
        """`quiet`: an error the API server answered is raised, not logged (`_renew_in_one_request`)."""
        old = lease.spec if lease is not None and lease.spec is not None else LeaseSpec()
        taking_over = old.holderIdentity != self.identity
        spec = LeaseSpec(
            holderIdentity=self.identity,
            leaseDurationSeconds=math.ceil(self.lease_duration),
            renewTime=wall,
            acquireTime=wall if taking_over else old.acquireTime,
            leaseTransitions=(old.leaseTransitions or 0) + (1 if taking_over and old.holderIdentity else 0),
        )
        try:
            written = await self._put(lease, spec)
        except ops.ApiError as exc:
            if quiet:
                raise
            if ops.code_of(exc) != ops.CONFLICT:
                log.warning("leader election: writing the lease failed: %s", exc)
            return Attempt.FAILED
        except Exception as exc:
            log.warning("leader election: writing the lease failed: %s", exc)
            return Attempt.FAILED
        self._observed = Observation(str(written.metadata.resourceVersion), now)
        self._held = written
        self.renewed_at = now
        # Writes may go out until the renew deadline counted from the attempt's start, as the holder's
        # own give-up: the time the request took is already spent.
        self._fence.renewed(self._fence_key, self.renew_deadline - (self._now() - now))
        return Attempt.HELD

    async def _put(self, lease: Lease | None, spec: LeaseSpec) -> Any:
        if lease is None:
            fresh = Lease(metadata=ObjectMeta(name=self.name, namespace=self.namespace), spec=spec)
            return await self._api.create(fresh)
        # replace() sends our resourceVersion: a concurrent writer turns this into a 409.
        updated = Lease(
            metadata=ObjectMeta(
                name=self.name,
                namespace=self.namespace,
                resourceVersion=lease.metadata.resourceVersion if lease.metadata else None,
            ),
            spec=spec,
        )
        return await self._api.replace(updated)

    async def release(self) -> bool:
        """Give the lease up if we hold it, so a successor need not wait for it to expire."""
        self.leading.clear()
        self._held = None
        self._fence.dropped(self._fence_key)
        wall = self._wall_clock()
        with fence.exempt():
            return await self._release(wall)

    async def _release(self, wall: dt.datetime) -> bool:
        try:
            lease = await self._api.get(Lease, self.name, namespace=self.namespace)
            if lease.spec is None or lease.spec.holderIdentity != self.identity:
                return False
            spec = LeaseSpec(
                leaseDurationSeconds=1,
                renewTime=wall,
                acquireTime=wall,
                leaseTransitions=lease.spec.leaseTransitions,
            )
            await self._put(lease, spec)
        except Exception as exc:  # best effort: the lease then simply expires
            log.warning("leader election: releasing the lease failed: %s", exc)
            return False
        return True
