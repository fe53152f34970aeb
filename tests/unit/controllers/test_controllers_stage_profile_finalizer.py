"""A stage profile is applied with the withdrawal finalizer the profile controller would otherwise add
in a write of its own, except to a profile being deleted that no longer has it: the API server
refuses a new finalizer on an object being deleted."""

from __future__ import annotations

from typing import Any

from fleetwave.controllers.sveltos import profile_withdrawal, promotion

FINALIZER = profile_withdrawal.FINALIZER


def _profile(*, deleting: bool, finalizers: list[str]) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "web-dev", "finalizers": finalizers}
    if deleting:
        meta["deletionTimestamp"] = "2026-12-03T07:00:00Z"
    return {"metadata": meta}


def test_a_new_or_live_profile_is_applied_with_the_finalizer() -> None:
    assert promotion._finalizers(None) == [FINALIZER]
    assert promotion._finalizers(_profile(deleting=False, finalizers=[])) == [FINALIZER]
    assert promotion._finalizers(_profile(deleting=False, finalizers=[FINALIZER])) == [FINALIZER]


def test_a_profile_being_deleted_keeps_the_finalizer_while_it_has_it() -> None:
    # Left out, server-side apply would drop it as a field this manager no longer claims.
    assert promotion._finalizers(_profile(deleting=True, finalizers=[FINALIZER])) == [FINALIZER]


def test_a_profile_being_deleted_without_it_is_not_given_it_again() -> None:
    assert promotion._finalizers(_profile(deleting=True, finalizers=[])) == []
    assert promotion._finalizers(_profile(deleting=True, finalizers=["other.io/keep"])) == []
