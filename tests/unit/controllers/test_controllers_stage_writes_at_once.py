"""A stage profile that exists and only gains clusters (or a new pin) is written together with its
summaries: what the summaries carry of it is known before the API server answers."""

from __future__ import annotations

import asyncio
import copy
import datetime as dt
from types import SimpleNamespace
from typing import Any

import pytest

from fleetwave.api import families
from fleetwave.api.sveltos import ClusterProfile
from fleetwave.controllers import content, promotion, summary_writes
from fleetwave.controllers import rollout_common as common
from fleetwave.controllers import summary_status as ss
from fleetwave.controllers.context import Context

RESOLVED = content.Resolved(hash="h" * 64, body={})
NAME = "promo-dev"


def _stored(refs: list[str], *, pin: str = "old", version: str = "7", **spec: Any) -> dict[str, Any]:
    """A stage profile as the API server stores it: a schema default (`tier`) filled in."""
    return {
        "apiVersion": "fleetwave.io/v1alpha1",
        "kind": "ClusterProfile",
        "metadata": {
            "name": NAME,
            "uid": "u-1",
            "resourceVersion": version,
            "generation": 3,
            "annotations": {common.PINNED_ANNOTATION: pin, "someone.else/note": "kept"},
        },
        "spec": {
            "clusterRefs": [{"namespace": "fleet", "name": r} for r in refs],
            "syncMode": "Continuous",
            "policyRefs": [{"kind": "ConfigMap", "name": "content", "namespace": "fleetwave-system"}],
            "tier": 100,
            **spec,
        },
        "status": {"matchingClusters": []},
    }


def _body(refs: list[str], *, pin: str = "new", **spec: Any) -> dict[str, Any]:
    """What a promotion's pass applies: no schema defaults, the pin it wants."""
    return {
        "apiVersion": "fleetwave.io/v1alpha1",
        "kind": "ClusterProfile",
        "metadata": {"name": NAME, "annotations": {common.PINNED_ANNOTATION: pin}},
        "spec": {
            "clusterRefs": [{"namespace": "fleet", "name": r} for r in refs],
            "syncMode": "Continuous",
            "policyRefs": [{"kind": "ConfigMap", "name": "content", "namespace": "fleetwave-system"}],
            **spec,
        },
    }


def test_a_profile_gaining_clusters_is_known_as_it_will_be_stored() -> None:
    ahead = promotion._as_stored(_stored(["a"]), _body(["a", "b"]))
    assert ahead is not None
    assert ahead["metadata"]["uid"] == "u-1"
    assert "resourceVersion" not in ahead["metadata"]  # no version the cache has parsed
    assert ahead["metadata"]["annotations"] == {
        common.PINNED_ANNOTATION: "new",
        "someone.else/note": "kept",
    }
    assert ahead["spec"] == _stored(["a", "b"])["spec"]  # the default kept, the refs moved


def test_a_new_profile_or_another_change_waits_for_the_api_servers_answer() -> None:
    assert promotion._as_stored(None, _body(["a"])) is None
    assert promotion._as_stored(_stored(["a"]), _body(["a"], syncMode="OneTime")) is None
    deleting = _stored(["a"])
    deleting["metadata"]["deletionTimestamp"] = "2026-11-27T00:00:00Z"
    assert promotion._as_stored(deleting, _body(["a", "b"])) is None


class _Obj:
    def __init__(self, body: dict[str, Any]) -> None:
        self._body = body
        self.metadata = SimpleNamespace(**body["metadata"])

    def to_dict(self) -> dict[str, Any]:
        return self._body


