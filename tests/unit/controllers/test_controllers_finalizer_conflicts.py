"""Finalizer writes race with every other write to their object (a placement's run status, a stage
profile's next batch from its promotion): a conflict is retried on the newer version, not raised
into the log as a failed reconcile; any other error still is."""

from __future__ import annotations

import datetime as dt
from types import SimpleNamespace
from typing import Any

import pytest
from lightkube import ApiError
from lightkube.models import meta_v1

from fleetwave.api import families
from fleetwave.controllers.kubefleet import naming as nm
from fleetwave.controllers.kubefleet import placement_delete
from fleetwave.controllers.kubefleet.executor import DeliveryMemory
from fleetwave.controllers.shared.context import Context
from fleetwave.controllers.sveltos import profile_withdrawal
from fleetwave.controllers.sveltos.profile_withdrawal import Withdrawals
from fleetwave.runtime.controller import Result


class _Client:
    def __init__(self, code: int | None) -> None:
        self.code = code  # what each patch answers: None is success
        self.patches: list[Any] = []

    async def patch(self, resource: Any, name: str, body: Any, **_: Any) -> None:
        self.patches.append(body)
        if self.code is not None:
            raise ApiError(status=meta_v1.Status(code=self.code, message="answered"))


def _ctx(client: _Client) -> Context:
    return Context(
        client=client,  # type: ignore[arg-type]
        cache=SimpleNamespace(family=families.NATIVE),  # type: ignore[arg-type]
        recorder=None,  # type: ignore[arg-type]
        helm=None,  # type: ignore[arg-type]
        health=None,  # type: ignore[arg-type]
        namespace="fleetwave-system",
        clock=lambda: dt.datetime(2026, 11, 26, tzinfo=dt.UTC),
    )


class _Placement:
    def __init__(self, *, deleting: bool, finalizers: list[str]) -> None:
        meta: dict[str, Any] = {"name": "crp", "resourceVersion": "5", "finalizers": finalizers}
        if deleting:
            meta["deletionTimestamp"] = "2026-11-26T10:00:00Z"
        self._body = {
            "apiVersion": "fleetwave.io/v1alpha1",
            "kind": "ClusterResourcePlacement",
            "metadata": meta,
            "spec": {"strategy": {"deleteStrategy": {"propagationPolicy": "Abandon"}}},
        }
        self.metadata = SimpleNamespace(**meta)

    def to_dict(self) -> dict[str, Any]:
        return self._body


@pytest.mark.parametrize("deleting", [False, True])
async def test_a_conflicting_placement_finalizer_write_is_retried_not_raised(deleting: bool) -> None:
    client = _Client(409)
    finalizers = [placement_delete.FINALIZER] if deleting else []
    obj = _Placement(deleting=deleting, finalizers=finalizers)
    result = await placement_delete.guard(_ctx(client), DeliveryMemory(), nm.CLUSTER, obj, [])
    assert result == Result(requeue=True)
    assert client.patches[0]["metadata"]["resourceVersion"] == "5"  # the write was guarded


async def test_a_released_placement_finalizer_ends_the_reconcile_and_other_errors_still_raise() -> None:
    deleting = _Placement(deleting=True, finalizers=["other", placement_delete.FINALIZER])
    ok = _Client(None)
    assert await placement_delete.guard(_ctx(ok), DeliveryMemory(), nm.CLUSTER, deleting, []) == Result()
    assert ok.patches[0]["metadata"]["finalizers"] == ["other"]
    with pytest.raises(ApiError):
        await placement_delete.guard(_ctx(_Client(403)), DeliveryMemory(), nm.CLUSTER, deleting, [])


def _profile() -> dict[str, Any]:
    return {"metadata": {"name": "web-dev", "uid": "u", "resourceVersion": "5", "finalizers": []}}


async def test_a_conflicting_profile_finalizer_write_is_retried_not_raised() -> None:
    client = _Client(409)
    assert await profile_withdrawal.guard(_ctx(client), Withdrawals(), _profile()) == Result(requeue=True)
    assert client.patches[0]["metadata"]["resourceVersion"] == "5"


async def test_a_written_profile_finalizer_ends_the_pass_and_other_errors_still_raise() -> None:
    assert await profile_withdrawal.guard(_ctx(_Client(None)), Withdrawals(), _profile()) == Result()
    with pytest.raises(ApiError):
        await profile_withdrawal.guard(_ctx(_Client(403)), Withdrawals(), _profile())
