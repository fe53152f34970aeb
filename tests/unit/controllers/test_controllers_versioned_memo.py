"""Facts derived from a cached object are derived once per resourceVersion, and never kept past it."""

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


def test_a_full_memo_starts_over() -> None:
    memo: VersionedMemo[int] = VersionedMemo(2)
    calls = []

    def count(obj: Any) -> int:
        calls.append(obj["metadata"]["resourceVersion"])
        return len(calls)

    for version in ("1", "2", "3", "1"):
        memo.get(_obj(version, "x"), None, count)
    # "3" found it full and cleared it: "1" is derived again, and the memo never held more than 2.
    assert calls == ["1", "2", "3", "1"]
    assert len(memo._values) == 2
