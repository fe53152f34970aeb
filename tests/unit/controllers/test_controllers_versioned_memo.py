"""Facts derived from a cached object are derived once per resourceVersion, and never kept past it:
a new version replaces the old one."""

from __future__ import annotations

from typing import Any

from fleetwave.controllers.shared.versioned_memo import VersionedMemo


def _obj(version: str, phase: str, name: str = "s") -> dict[str, Any]:
    meta = {"name": name, "namespace": "fleet", "uid": "u"}
    if version:
        meta["resourceVersion"] = version
    return {"metadata": meta, "status": {"phase": phase}}


def test_one_derivation_per_version_and_extra_input() -> None:
    memo: VersionedMemo[str] = VersionedMemo(16)
    calls: list[str] = []

    def phase(obj: Any) -> str:
        calls.append(obj["metadata"].get("resourceVersion", ""))
        return str(obj["status"]["phase"])

    assert memo.get(_obj("1", "Applying"), "h1", phase) == "Applying"
    assert memo.get(_obj("1", "Applying"), "h1", phase) == "Applying"
    assert calls == ["1"]
    assert memo.get(_obj("2", "Applied"), "h1", phase) == "Applied"  # a new version: derived again
    assert memo.get(_obj("2", "Applied"), "h2", phase) == "Applied"  # another extra input: too
    assert memo.get(_obj("2", "Applied", name="t"), "h1", phase) == "Applied"  # another object: too
    assert calls == ["1", "2", "2", "2"]


def test_an_object_without_a_version_is_derived_every_time() -> None:
    memo: VersionedMemo[str] = VersionedMemo(16)
    assert memo.get(_obj("", "Applying"), None, lambda o: o["status"]["phase"]) == "Applying"
    assert memo.get(_obj("", "Applied"), None, lambda o: o["status"]["phase"]) == "Applied"


def test_a_new_version_replaces_the_old_one_so_the_memo_holds_what_is_live() -> None:
    memo: VersionedMemo[str] = VersionedMemo(3)
    calls: list[str] = []

    def phase(obj: Any) -> str:
        calls.append(f"{obj['metadata']['name']}@{obj['metadata']['resourceVersion']}")
        return str(obj["status"]["phase"])

    # Three objects, each updated five times: the memo of three never fills, and each object's
    # versions are derived once each.
    for version in range(1, 6):
        for name in ("a", "b", "c"):
            assert memo.get(_obj(str(version), f"v{version}", name=name), None, phase) == f"v{version}"
            assert memo.get(_obj(str(version), f"v{version}", name=name), None, phase) == f"v{version}"
    assert len(calls) == 15
    assert len(memo) == 3


def test_a_full_memo_starts_over() -> None:
    memo: VersionedMemo[int] = VersionedMemo(2)
    calls = []

    def count(obj: Any) -> int:
        calls.append(obj["metadata"]["name"])
        return len(calls)

    for name in ("a", "b", "c", "a"):
        memo.get(_obj("1", "x", name=name), None, count)
    # "c" found it full (of "a" and "b", say since deleted) and cleared it: "a" is derived again,
    # and the memo never held more than 2.
    assert calls == ["a", "b", "c", "a"]
    assert len(memo) == 2
