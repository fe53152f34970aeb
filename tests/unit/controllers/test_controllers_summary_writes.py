"""A promotion writes its stage profile's new summaries itself (`write_ahead`), exactly as the
profile's own pass would, and nothing that pass would not write."""

from __future__ import annotations

import datetime as dt
from types import SimpleNamespace
from typing import Any

import pytest

from fleetwave.api import families
from fleetwave.api.sveltos import ClusterProfile
from fleetwave.controllers import content, rollout_common, summary_writes
from fleetwave.controllers import summary_status as ss
from fleetwave.controllers.context import Context

RESOLVED = content.Resolved(hash="h" * 64, body={})


class _Obj:
    def __init__(self, body: dict[str, Any]) -> None:
        self._body = body
        self.metadata = SimpleNamespace(**body["metadata"])

    def to_dict(self) -> dict[str, Any]:
        return self._body


def _member(name: str, *, ready: bool) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "fleet", "labels": {"env": "dev"}},
        "status": {"ready": ready},
    }


class _Cache:
    family = families.NATIVE

    def __init__(self, members: list[dict[str, Any]]) -> None:
        self.members = members

    def list(self, kind: str) -> list[dict[str, Any]]:
        return self.members if kind == "MemberCluster" else []

    def get(self, kind: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        return None  # no summary written yet

    def memo(self, name: str, kind: str, build: Any, *, everywhere: bool = False) -> Any:
        return build()


class _Client:
    def __init__(self) -> None:
        self.applied: list[dict[str, Any]] = []

    async def apply(self, obj: Any, **_: Any) -> Any:
        body = obj.to_dict() if hasattr(obj, "to_dict") else dict(obj)
        self.applied.append(body)
        return _Obj(
            {"metadata": {"name": body["metadata"]["name"], "resourceVersion": str(len(self.applied))}}
        )


def _ctx(client: _Client, members: list[dict[str, Any]] | None = None) -> Context:
    if members is None:
        members = [_member("a", ready=True), _member("b", ready=False), _member("c", ready=True)]
    return Context(
        client=client,  # type: ignore[arg-type]
        cache=_Cache(members),  # type: ignore[arg-type]
        recorder=None,  # type: ignore[arg-type]
        helm=None,  # type: ignore[arg-type]
        health=None,  # type: ignore[arg-type]
        namespace="fleetwave-system",
        clock=lambda: dt.datetime(2026, 11, 26, tzinfo=dt.UTC),
    )


_VERSIONS = iter(range(1, 1000))


def _stage_profile(refs: list[str], **spec: Any) -> _Obj:
    # Each its own resourceVersion: specs are parsed once per version.
    version = str(next(_VERSIONS))
    return _Obj(
        {
            "apiVersion": "fleetwave.io/v1alpha1",
            "kind": "ClusterProfile",
            "metadata": {"name": "promo-dev", "uid": "u-1", "resourceVersion": version, "generation": 1},
            "spec": {
                "clusterRefs": [{"namespace": "fleet", "name": r} for r in refs],
                "syncMode": "Continuous",
                "policyRefs": [{"kind": "ConfigMap", "name": "content", "namespace": "fleetwave-system"}],
                **spec,
            },
        }
    )


async def test_the_summaries_written_ahead_are_the_ones_the_profile_pass_writes() -> None:
    owner = _stage_profile(["a", "b", "c"])
    ahead = _Client()
    wrote_all = await summary_writes.write_ahead(
        _ctx(ahead), owner, RESOLVED, ["fleet/a", "fleet/b", "fleet/c"]
    )
    # b is not ready: the engine would not start it, so neither is it written ahead; the profile's
    # pass is then told it has work (not all were written).
    assert wrote_all is False
    assert [b["metadata"]["name"] for b in ahead.applied] == [
        ss.summary_name("promo-dev", "a"),
        ss.summary_name("promo-dev", "c"),
    ]
    by_profile = _Client()
    parsed = rollout_common.parse_as(owner.to_dict(), "ClusterProfile", ClusterProfile)
    await summary_writes.apply_all(_ctx(by_profile), parsed, RESOLVED, ["fleet/a", "fleet/c"])
    assert ahead.applied == by_profile.applied  # the profile's pass finds them written, byte for byte
    assert ahead.applied[0]["metadata"]["ownerReferences"][0]["uid"] == "u-1"


@pytest.mark.parametrize(
    ("refs", "spec", "why"),
    [
        (["a"], {"dependsOn": ["base"]}, "dependsOn holds clusters only the profile's pass knows of"),
        (["a"], {"clusterSelector": {"matchLabels": {"env": "dev"}}}, "invalid: refs and a selector"),
        (["c"], {}, "a does not belong to the profile (yet)"),
    ],
)
async def test_nothing_is_written_ahead_that_the_profile_pass_might_not_write(
    refs: list[str], spec: dict[str, Any], why: str
) -> None:
    client = _Client()
    assert not await summary_writes.write_ahead(
        _ctx(client), _stage_profile(refs, **spec), RESOLVED, ["fleet/a"]
    )
    assert client.applied == [], why


async def test_all_written_ahead_says_so_and_a_large_batch_is_left_to_the_profile() -> None:
    client = _Client()
    both = ["fleet/a", "fleet/c"]
    assert await summary_writes.write_ahead(_ctx(client), _stage_profile(["a", "c"]), RESOLVED, both)
    assert len(client.applied) == 2
    many = [f"m{i}" for i in range(summary_writes.WRITE_AHEAD_MAX + 1)]
    big = _Client()
    ctx = _ctx(big, [_member(m, ready=True) for m in many])
    keys = [f"fleet/{m}" for m in many]
    assert not await summary_writes.write_ahead(ctx, _stage_profile(many), RESOLVED, keys)
    assert big.applied == []  # a worker held for many writes holds every promotion behind it


async def test_nothing_is_written_ahead_for_a_profile_being_deleted() -> None:
    owner = _stage_profile(["a"])
    owner.to_dict()["metadata"]["deletionTimestamp"] = "2026-11-26T10:00:00Z"
    client = _Client()
    assert not await summary_writes.write_ahead(_ctx(client), owner, RESOLVED, ["fleet/a"])
    assert client.applied == []
