"""What an apply does with what is already on a real member (ADR 0063): tiers decide between two
inventories, take-over rules decide about objects fleetwave never deployed, an apply without force
leaves a drifted object alone, and continueOnError/continueOnConflict stop or go on."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
from lightkube import ApiError, Client
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import ConfigMap

from fleetwave.delivery import content, manifests
from fleetwave.delivery.target import MemberTarget
from fleetwave.local import fleet


def _configmap(namespace: str, name: str, tier: tuple[int, int] | None = None, **data: str) -> dict[str, Any]:
    obj = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace},
        "data": data,
    }
    return manifests.with_tier(obj, tier) if tier else obj


@pytest.fixture
def target(local_fleet: fleet.FleetState) -> MemberTarget:
    member = local_fleet.members[0]
    return MemberTarget.from_file(member.name, member.kubeconfig)


@pytest.fixture
def member(local_fleet: fleet.FleetState, members: dict[str, Client]) -> Client:
    return members[local_fleet.members[0].name]


def _owner(member: Client, namespace: str, name: str) -> tuple[str | None, str | None]:
    meta = member.get(ConfigMap, name, namespace=namespace).metadata
    assert meta is not None
    return (meta.labels or {}).get(content.INVENTORY_LABEL), (meta.annotations or {}).get(
        manifests.OWNER_ANNOTATION
    )


def _absent(member: Client, namespace: str, name: str) -> bool:
    try:
        member.get(ConfigMap, name, namespace=namespace)
    except ApiError as err:
        return err.status.code == 404
    return False


async def test_the_first_inventory_keeps_an_object_until_a_lower_tier_takes_it_over(
    target: MemberTarget, member: Client, namespace: str
) -> None:
    first = await manifests.apply(target, [_configmap(namespace, "shared", v="a")], inventory="summary/x/a")
    assert first.ok, first.errors
    assert _owner(member, namespace, "shared") == (content.inventory_key("summary/x/a"), "summary/x/a")

    # Same tier: the object stays with the first; the second says who has it.
    second = await manifests.apply(target, [_configmap(namespace, "shared", v="b")], inventory="summary/x/b")
    assert [o.action for o in second.objects] == ["conflict"]
    assert second.conflicts
    assert "already deployed by summary/x/a (tier 100)" in second.conflicts[0]
    assert member.get(ConfigMap, "shared", namespace=namespace).data == {"v": "a"}

    # A lower tier wins; the first now reports the conflict on its next apply and changes nothing.
    third = await manifests.apply(
        target, [_configmap(namespace, "shared", (50, 100), v="c")], inventory="summary/x/c"
    )
    assert third.ok, third.errors
    assert member.get(ConfigMap, "shared", namespace=namespace).data == {"v": "c"}
    assert _owner(member, namespace, "shared")[1] == "summary/x/c"
    again = await manifests.apply(target, [_configmap(namespace, "shared", v="a")], inventory="summary/x/a")
    assert [o.action for o in again.objects] == ["conflict"]
    assert "summary/x/c (tier 50)" in again.conflicts[0]
    assert member.get(ConfigMap, "shared", namespace=namespace).data == {"v": "c"}

    # The policy tier breaks a tie of profile tiers; the loser's prune never deletes the winner's object.
    fourth = await manifests.apply(
        target, [_configmap(namespace, "shared", (50, 10), v="d")], inventory="summary/x/d"
    )
    assert fourth.ok, fourth.errors
    await manifests.prune(target, inventory="summary/x/c", kinds=[fourth.objects[0].ref.gvk], keep=())
    assert member.get(ConfigMap, "shared", namespace=namespace).data == {"v": "d"}


async def test_continue_on_conflict_applies_the_rest_and_stop_on_conflict_skips_it(
    target: MemberTarget, member: Client, namespace: str
) -> None:
    await manifests.apply(target, [_configmap(namespace, "a-taken", v="1")], inventory="summary/y/owner")
    wanted = [_configmap(namespace, "a-taken", v="2"), _configmap(namespace, "b-free", v="2")]

    stopping = manifests.ApplyPolicy(stop_on_conflict=True)
    stopped = await manifests.apply(target, wanted, inventory="summary/y/other", policy=stopping)
    assert [(o.ref.name, o.action) for o in stopped.objects] == [
        ("a-taken", "conflict"),
        ("b-free", "skipped"),
    ]
    assert "continueOnConflict is false" in (stopped.objects[1].error or "")
    assert _absent(member, namespace, "b-free")

    going = await manifests.apply(target, wanted, inventory="summary/y/other")
    assert [(o.ref.name, o.action) for o in going.objects] == [("a-taken", "conflict"), ("b-free", "created")]
    assert not going.ok  # the conflict is still reported


async def test_stop_on_error_skips_what_follows_a_failed_object(
    target: MemberTarget, member: Client, namespace: str
) -> None:
    bad = _configmap(namespace, "a-bad")
    bad["data"] = {"n": 1}  # not a string: the API server refuses it
    wanted = [bad, _configmap(namespace, "b-good", v="1")]

    stopped = await manifests.apply(
        target, wanted, inventory="summary/z/p", policy=manifests.ApplyPolicy(stop_on_error=True)
    )
    assert [o.action for o in stopped.objects] == ["failed", "skipped"]
    assert "continueOnError is false" in (stopped.objects[1].error or "")
    assert _absent(member, namespace, "b-good")

    going = await manifests.apply(target, wanted, inventory="summary/z/p")
    assert [o.action for o in going.objects] == ["failed", "created"]


async def test_take_over_rules_for_objects_fleetwave_did_not_deploy(
    target: MemberTarget, member: Client, namespace: str
) -> None:
    for name in ("never", "differs", "same"):
        member.create(ConfigMap(metadata=ObjectMeta(name=name, namespace=namespace), data={"v": "1"}))

    never = await manifests.apply(
        target,
        [_configmap(namespace, "never", v="1")],
        inventory="placement/p",
        policy=manifests.ApplyPolicy(take_over="Never"),
    )
    assert [o.action for o in never.objects] == ["conflict"]
    assert "whenToTakeOver: Never" in never.errors[0]
    assert _owner(member, namespace, "never") == (None, None)

    if_no_diff = manifests.ApplyPolicy(take_over="IfNoDiff")
    differs = await manifests.apply(
        target, [_configmap(namespace, "differs", v="2")], inventory="placement/p", policy=if_no_diff
    )
    assert [o.action for o in differs.objects] == ["conflict"]
    assert "/data/v" in differs.errors[0]
    assert member.get(ConfigMap, "differs", namespace=namespace).data == {"v": "1"}

    same = await manifests.apply(
        target, [_configmap(namespace, "same", v="1")], inventory="placement/p", policy=if_no_diff
    )
    assert same.ok, same.errors
    assert _owner(member, namespace, "same")[1] == "placement/p"

    # Once it is ours the take-over rule no longer applies: later content is applied.
    later = await manifests.apply(
        target, [_configmap(namespace, "same", v="3")], inventory="placement/p", policy=if_no_diff
    )
    assert later.ok, later.errors
    assert member.get(ConfigMap, "same", namespace=namespace).data == {"v": "3"}


async def test_without_force_a_drifted_object_is_reported_and_left_alone(
    target: MemberTarget, member: Client, namespace: str
) -> None:
    await manifests.apply(target, [_configmap(namespace, "tuned", limit="10")], inventory="placement/q")
    cm = member.get(ConfigMap, "tuned", namespace=namespace)
    cm.data = {"limit": "99"}
    member.replace(cm, field_manager="kubectl-edit")

    careful = manifests.ApplyPolicy(force=False)
    left = await manifests.apply(
        target, [_configmap(namespace, "tuned", limit="11")], inventory="placement/q", policy=careful
    )
    assert [o.action for o in left.objects] == ["conflict"]
    assert "drifted, not applied" in left.errors[0]
    assert member.get(ConfigMap, "tuned", namespace=namespace).data == {"limit": "99"}

    forced = await manifests.apply(
        target, [_configmap(namespace, "tuned", limit="11")], inventory="placement/q"
    )
    assert forced.ok, forced.errors
    assert member.get(ConfigMap, "tuned", namespace=namespace).data == {"limit": "11"}
    # Nothing drifted any more: the careful apply goes through too.
    calm = await manifests.apply(
        target, [_configmap(namespace, "tuned", limit="12")], inventory="placement/q", policy=careful
    )
    assert calm.ok, calm.errors


class _TakenOverAfterRead:
    """A member session in which another inventory takes the object over, for real, right after
    fleetwave read it: the interleaving two profiles delivering one object can hit."""

    def __init__(self, inner: MemberTarget, takeover: Callable[[], None]) -> None:
        self.inner, self.takeover, self.name = inner, takeover, inner.name

    @asynccontextmanager
    async def session(self) -> AsyncIterator[Any]:
        async with self.inner.session() as client:
            yield _ReadThenTakeOver(client, self.takeover)


class _ReadThenTakeOver:
    def __init__(self, client: Any, takeover: Callable[[], None]) -> None:
        self._client, self._takeover, self._done = client, takeover, False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    async def get(self, *args: Any, **kwargs: Any) -> Any:
        found = await self._client.get(*args, **kwargs)
        if not self._done:
            self._done = True
            self._takeover()
        return found


async def test_a_takeover_between_read_and_apply_is_refused_not_overwritten(
    target: MemberTarget, member: Client, namespace: str
) -> None:
    first = await manifests.apply(target, [_configmap(namespace, "shared", v="a")], inventory="summary/x/a")
    assert first.ok, first.errors

    def lower_tier_takes_it() -> None:
        member.apply(
            ConfigMap.from_dict(
                manifests.with_tier(
                    content.with_inventory(
                        {
                            "apiVersion": "v1",
                            "kind": "ConfigMap",
                            "metadata": {
                                "name": "shared",
                                "namespace": namespace,
                                "annotations": {manifests.OWNER_ANNOTATION: "summary/x/c"},
                            },
                            "data": {"v": "c"},
                        },
                        content.inventory_key("summary/x/c"),
                    ),
                    (50, 100),
                )
            ),
            field_manager=manifests.FIELD_MANAGER,
            force=True,
        )

    # `a` read its own object, then `c` (tier 50) took it: `a`'s apply must not put it back.
    racing = _TakenOverAfterRead(target, lower_tier_takes_it)
    again = await manifests.apply(racing, [_configmap(namespace, "shared", v="a2")], inventory="summary/x/a")
    assert [o.action for o in again.objects] == ["conflict"], again.objects
    assert "summary/x/c (tier 50)" in again.conflicts[0]
    assert member.get(ConfigMap, "shared", namespace=namespace).data == {"v": "c"}
