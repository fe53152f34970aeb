"""The JSON patch that approves one manual stage of a ClusterPromotion (pure).

The patch carries a `test` op on the stage's name, so that a stage list reordered between our read
and our write is rejected by the API server instead of approving the wrong stage.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class ApprovalError(ValueError):
    """The stage cannot be approved; the message says why (and lists the stages when unknown)."""


def stage_names(promotion: Mapping[str, Any]) -> list[str]:
    return [str(s.get("name")) for s in (promotion.get("spec") or {}).get("stages") or []]


def approval_patch(promotion: Mapping[str, Any], stage: str) -> list[dict[str, Any]]:
    """JSON patch ops setting `spec.stages[i].trigger.manual.approved=true` for stage `stage`."""
    stages = (promotion.get("spec") or {}).get("stages") or []
    index = next((i for i, s in enumerate(stages) if s.get("name") == stage), None)
    name = (promotion.get("metadata") or {}).get("name", "?")
    if index is None:
        known = ", ".join(stage_names(promotion)) or "none"
        raise ApprovalError(f"ClusterPromotion {name} has no stage {stage!r} (stages: {known})")
    manual = (stages[index].get("trigger") or {}).get("manual")
    if not isinstance(manual, Mapping):
        raise ApprovalError(
            f"stage {stage!r} of ClusterPromotion {name} has no manual trigger: nothing to approve"
        )
    base = f"/spec/stages/{index}"
    return [
        {"op": "test", "path": f"{base}/name", "value": stage},
        # "add" sets an object member whether or not it exists: `approved` may be absent.
        {"op": "add", "path": f"{base}/trigger/manual/approved", "value": True},
    ]


def is_approved(promotion: Mapping[str, Any], stage: str) -> bool:
    for s in (promotion.get("spec") or {}).get("stages") or []:
        if s.get("name") == stage:
            return bool(((s.get("trigger") or {}).get("manual") or {}).get("approved"))
    return False
