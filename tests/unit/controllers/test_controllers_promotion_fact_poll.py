"""How often a promotion waiting on facts re-checks them (ADR 0117): only facts no watch brings
keep the short poll."""

from __future__ import annotations

from typing import Any

import pytest

from fleetwave.api.models import ClusterPromotion
from fleetwave.controllers.sveltos import promotion

JUDGE_POLL = 2.0


def _promotion(prod_stage: dict[str, Any]) -> ClusterPromotion:
    return ClusterPromotion.model_validate(
        {
            "apiVersion": "config.projectsveltos.io/v1beta1",
            "kind": "ClusterPromotion",
            "metadata": {"name": "p"},
            "spec": {
                "profileSpec": {"policyRefs": [{"kind": "ConfigMap", "name": "c", "namespace": "default"}]},
                "stages": [
                    {
                        "name": "staging",
                        "clusterSelector": {"matchLabels": {"env": "staging"}},
                        "trigger": {"auto": {"delay": "1m"}},
                    },
                    {"name": "prod", "clusterSelector": {"matchLabels": {"env": "prod"}}, **prod_stage},
                ],
            },
        }
    )


CHECK = {"name": "ok", "group": "", "version": "v1", "kind": "ConfigMap", "script": "function evaluate() end"}
ANALYSIS = {"name": "a", "prometheus": {"url": "http://prom.example"}, "query": "up"}
ANALYSIS["successCondition"] = "true"


@pytest.mark.parametrize(
    "stage",
    [
        {},
        {"trigger": {"auto": {"delay": "5m"}}},
        {"trigger": {"manual": {"approved": False}}},
    ],
    ids=["no-trigger", "delay", "approval"],
)
def test_facts_that_all_come_by_watch_are_re_checked_only_as_a_safety_net(stage: dict[str, Any]) -> None:
    poll = promotion.fact_poll(_promotion(stage), JUDGE_POLL)
    assert poll == promotion.WATCHED_POLL
    assert poll > JUDGE_POLL


@pytest.mark.parametrize(
    "stage",
    [
        {"trigger": {"auto": {"postDelayHealthChecks": [CHECK]}}},
        {"trigger": {"manual": {"postDelayHealthChecks": [CHECK]}}},
        {"webhooks": [{"name": "w", "url": "https://gate.example/check"}]},
        {"analyses": [ANALYSIS]},
    ],
    ids=["auto-health", "manual-health", "webhook", "analysis"],
)
def test_a_promotion_with_a_fact_it_must_ask_for_keeps_the_judge_poll(stage: dict[str, Any]) -> None:
    assert promotion.fact_poll(_promotion(stage), JUDGE_POLL) == JUDGE_POLL


def test_a_judge_poll_longer_than_the_safety_net_is_kept() -> None:
    assert promotion.fact_poll(_promotion({}), 60.0) == 60.0
