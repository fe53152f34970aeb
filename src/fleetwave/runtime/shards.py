"""Shards on Leases (ADR 0067): N Leases split the controllers' keys between replicas.

A key belongs to shard `shard_of(rollout, N)`, a stable hash of the rollout it is part of, so one
process paces one rollout. Each shard is a Lease `<prefix>-shard-<i>-of-<N>` taken and renewed with
the `LeaderElector` rules (expiry judged by our own clock; the holder gives up at `renew_deadline`,
before anyone may take over). Every replica also renews a heartbeat Lease of its own; the live
heartbeats tell each replica its fair share, `ceil(N / live replicas)`:

- below it, a replica takes shards that are free or whose holder stopped renewing;
- above it (a replica joined), it drains the extra shard first — stops admitting its keys, waits for
  its reconciles in flight to finish — and only then releases the Lease, so two replicas never work
  on one key at once;
- a held shard that cannot be renewed in time raises `ShardLost`, which ends the process like a lost
  leader lease (nothing of the old term can still act).

A replica refuses to take shards while another live replica runs with a different shard count or
the single-leader Lease is held: both would otherwise act on the same keys.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import logging
import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from lightkube.models.coordination_v1 import LeaseSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.coordination_v1 import Lease

from fleetwave.kube import fence
from fleetwave.kube.client import AsyncClient
from fleetwave.runtime.leader import Attempt, LeaderElector, Observation

log = logging.getLogger(__name__)

REPLICA_LABEL = "fleetwave.io/replica-of"  # on heartbeat Leases: the lease prefix
SHARDS_LABEL = "fleetwave.io/shards"  # on heartbeat Leases: the replica's shard count
# Heartbeats of replicas gone this long (unchanged, by our clock) are deleted: nothing reads them.
STALE_HEARTBEAT_DURATIONS = 10
DRAIN_POLL_SECONDS = 0.05


class ShardLost(RuntimeError):
    """A held shard's Lease was not renewed in time: exit and let a fresh process contend."""


def shard_of(rollout: str, shards: int) -> int:
    """The shard of a rollout: sha256, so every replica and every restart agrees."""
    digest = hashlib.sha256(rollout.encode()).digest()
    return int.from_bytes(digest[:8], "big") % shards


def lease_name(prefix: str, shard: int, shards: int) -> str:
    return f"{prefix}-shard-{shard}-of-{shards}"


@dataclass(frozen=True, slots=True)
class Plan:
    acquire: tuple[int, ...]  # shards to try, in order, until the fair share is reached
    release: tuple[int, ...]  # held shards above the fair share
    share: int


def plan(*, shards: int, held: Iterable[int], live: int, blocked: bool, start: int = 0) -> Plan:
    """What one tick does: take shards up to `ceil(shards / live)`, give up any above it.

    Candidates start at `start` (a hash of the replica) so replicas starting together try different
    shards first; the highest-numbered held shards are given up first."""
    mine = sorted(set(held))
    share = math.ceil(shards / max(live, 1))
    release = tuple(sorted(mine[share:], reverse=True)) if len(mine) > share else ()
    if blocked or len(mine) >= share:
        return Plan((), release, share)
    order = [(start + i) % shards for i in range(shards)]
    return Plan(tuple(i for i in order if i not in mine), release, share)


class Seen:
    """When each Lease's resourceVersion last changed, by our monotonic clock."""

    def __init__(self) -> None:
        self._seen: dict[str, Observation] = {}

    def observe(self, name: str, resource_version: str, now: float) -> Observation:
        old = self._seen.get(name)
        if old is None or old.resource_version != resource_version:
            old = self._seen[name] = Observation(resource_version, now)
        return old

    def unchanged_for(self, name: str, now: float) -> float:
        seen = self._seen.get(name)
        return 0.0 if seen is None else now - seen.seen_at

    def forget_all_but(self, names: set[str]) -> None:
        for name in set(self._seen) - names:
            del self._seen[name]


@dataclass(frozen=True, slots=True)
class Survey:
    live: int  # live replicas, this one included
    blocked: str | None  # why no shard may be taken now, if one may not
    stale: tuple[str, ...]  # heartbeats of replicas long gone


