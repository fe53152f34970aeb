"""What an apply returned is kept per member server and object, without status'd objects, bounded."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from fleetwave.delivery import content as ct
from fleetwave.delivery.known_versions import KnownVersions


def _live(name: str, version: str = "7", status: Any = None, **data: str) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": name,
            "namespace": "apps",
            "uid": f"uid-{name}",
            "resourceVersion": version,
            "managedFields": [{"manager": "fleetwave", "fieldsV1": {"f:data": {}}}],
            "labels": {ct.INVENTORY_LABEL: "inv"},
        },
        "data": data,
    }
    if status is not None:
        obj["status"] = status
    return obj


def test_an_applied_object_is_kept_with_its_version_and_uid_but_not_its_managed_fields() -> None:
    known = KnownVersions()
    live = _live("a", "7", v="1")
    known.keep("server-1", ct.ref_of(live), live)

    kept = known.get("server-1", ct.ref_of(live))
    assert kept is not None
    assert kept["metadata"]["resourceVersion"] == "7"
    assert kept["metadata"]["uid"] == "uid-a"
    assert "managedFields" not in kept["metadata"]
    assert kept["metadata"]["labels"] == {ct.INVENTORY_LABEL: "inv"}
    assert kept["data"] == {"v": "1"}
    # Another server (or other credentials to the same one) knows nothing of it.
    assert known.get("server-2", ct.ref_of(live)) is None


@pytest.mark.parametrize(
    ("status", "kept"),
    [
        ({"loadBalancer": {}}, True),  # a ClusterIP Service's: says nothing
        ({}, True),
        ({"phase": "Active"}, False),  # a Namespace's
        ({"conditions": [{"type": "Available", "status": "True"}]}, False),
    ],
)
def test_an_object_whose_status_says_something_is_not_kept(status: dict[str, Any], kept: bool) -> None:
    known = KnownVersions()
    live = _live("a", status=status)
    known.keep("s", ct.ref_of(live), live)
    assert (known.get("s", ct.ref_of(live)) is not None) is kept


@pytest.mark.parametrize(
    ("status", "kept"),
    [
        ({"phase": "Active"}, True),  # set at creation, moved by nothing but the deletion
        ({"phase": "Terminating"}, False),
        ({"phase": "Active", "conditions": [{"type": "NamespaceDeletionDiscoveryFailure"}]}, False),
    ],
)
def test_an_active_namespace_is_kept(status: dict[str, Any], kept: bool) -> None:
    known = KnownVersions()
    live = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "apps", "uid": "uid-ns", "resourceVersion": "3"},
        "spec": {"finalizers": ["kubernetes"]},
        "status": status,
    }
    known.keep("s", ct.ref_of(live), live)
    assert (known.get("s", ct.ref_of(live)) is not None) is kept


def test_a_later_apply_replaces_the_entry_and_one_with_status_or_no_version_drops_it() -> None:
    known = KnownVersions()
    ref = ct.ref_of(_live("a"))
    known.keep("s", ref, _live("a", "7"))
    known.keep("s", ref, _live("a", "9"))
    assert (known.get("s", ref) or {})["metadata"]["resourceVersion"] == "9"
    known.keep("s", ref, _live("a", "10", status={"phase": "Active"}))
    assert known.get("s", ref) is None
    known.keep("s", ref, _live("a", "11"))
    known.keep("s", ref, {**_live("a"), "metadata": {"name": "a", "namespace": "apps"}})
    assert known.get("s", ref) is None
    known.keep("s", ref, _live("a", "12"))
    known.forget("s", ref)
    assert len(known) == 0


def test_the_least_recently_used_object_goes_first_past_the_limit() -> None:
    known = KnownVersions(limit=2)
    a, b, c = (_live(n) for n in "abc")
    known.keep("s", ct.ref_of(a), a)
    known.keep("s", ct.ref_of(b), b)
    assert known.get("s", ct.ref_of(a)) is not None  # a used: b is now the oldest
    known.keep("s", ct.ref_of(c), c)
    assert len(known) == 2
    assert known.get("s", ct.ref_of(b)) is None
    assert known.get("s", ct.ref_of(a)) is not None
    assert known.get("s", ct.ref_of(c)) is not None


async def test_applies_of_one_object_on_one_server_take_turns_others_do_not_wait() -> None:
    known = KnownVersions()
    ref = ct.ref_of(_live("a"))
    other = ct.ref_of(_live("b"))
    log: list[str] = []

    async def apply(server: str, which: ct.ObjectRef, tag: str) -> None:
        async with known.turn(server, which):
            log.append(f"{tag} in")
            await asyncio.sleep(0.01)
            log.append(f"{tag} out")

    await asyncio.gather(
        apply("s1", ref, "first"), apply("s1", ref, "second"), apply("s1", other, "b"), apply("s2", ref, "s2")
    )
    # The same object on the same server: one after the other; another object or server: alongside.
    assert log.index("first out") < log.index("second in")
    assert log.index("b in") < log.index("first out")
    assert log.index("s2 in") < log.index("first out")
    assert known._turns == {}  # nothing kept once no apply waits


async def test_a_failed_apply_gives_up_its_turn() -> None:
    known = KnownVersions()
    ref = ct.ref_of(_live("a"))
    with pytest.raises(RuntimeError):
        async with known.turn("s1", ref):
            raise RuntimeError("the member went away")
    async with asyncio.timeout(1):
        async with known.turn("s1", ref):
            pass
    assert known._turns == {}


def test_an_object_with_status_is_known_as_its_watch_saw_it_if_not_older_than_our_apply() -> None:
    seen: dict[str, Any] = {}
    known = KnownVersions(watched=lambda server, ref: seen.get(server))
    applied = _live("a", "20", status={"replicas": 1}, v="1")
    ref = ct.ref_of(applied)
    known.keep("s", ref, applied)
    assert known.get("s", ref) is None  # with status, and no watch saw it: read it
    seen["s"] = _live("a", "19", status={"replicas": 1}, v="1")
    assert known.get("s", ref) is None  # the watch is behind our own apply
    seen["s"] = _live("a", "23", status={"replicas": 2}, v="1")
    kept = known.get("s", ref)
    assert kept is not None
    assert kept["metadata"]["resourceVersion"] == "23"
    assert "status" not in kept
    assert "managedFields" not in kept["metadata"]
    replaced = _live("a", "30", v="1")
    replaced["metadata"]["uid"] = "uid-other"
    seen["s"] = replaced
    assert known.get("s", ref) is None  # another object of that name: not the one we applied
    # Never applied here: as the watch saw it.
    seen["t"] = _live("b", "5", status={"replicas": 1})
    found = known.get("t", ct.ref_of(seen["t"]))
    assert found is not None
    assert found["metadata"]["resourceVersion"] == "5"


def test_a_settled_object_a_watch_saw_change_since_is_known_as_the_watch_saw_it() -> None:
    # A Deployment the API server has just created comes back with `status: {}` (settled); its
    # controller writes the status next. A member watch that saw that write knows the version.
    seen: dict[str, Any] = {}
    known = KnownVersions(watched=lambda server, ref: seen.get(server))
    created = _live("a", "20", status={}, v="1")
    ref = ct.ref_of(created)
    known.keep("s", ref, created)
    assert (known.get("s", ref) or {})["metadata"]["resourceVersion"] == "20"  # nothing seen since
    seen["s"] = _live("a", "20", status={}, v="1")
    assert (known.get("s", ref) or {})["metadata"]["resourceVersion"] == "20"  # seen at our version
    seen["s"] = _live("a", "24", status={"replicas": 1}, v="1")
    kept = known.get("s", ref)
    assert kept is not None
    assert kept["metadata"]["resourceVersion"] == "24"
    assert "status" not in kept
    other = _live("a", "30", v="1")
    other["metadata"]["uid"] = "uid-other"
    seen["s"] = other
    # Another object of that name (deleted and made again): ours as our apply left it, which its
    # version precondition then judges.
    assert (known.get("s", ref) or {})["metadata"]["resourceVersion"] == "20"
