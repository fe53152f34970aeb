"""Which deliveries the ClusterProfile shell shows as being of the engine's revision (ADR 0126):
only an applied one whose summary names the pinned content in its annotation and its status."""

from __future__ import annotations

from typing import Any

import pytest

from fleetwave.controllers.sveltos import rollout_facts as rf
from fleetwave.controllers.sveltos import summary_status as ss
from fleetwave.core import model as m

CONTENT = "c" * 64
REVISION = "r" * 64


def _summary(
    annotated: str, observed: str, ready: str = "True", reason: str = "Provisioned"
) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "web-sveltos-m1",
            "namespace": "fleet",
            "uid": "u1",
            "resourceVersion": f"{annotated[:4]}-{observed[:4]}-{ready}-{reason}",
            "annotations": {ss.CONTENT_HASH_ANNOTATION: annotated},
        },
        "status": {
            "observedContentHash": observed,
            "conditions": [{"type": "Ready", "status": ready, "reason": reason, "message": ""}],
        },
    }


def test_a_summary_ready_at_the_pinned_content_is_done_at_the_engine_s_revision() -> None:
    delivery = rf.delivery_of(_summary(CONTENT, CONTENT), CONTENT, REVISION)
    assert delivery.done_at(REVISION)
    assert not delivery.done_at(CONTENT)


def test_without_a_revision_asked_for_none_is_shown() -> None:
    delivery = rf.delivery_of(_summary(CONTENT, CONTENT), CONTENT)
    assert delivery.done
    assert delivery.revision is None


@pytest.mark.parametrize(
    "summary",
    [
        _summary("o" * 64, CONTENT),  # written for other content
        _summary(CONTENT, "o" * 64),  # the member still runs other content
        _summary(CONTENT, CONTENT, ready="False", reason="Failed"),
    ],
)
def test_a_summary_not_ready_at_the_pinned_content_is_not_done_at_any_revision(
    summary: dict[str, Any],
) -> None:
    delivery = rf.delivery_of(summary, CONTENT, REVISION)
    assert not delivery.done_at(REVISION)
    assert delivery.phase is not m.DeliveryPhase.APPLIED or not delivery.ready