class _Cache:
    family = families.NATIVE

    def __init__(self, profile: dict[str, Any]) -> None:
        self.profile = profile
        self.members = [
            {"metadata": {"name": n, "namespace": "fleet", "labels": {}}, "status": {"ready": True}}
            for n in ("a", "b")
        ]

    def list(self, kind: str) -> list[dict[str, Any]]:
        return self.members if kind == "MemberCluster" else []

    def get(self, kind: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        return self.profile if kind == "ClusterProfile" else None

    def memo(self, name: str, kind: str, build: Any, *, everywhere: bool = False) -> Any:
        return build()


class _Server:
    """Stores a profile as the API server would (defaults from the stored one, a new version) and
    answers it only once a summary write has arrived: written one after the other, the stage's
    writes never finish."""

    def __init__(self, stored: dict[str, Any]) -> None:
        self.stored = stored
        self.applied: list[dict[str, Any]] = []
        self.summary_seen = asyncio.Event()

    async def apply(self, obj: Any, **_: Any) -> Any:
        body = obj.to_dict() if hasattr(obj, "to_dict") else dict(obj)
        self.applied.append(body)
        if body["kind"] == "ClusterSummary":
            self.summary_seen.set()
            return _Obj({"metadata": {"name": body["metadata"]["name"], "resourceVersion": "9"}})
        await asyncio.wait_for(self.summary_seen.wait(), 2)
        stored = copy.deepcopy(self.stored)
        stored["metadata"]["resourceVersion"] = "8"
        stored["metadata"]["annotations"].update(body["metadata"]["annotations"])
        stored["spec"] = {**stored["spec"], **body["spec"]}
        return _Obj(stored)


def _ctx(client: _Server, cache: _Cache) -> Context:
    return Context(
        client=client,  # type: ignore[arg-type]
        cache=cache,  # type: ignore[arg-type]
        recorder=None,  # type: ignore[arg-type]
        helm=None,  # type: ignore[arg-type]
        health=None,  # type: ignore[arg-type]
        namespace="fleetwave-system",
        clock=lambda: dt.datetime(2026, 11, 27, tzinfo=dt.UTC),
    )


def _run() -> Any:
    owner = _Obj({"metadata": {"name": "promo", "uid": "p-1"}})
    return SimpleNamespace(parsed=owner, obj=owner, resolved=RESOLVED)


async def test_the_summaries_go_out_while_the_profile_write_is_in_flight() -> None:
    stored = _stored(["a"])
    server = _Server(stored)
    ctx = _ctx(server, _Cache(stored))
    wanted = promotion._StageProfile(
        name=NAME,
        stage="dev",
        spec={k: v for k, v in _body([])["spec"].items() if k != "clusterRefs"},
        annotations={common.PINNED_ANNOTATION: "new"},
    )
    await promotion._deliver_stage(ctx, _run(), wanted, ("fleet/a", "fleet/b"))
    kinds = [b["kind"] for b in server.applied]
    assert kinds.count("ClusterProfile") == 1
    written = [b for b in server.applied if b["kind"] == "ClusterSummary"]
    assert [b["metadata"]["name"] for b in written] == [ss.summary_name(NAME, c) for c in ("a", "b")]
    # What the profile's own pass will write from the stored profile: the same bodies, byte for byte.
    again = _Server(stored)
    again.summary_seen.set()
    answered = await again.apply(_body(["a", "b"]))
    parsed = common.parse_as(answered.to_dict(), "ClusterProfile", ClusterProfile)
    await summary_writes.apply_all(_ctx(again, _Cache(stored)), parsed, RESOLVED, ["fleet/a", "fleet/b"])
    assert [b for b in again.applied if b["kind"] == "ClusterSummary"] == written


class _RefusingServer(_Server):
    """Refuses the profile; a summary write stays in flight until it is cancelled."""

    def __init__(self, stored: dict[str, Any]) -> None:
        super().__init__(stored)
        self.cancelled = 0

    async def apply(self, obj: Any, **_: Any) -> Any:
        body = obj.to_dict() if hasattr(obj, "to_dict") else dict(obj)
        if body["kind"] == "ClusterProfile":
            await asyncio.sleep(0.01)  # the summaries' writes are in flight by now
            raise RuntimeError("refused")
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled += 1
            raise


async def test_a_refused_profile_write_leaves_no_summary_write_behind() -> None:
    stored = _stored(["a"])
    server = _RefusingServer(stored)
    wanted = promotion._StageProfile(
        name=NAME,
        stage="dev",
        spec={k: v for k, v in _body([])["spec"].items() if k != "clusterRefs"},
        annotations={common.PINNED_ANNOTATION: "new"},
    )
    with pytest.raises(RuntimeError, match="refused"):
        await promotion._deliver_stage(_ctx(server, _Cache(stored)), _run(), wanted, ("fleet/a", "fleet/b"))
    await asyncio.sleep(0)  # the cancellations land
    assert server.cancelled == 2
