"""The member client pool: one client per kubeconfig per loop, reused, retired on transport errors,
closed when idle, never closed under a user."""

from __future__ import annotations

import asyncio

import pytest

from fleetwave.delivery import sessions
from fleetwave.delivery.target import MemberTarget
from fleetwave.kube.client import KubeConfig

KUBECONFIG = b"""apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
"""


def _config() -> KubeConfig:
    return MemberTarget("m", KUBECONFIG).config()


async def test_one_key_gets_one_client_until_it_is_retired() -> None:
    pool = sessions.SessionPool()
    a = pool.checkout("k", _config)
    b = pool.checkout("k", _config)
    assert a is b
    assert a.users == 2
    other = pool.checkout("other", _config)
    assert other.client is not a.client
    pool.retire(a)
    pool.checkin(a)
    assert pool.checkout("k", _config).client is not a.client
    pool.checkin(b)  # its last user gone: the retired client is closed
    await asyncio.sleep(0)
    assert pool.created == 3
    await pool.close()


async def test_idle_clients_are_closed_and_busy_ones_are_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    pool = sessions.SessionPool(idle_seconds=0.0, max_idle=10)
    busy = pool.checkout("busy", _config)
    idle = pool.checkout("idle", _config)
    pool.checkin(idle)
    monkeypatch.setattr(pool, "_swept", 0.0)  # due for a sweep
    pool.checkout("third", _config)
    assert len(pool) == 2  # "idle" was closed; "busy" is in use and stays
    assert pool.checkout("busy", _config) is busy
    await pool.close()


async def test_beyond_max_idle_the_least_recently_used_go_first() -> None:
    pool = sessions.SessionPool(idle_seconds=3600, max_idle=2)
    for key in ("a", "b", "c"):
        pool.checkin(pool.checkout(key, _config))
    pool.checkin(pool.checkout("d", _config))  # three idle before it: "a", the oldest, is closed
    assert len(pool) == 3
    assert pool.created == 4
    pool.checkout("b", _config)
    assert pool.created == 4
    pool.checkout("a", _config)
    assert pool.created == 5
    await pool.close()


async def test_member_targets_with_one_kubeconfig_share_a_client_and_a_rotated_one_does_not() -> None:
    first, alias = MemberTarget("m1", KUBECONFIG), MemberTarget("m1-alias", KUBECONFIG)
    rotated = MemberTarget("m1", KUBECONFIG.replace(b"token: t", b"token: t2"))
    before = sessions.pool().created  # the loop may be shared with other tests
    async with first.session() as c1, alias.session() as c2, rotated.session() as c3:
        assert c1 is c2
        assert c3 is not c1
    assert sessions.pool().created - before == 2
    await sessions.close_pool()


async def test_each_event_loop_has_its_own_pool() -> None:
    mine = sessions.pool()
    other: list[sessions.SessionPool] = []

    def in_another_loop() -> None:
        async def grab() -> None:
            other.append(sessions.pool())

        asyncio.run(grab())

    await asyncio.to_thread(in_another_loop)
    assert other[0] is not mine
    await sessions.close_pool()


async def test_a_member_counts_as_answering_only_after_a_use_that_ended_without_an_error() -> None:
    target = MemberTarget("m", KUBECONFIG)
    key = target.pool_key()
    assert not sessions.pool().answered_within(key, 60)
    with pytest.raises(RuntimeError):
        async with target.session():
            raise RuntimeError("the request failed")
    assert not sessions.pool().answered_within(key, 60)
    async with target.session():
        pass
    assert sessions.pool().answered_within(key, 60)
    assert not sessions.pool().answered_within(key, 0)
    await sessions.close_pool()
