"""The snapshot admission policy's CEL, evaluated here with celpy as the API server would (ADR 0112);
the integration test (tests/integration/test_snapshot_admission.py) proves it on a real server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import celpy
import pytest

from fleetwave.api import snapshot_admission as sa
from fleetwave.mgmt import chart

CONTROLLER = sa.controller_user("fleetwave-system", "fleetwave-controller")
SPEC = sa.policy_spec(CONTROLLER)
ENV = celpy.Environment()
TENANT = {"username": "system:serviceaccount:team-a:ci", "groups": ["system:serviceaccounts"]}
ADMIN = {"username": "admin", "groups": ["system:masters", "system:authenticated"]}
ME = {"username": CONTROLLER, "groups": ["system:serviceaccounts"]}
LABELS = {"kubernetes-fleet.io/parent-CRP": "web", "kubernetes-fleet.io/resource-index": "0"}


def _eval(expression: str, activation: dict[str, Any]) -> Any:
    return ENV.program(ENV.compile(expression)).evaluate(activation)


def refusals(
    operation: str, user: dict[str, Any], obj: dict[str, Any], old: dict[str, Any] | None = None
) -> list[str]:
    """The messages of the validations that fail (empty: admitted)."""
    request = {"operation": operation, "userInfo": user}
    base = {k: celpy.json_to_cel(v) for k, v in {"request": request, "object": obj, "oldObject": old}.items()}
    variables: dict[Any, Any] = {}
    for var in SPEC["variables"]:
        activation = {**base, "variables": celpy.celtypes.MapType(variables)}
        variables[celpy.celtypes.StringType(var["name"])] = _eval(var["expression"], activation)
    activation = {**base, "variables": celpy.celtypes.MapType(variables)}
    return [v["message"] for v in SPEC["validations"] if not _eval(v["expression"], activation)]


def snapshot(labels: dict[str, str] | None = None, spec: Any = "v1") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "web-0-snapshot"}
    if labels is not None:
        meta["labels"] = labels
    return {"metadata": meta, "spec": {"selectedResources": [spec]}}


@pytest.mark.parametrize("user", [ME, ADMIN])
def test_the_controller_and_admins_create_labelled_snapshots(user: dict[str, Any]) -> None:
    assert refusals("CREATE", user, snapshot(LABELS)) == []


def test_a_tenant_may_not_create_a_labelled_snapshot_but_an_unlabelled_one() -> None:
    assert refusals("CREATE", TENANT, snapshot(LABELS)) == [sa.LABELS_MESSAGE]
    assert refusals("CREATE", TENANT, snapshot({"team": "a"})) == []
    assert refusals("CREATE", TENANT, snapshot()) == []


@pytest.mark.parametrize("user", [ME, ADMIN, TENANT])
def test_nobody_changes_a_snapshots_spec(user: dict[str, Any]) -> None:
    old = snapshot(LABELS)
    assert sa.SPEC_MESSAGE in refusals("UPDATE", user, snapshot(LABELS, spec="edited"), old)
    assert refusals("UPDATE", user, {**old, "metadata": {"labels": {**LABELS}}}, old) == []


def test_only_the_controller_or_an_admin_changes_the_placement_labels() -> None:
    old = snapshot({**LABELS, "kubernetes-fleet.io/is-latest-snapshot": "true"})
    unmarked = snapshot({**LABELS, "kubernetes-fleet.io/is-latest-snapshot": "false"})
    assert refusals("UPDATE", ME, unmarked, old) == []
    assert refusals("UPDATE", ADMIN, unmarked, old) == []
    assert refusals("UPDATE", TENANT, unmarked, old) == [sa.LABELS_MESSAGE]
    assert refusals("UPDATE", TENANT, snapshot(LABELS), snapshot()) == [sa.LABELS_MESSAGE]  # labelling
    assert refusals("UPDATE", TENANT, snapshot(), snapshot(LABELS)) == [sa.LABELS_MESSAGE]  # unlabelling
    assert refusals("UPDATE", TENANT, snapshot({**LABELS, "team": "a"}), snapshot(LABELS)) == []


def test_a_user_name_that_would_break_the_expression_is_refused() -> None:
    with pytest.raises(ValueError, match="not a Kubernetes user name"):
        sa.policy_spec("x' || true || '")


def test_the_chart_puts_its_own_account_in_place_of_the_marker() -> None:
    spec = chart.render_files()["files/admission/snapshot-policy-spec.yaml"]
    assert chart.SNAPSHOT_POLICY_USER_MARKER in spec
    root = Path(__file__).resolve().parents[3] / "deploy/chart/fleetwave/templates"
    template = (root / "snapshot-admission-policy.yaml").read_text(encoding="utf-8")
    assert f'replace "{chart.SNAPSHOT_POLICY_USER_MARKER}" $user' in template
    assert sa.POLICY in template