def survey(
    leases: list[Lease],
    *,
    prefix: str,
    shards: int,
    me: str,
    single_lease: str,
    seen: Seen,
    now: float,
    duration: float,
) -> Survey:
    """Live replicas and conflicts, from one list of the namespace's Leases (pure but for `seen`)."""
    live, stale, blocked = 1, [], None
    other_count = re.compile(rf"^{re.escape(prefix)}-shard-\d+-of-(\d+)$")
    for lease in leases:
        meta, spec = lease.metadata or ObjectMeta(), lease.spec or LeaseSpec()
        name, labels = str(meta.name), dict(meta.labels or {})
        seen.observe(name, str(meta.resourceVersion), now)
        alive = seen.unchanged_for(name, now) < float(spec.leaseDurationSeconds or duration)
        if labels.get(REPLICA_LABEL) == prefix and name != me:
            if alive:
                live += 1
                if labels.get(SHARDS_LABEL) != str(shards):
                    blocked = f"replica {spec.holderIdentity} runs {labels.get(SHARDS_LABEL)} shards"
            elif seen.unchanged_for(name, now) >= STALE_HEARTBEAT_DURATIONS * duration:
                stale.append(name)
            continue
        held = bool(spec.holderIdentity) and alive
        match = other_count.match(name)
        if held and name == single_lease:
            blocked = f"the single-leader lease {name} is held by {spec.holderIdentity}"
        elif held and match and int(match.group(1)) != shards:
            blocked = f"lease {name} of another shard count is held by {spec.holderIdentity}"
    return Survey(live, blocked, tuple(stale))


