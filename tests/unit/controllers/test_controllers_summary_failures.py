"""maxConsecutiveFailures and tiers in the pure part of ClusterSummary status (ADR 0063)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from fleetwave.controllers.sveltos import summary_status as ss
from fleetwave.delivery import manifests

NOW = dt.datetime(2026, 11, 24, 12, 0, tzinfo=dt.UTC)


def _failed(digest: str = "h1") -> ss.Outcome:
    return ss.Outcome(
        "c1", (ss.Feature(ss.FEATURE_RESOURCES, "Failed", digest, "conflict: already deployed"),)
    )


def _run(outcomes: list[ss.Outcome], limit: int | None, generation: int = 1) -> list[dict[str, Any]]:
    previous: dict[str, Any] = {}
    bodies = []
    for outcome in outcomes:
        previous = ss.status_body(
            outcome, generation=generation, now=NOW, previous=previous, max_failures=limit
        )
        bodies.append(previous)
    return bodies


def test_failures_of_the_same_content_are_counted_and_the_limit_gives_up_with_a_message() -> None:
    first, second = _run([_failed(), _failed()], limit=2)
    assert first["featureSummaries"][0]["consecutiveFailures"] == 1
    assert first["featureSummaries"][0]["status"] == "Failed"
    assert not ss.gave_up(first, content_hash="c1", generation=1)

    feature = second["featureSummaries"][0]
    assert (feature["status"], feature["consecutiveFailures"]) == ("FailedNonRetriable", 2)
    assert "gave up after 2 consecutive failures (maxConsecutiveFailures)" in feature["failureMessage"]
    ready = second["conditions"][0]
    assert (ready["status"], ready["reason"]) == ("False", "Failed")  # the rollout still sees a failure
    assert "gave up after 2" in ready["message"]
    assert ss.gave_up(second, content_hash="c1", generation=1)
    # Another revision, or an edit of the summary, tries again.
    assert not ss.gave_up(second, content_hash="c2", generation=1)
    assert not ss.gave_up(second, content_hash="c1", generation=2)


def test_a_success_or_other_content_starts_the_count_again_and_no_limit_never_gives_up() -> None:
    ok = ss.Outcome("c1", (ss.Feature(ss.FEATURE_RESOURCES, "Provisioned", "h1"),), healthy=True)
    bodies = _run([_failed(), ok, _failed(), _failed("h2")], limit=None)
    counts = [b["featureSummaries"][0].get("consecutiveFailures") for b in bodies]
    assert counts == [1, None, 1, 1]
    many = _run([_failed()] * 5, limit=None)
    assert many[-1]["featureSummaries"][0]["consecutiveFailures"] == 5
    assert not ss.gave_up(many[-1], content_hash="c1", generation=1)


def test_an_unreachable_cluster_is_not_a_failure_of_the_content() -> None:
    _first, unreachable, third = _run(
        [_failed(), ss.Outcome("c1", unreachable="no answer"), _failed()], limit=3
    )
    assert unreachable["featureSummaries"][0]["consecutiveFailures"] == 1  # kept, not counted
    assert third["featureSummaries"][0]["consecutiveFailures"] == 2


def test_tiers_are_annotated_only_when_not_the_default_and_read_back() -> None:
    obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}}
    assert manifests.with_tier(obj, (100, 100)) == obj
    assert manifests.tier_of(obj) == (100, 100)
    assert manifests.tier_of(manifests.with_tier(obj, (50, 100))) == (50, 100)
    assert manifests.tier_of(manifests.with_tier(obj, (100, 10))) == (100, 10)
    # Profile tier first, policy tier second: a lower profile tier wins whatever the policy tier.
    assert (50, 100) < (100, 10)
    edited = {"metadata": {"annotations": {manifests.TIER_ANNOTATION: "high"}}}
    assert manifests.tier_of(edited) == (100, 100)  # someone edited it: it counts as the default
