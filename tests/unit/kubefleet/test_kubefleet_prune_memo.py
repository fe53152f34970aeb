"""A placement's delivery lists every kind on the member to prune only when something could have
been left behind: not when this process pruned the same objects with the same credentials before."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest

from fleetwave.controllers import kubefleet
from fleetwave.controllers.kubefleet import executor, ledger
from fleetwave.controllers.kubefleet.executor import DeliveryMemory, Placed
from fleetwave.delivery import content as ct
from fleetwave.delivery import manifests
from fleetwave.delivery.known_versions import KnownVersions
from fleetwave.delivery.target import MemberTarget
from fleetwave.kube.kinds import GVK

CM = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "ns"}}


class _Member:
    """The member as the executor sees it: applies answer with every object, prunes are counted."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.kubeconfig = b"kubeconfig-1"
        self.prunes = 0
        self.withdrawals = 0
        monkeypatch.setattr(executor, "target", lambda _ctx, _cluster: MemberTarget("m", self.kubeconfig))
        monkeypatch.setattr(executor, "kinds_of", lambda _ctx: frozenset({GVK("v1", "ConfigMap")}))
        monkeypatch.setattr(manifests, "apply", self._apply)
        monkeypatch.setattr(manifests, "prune", self._prune)
        monkeypatch.setattr(manifests, "withdraw", self._withdraw)

    async def _apply(self, _tgt: Any, objects: list[dict[str, Any]], **_: Any) -> manifests.ApplyReport:
        applied = tuple(manifests.AppliedObject(ct.ref_of(o), "h", "unchanged") for o in objects)
        return manifests.ApplyReport("inv", False, applied, "c")

    async def _prune(self, *_: Any, **__: Any) -> list[ct.ObjectRef]:
        self.prunes += 1
        return []

    async def _withdraw(self, *_: Any, **__: Any) -> list[ct.ObjectRef]:
        self.withdrawals += 1
        return []


# No registered MemberCluster: every member here is a push member (`pull.is_pull_member`).
_NO_MEMBERS = SimpleNamespace(get=lambda *_: None)


async def test_the_same_delivery_again_does_not_list_the_member_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    member = _Member(monkeypatch)
    ctx: Any = SimpleNamespace(known_versions=KnownVersions(), cache=_NO_MEMBERS)
    memory = DeliveryMemory()
    for _ in range(3):
        assert (await executor.apply(ctx, memory, "m", [CM], inventory="crp/m")).ok
    assert member.prunes == 1
    other = {**CM, "metadata": {"name": "b", "namespace": "ns"}}
    await executor.apply(ctx, memory, "m", [other], inventory="crp/m")  # an object left the snapshot
    assert member.prunes == 2
    member.kubeconfig = b"kubeconfig-2"  # rotated credentials (or a rebuilt cluster)
    await executor.apply(ctx, memory, "m", [other], inventory="crp/m")
    assert member.prunes == 3
    await executor.apply(ctx, memory, "m", [other], inventory="another/m")  # another placement's inventory
    assert member.prunes == 4
    # One placement's inventory is the same on every cluster: each cluster is remembered on its own.
    await executor.apply(ctx, memory, "n", [other], inventory="crp/m")
    await executor.apply(ctx, memory, "m", [other], inventory="crp/m")
    await executor.apply(ctx, memory, "n", [other], inventory="crp/m")
    assert member.prunes == 5


async def test_removing_the_content_forgets_what_was_pruned(monkeypatch: pytest.MonkeyPatch) -> None:
    member = _Member(monkeypatch)
    ctx: Any = SimpleNamespace(known_versions=KnownVersions(), cache=_NO_MEMBERS)
    memory = DeliveryMemory()
    await executor.apply(ctx, memory, "m", [CM], inventory="crp/m")
    await executor.remove(ctx, memory, "m", inventory="crp/m")
    assert member.withdrawals == 1
    assert not memory.prunes
    await executor.apply(ctx, memory, "m", [CM], inventory="crp/m")
    assert member.prunes == 2


async def test_a_shard_taken_over_lists_the_member_again(monkeypatch: pytest.MonkeyPatch) -> None:
    member = _Member(monkeypatch)
    ctx: Any = SimpleNamespace(known_versions=KnownVersions(), cache=_NO_MEMBERS)
    memory = DeliveryMemory()
    await executor.apply(ctx, memory, "m", [CM], inventory="crp/m")
    memory.forget_prunes()  # another replica may have delivered meanwhile
    await executor.apply(ctx, memory, "m", [CM], inventory="crp/m")
    assert member.prunes == 2


def test_the_kubefleet_controllers_forget_their_prunes_when_a_shard_is_taken_over() -> None:
    handlers: list[Any] = []
    manager: Any = SimpleNamespace(shards=SimpleNamespace(on_gain=handlers.append))
    memory = kubefleet._delivery_memory(manager)
    memory.prunes[Placed("m", "crp/m")] = ("fingerprint", frozenset())
    (gained,) = handlers
    gained(0)
    assert memory.prunes == {}


async def test_a_placement_created_after_this_process_began_delivering_is_not_searched_at_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    member = _Member(monkeypatch)
    ctx: Any = SimpleNamespace(known_versions=KnownVersions(), cache=_NO_MEMBERS)
    memory = DeliveryMemory()
    await executor.apply(ctx, memory, "m", [CM], inventory="earlier/m")  # delivering from now on
    assert member.prunes == 1
    created = datetime.now(UTC) + timedelta(seconds=10)
    other = {**CM, "metadata": {"name": "b", "namespace": "ns"}}
    for cluster in ("m", "n"):
        assert (
            await executor.apply(ctx, memory, cluster, [CM, other], inventory="crp/m", created=created)
        ).ok
    await executor.apply(ctx, memory, "m", [CM, other], inventory="crp/m", created=created)
    assert member.prunes == 1
    await executor.apply(ctx, memory, "m", [CM], inventory="crp/m", created=created)  # "b" left
    assert member.prunes == 2
    # Removed, or its cluster left the fleet: should it be delivered there again, it is searched.
    await executor.remove(ctx, memory, "n", inventory="crp/m")
    await executor.apply(ctx, memory, "n", [CM], inventory="crp/m", created=created)
    assert member.prunes == 3
    # A placement created before this process began may have been delivered by another.
    await executor.apply(
        ctx, memory, "m", [CM], inventory="old/m", created=datetime.now(UTC) - timedelta(hours=1)
    )
    assert member.prunes == 4


async def test_a_run_or_placement_delivers_with_its_placements_creation_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    member = _Member(monkeypatch)
    now = datetime.now(UTC)
    ctx: Any = SimpleNamespace(known_versions=KnownVersions(), cache=_NO_MEMBERS, clock=lambda: now)
    memory = DeliveryMemory(started=lambda: now - timedelta(minutes=10))
    fresh = ledger.Content("0", "h", [CM], "crp/fresh", created=now - timedelta(minutes=1))
    older = ledger.Content("0", "h", [CM], "crp/older", created=now - timedelta(minutes=11))
    delivered = await ledger.deliver(ctx, memory, ["m"], fresh)
    assert delivered["m"].error is None
    assert member.prunes == 0  # created after the controllers began: nobody delivered it before
    await ledger.deliver(ctx, memory, ["m"], older)
    assert member.prunes == 1