def _wall_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class ShardSet:
    def __init__(
        self,
        client: AsyncClient,
        namespace: str,
        identity: str,
        shards: int,
        *,
        lease_duration: float,
        renew_deadline: float,
        retry_period: float,
        prefix: str = "fleetwave",
        single_lease: str = "fleetwave-controller",
        write_fence: fence.Fence | None = None,
    ) -> None:
        """`write_fence`: the replica's (ADR 0115), open only while every shard held is renewed."""
        if shards < 1:
            raise ValueError("shards must be at least 1")
        self._api = client
        self.namespace, self.identity, self.shards = namespace, identity, shards
        self.lease_duration, self.retry_period = lease_duration, retry_period
        self.prefix, self.single_lease = prefix, single_lease
        self.electors = [
            LeaderElector(
                client,
                namespace,
                lease_name(prefix, i, shards),
                identity,
                lease_duration=lease_duration,
                renew_deadline=renew_deadline,
                retry_period=retry_period,
                write_fence=write_fence,
            )
            for i in range(shards)
        ]
        self.heartbeat = f"{prefix}-replica-{hashlib.sha256(identity.encode()).hexdigest()[:12]}"
        self.held: set[int] = set()
        self.draining: set[int] = set()
        # Whether a reconcile of a shard's key is in flight here: set by the manager.
        self.busy: Callable[[int], bool] = lambda _shard: False
        self._gained: list[Callable[[int], None]] = []
        self._seen = Seen()
        self._drains: dict[int, asyncio.Task[None]] = {}
        self._start = shard_of(identity, shards)
        self._blocked_said: str | None = None
        self._active = False

    def owns(self, shard: int) -> bool:
        return self._active and shard in self.held and shard not in self.draining

    def shard_of(self, rollout: str) -> int:
        return shard_of(rollout, self.shards)

    def on_gain(self, handler: Callable[[int], None]) -> None:
        self._gained.append(handler)

    def _now(self) -> float:
        return asyncio.get_running_loop().time()

    async def run(self) -> None:
        """Contend, renew, rebalance every `retry_period` until cancelled; raises `ShardLost`."""
        first, self._active = True, True
        try:
            while True:
                await self._tick(take=not first)  # the first tick only announces this replica
                first = False
                await asyncio.sleep(self.retry_period)
        finally:
            self._active = False  # nothing is admitted once we stop contending; `release` gives up
            for task in list(self._drains.values()):
                task.cancel()

    async def _tick(self, *, take: bool) -> None:
        await self._beat()
        await self._renew_held()
        leases = await self._leases()
        if leases is None:
            return
        now = self._now()
        found = survey(
            leases,
            prefix=self.prefix,
            shards=self.shards,
            me=self.heartbeat,
            single_lease=self.single_lease,
            seen=self._seen,
            now=now,
            duration=self.lease_duration,
        )
        self._seen.forget_all_but({str((lease.metadata or ObjectMeta()).name) for lease in leases})
        for lease in leases:
            index = self._index_of(str((lease.metadata or ObjectMeta()).name))
            if index is not None and index not in self.held:
                self.electors[index].observe(str((lease.metadata or ObjectMeta()).resourceVersion), now)
        if found.blocked != self._blocked_said:
            if found.blocked:
                log.error("shards: not taking any shard: %s", found.blocked)
            self._blocked_said = found.blocked
        steps = plan(
            shards=self.shards,
            held=self.held,
            live=found.live,
            blocked=found.blocked is not None or not take,
            start=self._start,
        )
        for shard in steps.release:
            if shard not in self._drains:
                self._drains[shard] = asyncio.create_task(self._drain(shard), name=f"drain shard {shard}")
        for shard in steps.acquire:
            if len(self.held) >= steps.share:
                break
            if await self.electors[shard].try_acquire_or_renew() is Attempt.HELD:
                self._gain(shard)
        await self._forget(found.stale)

    def _index_of(self, name: str) -> int | None:
        for i, elector in enumerate(self.electors):
            if elector.name == name:
                return i
        return None

    def _gain(self, shard: int) -> None:
        log.info("shards: %s took shard %d of %d", self.identity, shard, self.shards)
        self.held.add(shard)
        for handler in self._gained:
            handler(shard)

    async def _renew_held(self) -> None:
        held = sorted(self.held)
        results = await asyncio.gather(*(self.electors[i].renew() for i in held))
        lost = [i for i, ok in zip(held, results, strict=True) if not ok]
        if lost:
            self.held.difference_update(lost)
            raise ShardLost(f"{self.identity} could not renew shard(s) {lost} of {self.shards} in time")

    async def _drain(self, shard: int) -> None:
        """Give a shard up without two replicas ever working on one of its keys."""
        self.draining.add(shard)
        try:
            while self.busy(shard):  # noqa: ASYNC110 - reconciles in flight end on their own
                await asyncio.sleep(DRAIN_POLL_SECONDS)
            self.held.discard(shard)
            log.info("shards: %s gave shard %d of %d up", self.identity, shard, self.shards)
            await self.electors[shard].release()
        finally:
            self.draining.discard(shard)
            self._drains.pop(shard, None)

    async def _beat(self) -> None:
        """Renew this replica's heartbeat Lease (created on first use)."""
        lease = Lease(
            metadata=ObjectMeta(
                name=self.heartbeat,
                namespace=self.namespace,
                labels={REPLICA_LABEL: self.prefix, SHARDS_LABEL: str(self.shards)},
            ),
            spec=LeaseSpec(
                holderIdentity=self.identity,
                leaseDurationSeconds=math.ceil(self.lease_duration),
                renewTime=_wall_now(),
            ),
        )
        try:
            await self._api.apply(lease, field_manager="fleetwave-shards", force=True)
        except Exception as exc:  # only the balance suffers: others count us out after a while
            log.warning("shards: renewing the heartbeat %s failed: %s", self.heartbeat, exc)

    async def _leases(self) -> list[Lease] | None:
        try:
            return [lease async for lease in self._api.list(Lease, namespace=self.namespace)]
        except Exception as exc:
            log.warning("shards: listing the Leases failed: %s", exc)
            return None

    async def _forget(self, names: Iterable[str]) -> None:
        for name in names:
            try:
                await self._api.delete(Lease, name, namespace=self.namespace)
            except Exception as exc:  # best effort: tried again next tick
                log.debug("shards: deleting the stale heartbeat %s failed: %s", name, exc)

    async def release(self) -> None:
        """On a graceful stop: give every shard and the heartbeat up, so others need not wait."""
        for shard in sorted(self.held):
            await self.electors[shard].release()
        self.held.clear()
        try:
            await self._api.delete(Lease, self.heartbeat, namespace=self.namespace)
        except Exception as exc:
            log.warning("shards: deleting the heartbeat %s failed: %s", self.heartbeat, exc)
