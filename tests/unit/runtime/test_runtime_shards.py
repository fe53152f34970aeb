"""Shards on Leases (ADR 0067) without a cluster: the hash, the fair-share plan, the survey of Leases,
and a controller that admits only the keys of the shards it owns."""

from __future__ import annotations

import asyncio
import collections

from lightkube.models.coordination_v1 import LeaseSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.coordination_v1 import Lease

from fleetwave.runtime import controller, shards


def test_shard_of_is_stable_and_spreads_keys() -> None:
    # Fixed values, the same in every process whatever PYTHONHASHSEED is: a change of hash would
    # move every rollout to another replica on upgrade.
    assert [shards.shard_of(f"ClusterPromotion/p{i}", 3) for i in range(8)] == [0, 0, 1, 0, 1, 2, 2, 2]
    assert shards.shard_of("ClusterPromotion/app", 1 << 30) == 970582946
    assert shards.shard_of("ClusterPromotion/app", 1) == 0
    counts = collections.Counter(shards.shard_of(f"ClusterPromotion/p{i}", 4) for i in range(1000))
    assert set(counts) == {0, 1, 2, 3}
    assert min(counts.values()) > 200  # within 20% of an even split


def test_plan_takes_up_to_the_fair_share_and_releases_above_it() -> None:
    alone = shards.plan(shards=3, held=[], live=1, blocked=False)
    assert alone.share == 3
    assert alone.acquire == (0, 1, 2)
    assert alone.release == ()
    three = shards.plan(shards=3, held=[0, 1, 2], live=3, blocked=False)
    assert three.share == 1
    assert three.acquire == ()
    assert three.release == (2, 1)
    settled = shards.plan(shards=3, held=[1], live=3, blocked=False)
    assert settled.acquire == ()
    assert settled.release == ()
    survivor = shards.plan(shards=3, held=[1], live=2, blocked=False, start=2)
    assert survivor.share == 2
    assert survivor.acquire == (2, 0)


def test_plan_takes_nothing_while_blocked_but_still_releases() -> None:
    p = shards.plan(shards=4, held=[0, 1, 3], live=2, blocked=True)
    assert p.acquire == ()
    assert p.release == (3,)


def _lease(name: str, rv: str, holder: str | None, labels: dict[str, str] | None = None) -> Lease:
    return Lease(
        metadata=ObjectMeta(name=name, resourceVersion=rv, labels=labels),
        spec=LeaseSpec(holderIdentity=holder, leaseDurationSeconds=10),
    )


def _heartbeat(name: str, rv: str, count: int = 3) -> Lease:
    return _lease(name, rv, name, {shards.REPLICA_LABEL: "fleetwave", shards.SHARDS_LABEL: str(count)})


def _survey(leases: list[Lease], seen: shards.Seen, now: float) -> shards.Survey:
    return shards.survey(
        leases,
        prefix="fleetwave",
        shards=3,
        me="fleetwave-replica-me",
        single_lease="fleetwave-controller",
        seen=seen,
        now=now,
        duration=10.0,
    )


def test_survey_counts_replicas_whose_heartbeat_still_changes() -> None:
    seen = shards.Seen()
    me, a, b = (_heartbeat(f"fleetwave-replica-{n}", "1") for n in ("me", "a", "b"))
    assert _survey([me, a, b], seen, now=0.0).live == 3
    # a keeps beating, b stops: after a full lease duration by our clock b no longer counts.
    a2 = _heartbeat("fleetwave-replica-a", "2")
    assert _survey([me, a2, b], seen, now=9.0).live == 3
    assert _survey([me, a2, b], seen, now=10.5).live == 2
    gone = _survey([me, a2, b], seen, now=shards.STALE_HEARTBEAT_DURATIONS * 10.0 + 1)
    assert gone.stale == ("fleetwave-replica-b",)
    assert gone.blocked is None


def test_survey_blocks_on_another_shard_count_or_a_held_single_leader_lease() -> None:
    me = _heartbeat("fleetwave-replica-me", "1")
    other = _heartbeat("fleetwave-replica-x", "1", count=5)
    blocked = _survey([me, other], shards.Seen(), now=0.0).blocked
    assert blocked is not None
    assert "5 shards" in blocked
    single = _lease("fleetwave-controller", "7", "old-leader")
    blocked = _survey([me, single], shards.Seen(), now=0.0).blocked
    assert blocked is not None
    assert "single-leader" in blocked
    stale_count = _lease("fleetwave-shard-0-of-2", "3", "r1")
    assert "another shard count" in str(_survey([me, stale_count], shards.Seen(), now=0.0).blocked)
    # A released (holderless) or long-unrenewed lease of another scheme blocks nothing.
    seen = shards.Seen()
    assert _survey([me, _lease("fleetwave-controller", "8", None)], seen, now=0.0).blocked is None
    _survey([me, single], seen, now=0.0)
    assert _survey([me, single], seen, now=11.0).blocked is None


class Owner:
    def __init__(self, owned: set[int]) -> None:
        self.owned = owned

    def owns(self, shard: int) -> bool:
        return shard in self.owned


def _sharded(owner: Owner, calls: list[str], gate: asyncio.Event | None = None) -> controller.Controller[str]:
    async def reconcile(key: str) -> controller.Result:
        calls.append(key)
        if gate is not None:
            await gate.wait()
        return controller.Result()

    ctl: controller.Controller[str] = controller.Controller("c", reconcile)
    # key "sN-..." belongs to shard N
    ctl.shard(controller.Sharding(lambda k: int(k[1]), owner.owns, lambda: ["s0-a", "s1-b", "s1-c", "s2-d"]))
    return ctl


async def test_a_sharded_controller_admits_only_keys_of_owned_shards() -> None:
    owner, calls = Owner({1}), []
    ctl = _sharded(owner, calls)
    for key in ("s0-a", "s1-b", "s2-d"):
        ctl.enqueue(key)
    assert len(ctl.queue) == 1
    task = asyncio.create_task(ctl.run())
    await asyncio.sleep(0.05)
    assert calls == ["s1-b"]
    # A key queued while owned, then given up before it runs (a timer firing later): dropped.
    owner.owned = {1, 2}
    ctl.queue.add("s1-c")
    ctl.queue.add("s2-d")
    owner.owned = {2}
    await asyncio.sleep(0.05)
    assert calls == ["s1-b", "s2-d"]
    # Taking a shard enqueues all of its keys.
    owner.owned = {0, 2}
    ctl.resync(0)
    await asyncio.sleep(0.05)
    assert calls == ["s1-b", "s2-d", "s0-a"]
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def test_busy_reports_a_shard_while_its_reconcile_is_in_flight() -> None:
    owner, calls, gate = Owner({1}), [], asyncio.Event()
    ctl = _sharded(owner, calls, gate)
    task = asyncio.create_task(ctl.run())
    ctl.enqueue("s1-b")
    await asyncio.sleep(0.05)
    assert ctl.busy(1)
    assert not ctl.busy(0)
    owner.owned = set()  # draining: still busy until the reconcile in flight returns
    assert ctl.busy(1)
    gate.set()
    await asyncio.sleep(0.05)
    assert not ctl.busy(1)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
