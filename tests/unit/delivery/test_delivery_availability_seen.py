"""A readiness judgement right after a delivery reads the objects as their applies returned them,
and asks the member only for those it was not given."""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import Any

import pytest

from fleetwave.delivery import availability
from fleetwave.delivery.target import MemberTarget, MemberUnreachable

NS = ("v1", "Namespace", None, "web")
DEPLOY = ("apps/v1", "Deployment", "web", "web")


def _deployment(generation: int, observed: int) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "web", "generation": generation},
        "spec": {"replicas": 1},
        "status": {
            "observedGeneration": observed,
            "replicas": 1,
            "updatedReplicas": 1,
            "availableReplicas": 1,
            "readyReplicas": 1,
            "conditions": [{"type": "Available", "status": "True"}],
        },
    }


NAMESPACE = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "web"}}
NAMESPACE["status"] = {"phase": "Active"}


class _Unreachable(MemberTarget):
    """A member that answers nothing: any read of it fails, and says how many were tried."""

    opened = 0

    @asynccontextmanager
    async def session(self) -> Any:  # type: ignore[override]
        type(self).opened += 1
        raise MemberUnreachable(self.name, "connection refused")
        yield


@pytest.fixture
def member() -> _Unreachable:
    _Unreachable.opened = 0
    return _Unreachable("m1", b"")


async def test_objects_the_applies_returned_are_judged_without_asking_the_member(
    member: _Unreachable,
) -> None:
    seen = {NS: NAMESPACE, DEPLOY: _deployment(4, 4)}
    assert await availability.judge(member, [NS, DEPLOY], wall_seconds=5, seen=seen) == (True, "ready")
    just_applied = {NS: NAMESPACE, DEPLOY: _deployment(4, 3)}  # its controller has not seen it yet
    ok, message = await availability.judge(member, [NS, DEPLOY], wall_seconds=5, seen=just_applied)
    assert not ok
    assert message.startswith("Deployment web/web: ")
    assert member.opened == 0


async def test_an_object_not_given_is_read_from_the_member(member: _Unreachable) -> None:
    ok, message = await availability.judge(member, [NS, DEPLOY], wall_seconds=5, seen={NS: NAMESPACE})
    assert (ok, message) == (False, "cluster m1 unreachable: connection refused")
    assert member.opened == 1
