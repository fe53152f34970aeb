"""Round trips a ClusterSummary delivery spares the member (ADR 0068): no readiness probe right after
the member answered, no prune lists when the same objects were pruned there before."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from fleetwave.controllers.shared.keys import SummaryKey
from fleetwave.controllers.sveltos import summary
from fleetwave.controllers.sveltos.summary_memory import SummaryMemory
from fleetwave.delivery import manifests, sessions
from fleetwave.delivery.content import ObjectRef
from fleetwave.delivery.known_versions import KnownVersions
from fleetwave.delivery.target import MemberTarget, MemberUnreachable

# A member nothing listens for (port 1).
KUBECONFIG = json.dumps(
    {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }
).encode()
CM = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "n"}}
KEY = SummaryKey("fleet", "web-m1")


async def test_a_member_that_just_answered_is_not_probed_and_a_silent_one_is() -> None:
    target = MemberTarget("m", KUBECONFIG)  # nothing listens on port 1
    with pytest.raises(MemberUnreachable):
        await summary._probe(target)
    async with target.session():
        pass  # a use that ended well: the member answered
    await summary._probe(target)  # no request made, so no error from the closed port
    await sessions.close_pool()


class _Member:
    """Records what `_resources` asks of the member, through the delivery functions it calls."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.prunes = 0
        monkeypatch.setattr(manifests, "apply", self.apply)
        monkeypatch.setattr(manifests, "prune", self.prune)

    async def apply(self, target: Any, objects: list[dict[str, Any]], **_: Any) -> manifests.ApplyReport:
        applied = tuple(
            manifests.AppliedObject(ObjectRef("v1", o["kind"], "n", o["metadata"]["name"]), "h", "unchanged")
            for o in objects
        )
        return manifests.ApplyReport("inv", False, applied, "c")

    async def prune(self, target: Any, **_: Any) -> list[ObjectRef]:
        self.prunes += 1
        return []


async def _provisioned(
    memory: SummaryMemory,
    target: MemberTarget,
    objects: list[dict[str, Any]],
    key: SummaryKey,
    created: datetime | None = None,
) -> None:
    """Deliver the resources feature of summary `key` through `_resources`; it must be Provisioned."""
    policy, known = manifests.ApplyPolicy(), KnownVersions()
    feature, _, _ = await summary._resources(
        target, objects, key, {}, False, policy, "owner", memory, known, created=created
    )
    assert feature.status == "Provisioned"


async def test_prune_lists_run_again_only_when_the_delivered_objects_or_credentials_change(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    member = _Member(monkeypatch)
    memory = SummaryMemory()
    target = MemberTarget("m", KUBECONFIG)
    other = {**CM, "metadata": {"name": "b", "namespace": "n"}}

    async def deliver(objects: list[dict[str, Any]], to: MemberTarget = target) -> None:
        await _provisioned(memory, to, objects, KEY)

    await deliver([CM])
    await deliver([CM])
    assert member.prunes == 1
    await deliver([CM, other])  # another object set: what the last one left must be looked for
    await deliver([CM])
    assert member.prunes == 3
    await deliver([CM], MemberTarget("m", KUBECONFIG + b"\n"))  # rotated credentials
    assert member.prunes == 4
    await deliver([CM], MemberTarget("m", KUBECONFIG + b"\n"))
    assert member.prunes == 4


async def test_a_summary_nobody_delivered_before_is_not_searched_for_leftovers_on_its_first_delivery(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    member = _Member(monkeypatch)
    memory = SummaryMemory()
    target = MemberTarget("m", KUBECONFIG)
    other = {**CM, "metadata": {"name": "b", "namespace": "n"}}
    assert not memory.first_alone(SummaryKey("fleet", "earlier"), None)  # this process delivers from now
    created = datetime.now(UTC) + timedelta(seconds=10)

    async def deliver(objects: list[dict[str, Any]], key: SummaryKey = KEY) -> None:
        await _provisioned(memory, target, objects, key, created)

    await deliver([CM, other])
    await deliver([CM, other])
    assert member.prunes == 0
    await deliver([CM])  # what its own first delivery left behind is looked for
    assert member.prunes == 1
    memory.forget(KEY)
    await deliver([CM])  # created again: its cluster may hold what the deleted one could not remove
    assert member.prunes == 2
    older = SummaryKey("fleet", "older")
    created = datetime.now(UTC) - timedelta(minutes=1)  # may have been delivered by another process
    await deliver([CM], older)
    assert member.prunes == 3
