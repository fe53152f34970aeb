"""The placement finalizer's writes race with every other write to the placement: a conflict is
retried on the newer version, not raised into the log as a failed reconcile."""

from __future__ import annotations

import datetime as dt
from types import SimpleNamespace
from typing import Any

import pytest
from lightkube import ApiError
from lightkube.models import meta_v1

from fleetwave.api import families
from fleetwave.controllers.context import Context
from fleetwave.controllers.kubefleet import naming as nm
from fleetwave.controllers.kubefleet import placement_delete
from fleetwave.runtime.controller import Result


class _Placement:
    def __init__(self, metadata: dict[str, Any], spec: dict[str, Any]) -> None:
        self._body = {"apiVersion": "fleetwave.io/v1alpha1", "kind": "ClusterResourcePlacement"}
        self._body |= {"metadata": metadata, "spec": spec}
        self.metadata = SimpleNamespace(**metadata)

    def to_dict(self) -> dict[str, Any]:
        return self._body


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


def _placement(*, deleting: bool, finalizers: list[str]) -> _Placement:
    meta = {"name": "crp", "resourceVersion": "5", "finalizers": finalizers}
    if deleting:
        meta["deletionTimestamp"] = "2026-11-26T10:00:00Z"
    spec = {"strategy": {"deleteStrategy": {"propagationPolicy": "Abandon"}}}
    return _Placement(meta, spec)


@pytest.mark.parametrize("deleting", [False, True])
async def test_a_conflicting_finalizer_write_is_retried_not_raised(deleting: bool) -> None:
    client = _Client(409)
    finalizers = [placement_delete.FINALIZER] if deleting else []
    obj = _placement(deleting=deleting, finalizers=finalizers)
    result = await placement_delete.guard(_ctx(client), nm.CLUSTER, obj, [])
    assert result == Result(requeue=True)
    assert client.patches[0]["metadata"]["resourceVersion"] == "5"  # the write was guarded


async def test_a_released_finalizer_ends_the_reconcile_and_other_errors_still_raise() -> None:
    deleting = _placement(deleting=True, finalizers=["other", placement_delete.FINALIZER])
    ok = _Client(None)
    assert await placement_delete.guard(_ctx(ok), nm.CLUSTER, deleting, []) == Result()
    assert ok.patches[0]["metadata"]["finalizers"] == ["other"]
    with pytest.raises(ApiError):
        await placement_delete.guard(_ctx(_Client(403)), nm.CLUSTER, deleting, [])
