"""A ClusterProfile's status that only moves clusters from updating to updated is progress, held
back like a promotion's (ADR 0126); anything else is written at once."""

from __future__ import annotations

from typing import Any

from fleetwave.controllers.sveltos import profile_progress, rollout_facts


def _written(
    updated: tuple[str, ...],
    started: tuple[str, ...] = ("m1", "m2", "m3"),
    *,
    failed: tuple[str, ...] = (),
    phase: str = "Progressing",
    content_hash: str = "h1",
) -> dict[str, Any]:
    """The profile's status the way `rollout_facts.profile_status` lays it out, with its record."""
    done = f"{len(updated)}/{len(started)} clusters done"
    refs = lambda names: [rollout_facts.cluster_ref(c) for c in names]  # noqa: E731
    condition = {"type": "Progressing", "status": "True", "reason": "Progressing", "message": done}
    return {
        "matchingClusters": refs(("m1", "m2", "m3", "m4")),
        "updatingClusters": {"hash": content_hash, "clusters": refs(c for c in started if c not in updated)},
        "updatedClusters": {"hash": content_hash, "clusters": refs(updated)},
        "failedClusters": [
            {"clusterRef": rollout_facts.cluster_ref(c), "failureMessage": "x"} for c in failed
        ]
        or None,
        "conditions": [condition],
        "rollout": {
            "phase": phase,
            "message": done,
            "stages": [
                {"name": "all", "phase": "Progressing", "started": list(started), "completed": len(updated)}
            ],
            "conditions": [condition],
        },
    }


def test_clusters_becoming_updated_are_progress() -> None:
    assert profile_progress.progress_only(_written(()), _written(("m1",)))
    assert profile_progress.progress_only(_written(("m1",)), _written(("m1", "m2", "m3")))


def test_a_change_anyone_acts_on_is_written_at_once() -> None:
    before = _written(("m1",))
    assert not profile_progress.progress_only(before, _written(("m1",)))  # nothing to write
    assert not profile_progress.progress_only(before, _written(("m1",), ("m1", "m2", "m3", "m4")))  # started
    assert not profile_progress.progress_only(before, _written(()))  # went back to updating
    assert not profile_progress.progress_only(before, _written(("m1",), failed=("m2",)))
    assert not profile_progress.progress_only(before, _written(("m1", "m2"), content_hash="h2"))
    assert not profile_progress.progress_only(before, _written(("m1", "m2"), phase="Succeeded"))
    narrower = _written(("m1", "m2"))
    narrower["matchingClusters"] = narrower["matchingClusters"][:3]
    assert not profile_progress.progress_only(before, narrower)  # m4 no longer matches
    turned = _written(("m1", "m2"))
    turned["conditions"][0]["status"] = "False"
    assert not profile_progress.progress_only(before, turned)


def test_only_a_rollout_in_progress_holds_anything_back() -> None:
    assert not profile_progress.progress_only({}, _written(("m1",)))  # a first status
    assert not profile_progress.progress_only(_written(("m1",), phase="Succeeded"), _written(("m1", "m2")))
