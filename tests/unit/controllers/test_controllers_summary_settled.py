"""How far a ClusterSummary got (ADR 0065): deliver, only judge health, or nothing to do at all."""

from __future__ import annotations

from typing import Any

import pytest

from fleetwave.controllers.sveltos import templated_content
from fleetwave.controllers.sveltos.summary import settled


def summary(
    mode: str = "Continuous",
    *,
    observed: str = "h1",
    ready: str = "True",
    reason: str = "Provisioned",
    seen_generation: int = 2,
    features: tuple[str, ...] = ("Provisioned",),
) -> dict[str, Any]:
    return {
        "metadata": {"generation": 2},
        "spec": {"clusterProfileSpec": {"syncMode": mode}},
        "status": {
            "observedContentHash": observed,
            "featureSummaries": [{"featureID": f"F{i}", "status": s} for i, s in enumerate(features)],
            "conditions": [
                {"type": "Ready", "status": ready, "reason": reason, "observedGeneration": seen_generation}
            ],
        },
    }


@pytest.mark.parametrize("mode", ["Continuous", "OneTime"])
def test_deployed_and_healthy_at_this_revision_and_generation_is_done(mode: str) -> None:
    assert settled(summary(mode), "h1") == "done"


@pytest.mark.parametrize("mode", ["Continuous", "OneTime"])
def test_deployed_but_unhealthy_is_only_judged(mode: str) -> None:
    assert settled(summary(mode, ready="False", reason="Unhealthy"), "h1") == "judge"


def test_a_new_revision_is_delivered_in_continuous_mode_and_only_judged_in_one_time_mode() -> None:
    assert settled(summary("Continuous"), "h2") == "deliver"
    assert settled(summary("OneTime"), "h2") == "judge"


def test_a_spec_edit_redelivers_in_continuous_mode() -> None:
    assert settled(summary("Continuous", seen_generation=1), "h1") == "deliver"
    assert settled(summary("OneTime", seen_generation=1), "h1") == "judge"


@pytest.mark.parametrize("mode", ["DryRun", "ContinuousWithDriftDetection"])
def test_dry_run_and_drift_detection_always_deliver(mode: str) -> None:
    assert settled(summary(mode), "h1") == "deliver"


def test_a_failed_feature_or_nothing_deployed_yet_is_delivered() -> None:
    assert settled(summary(features=("Provisioned", "Failed")), "h1") == "deliver"
    assert settled(summary(features=()), "h1") == "deliver"
    failed = summary(ready="False", reason="Failed")
    assert settled(failed, "h1") == "deliver"  # not unhealthy: something did not deploy
    fresh = summary()
    fresh["status"] = {}
    assert settled(fresh, "h1") == "deliver"


def test_continuous_content_not_delivered_by_this_process_to_these_credentials_is_delivered_again() -> None:
    """A re-registered or rebuilt cluster (new kubeconfig), or a restarted controller: deliver once more."""
    assert settled(summary("Continuous"), "h1", same_target=False) == "deliver"
    unhealthy = summary("Continuous", ready="False", reason="Unhealthy")
    assert settled(unhealthy, "h1", same_target=False) == "deliver"
    # OneTime promises never to change the cluster again: who delivered it does not matter.
    assert settled(summary("OneTime"), "h1", same_target=False) == "done"
    assert settled(summary("OneTime"), "h2", same_target=False) == "judge"


def test_templated_content_is_delivered_again_when_the_cluster_it_was_rendered_for_changed() -> None:
    rendered = summary("Continuous")
    rendered["status"]["templateInputsHash"] = "cluster-as-it-was"
    assert settled(rendered, "h1", template_inputs="cluster-as-it-was") == "done"
    assert settled(rendered, "h1", template_inputs="cluster-relabelled") == "deliver"
    # OneTime promises not to change the cluster again: it stays done.
    one_time = summary("OneTime")
    one_time["status"]["templateInputsHash"] = "cluster-as-it-was"
    assert settled(one_time, "h1", template_inputs="cluster-relabelled") == "done"


def test_the_fingerprint_ignores_what_the_probe_rewrites() -> None:
    base = {
        "metadata": {"name": "c", "namespace": "n", "labels": {"env": "dev"}},
        "spec": {},
        "status": {"x": 1},
    }
    probed = {**base, "status": {"x": 2, "properties": {}}}
    relabelled = {**base, "metadata": {**base["metadata"], "labels": {"env": "prod"}}}
    assert templated_content.inputs_fingerprint(base) == templated_content.inputs_fingerprint(probed)
    assert templated_content.inputs_fingerprint(base) != templated_content.inputs_fingerprint(relabelled)
