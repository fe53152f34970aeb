"""`fleetwave plan` end to end through the CLI: table and JSON timelines, and input errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from fleetwave.cli import app

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
PROMOTION = str(EXAMPLES / "promotion-kyverno.yaml")
STAGED = str(EXAMPLES / "staged-run.yaml")
FLEET = str(EXAMPLES / "fleet.yaml")
START = ["--start", "2026-11-22T10:00:00Z", "--delivery-time", "30s"]


def plan(*args: str) -> Any:
    return CliRunner().invoke(app, ["plan", *args])


def plan_json(*args: str) -> dict[str, Any]:
    result = plan(*args, "-o", "json")
    assert result.exit_code == 0, result.stderr
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def test_promotion_table_shows_stages_in_order_and_stops_at_the_pending_approval() -> None:
    result = plan("-f", PROMOTION, "--fleet", FLEET, *START)
    assert result.exit_code == 0, result.stderr
    out = result.stdout
    assert out.index("dev (1") < out.index("staging (1") < out.index("production (1")
    assert "batch 1: member-1" in out
    assert "2026-11-22 10:00:30" in out  # member-1 done after 30s
    assert "opens 2026-11-22 10:02:30" in out  # dev's 2m soak
    assert "waiting for approval (pending)" in out
    assert "=> NotReached" in out
    assert "Blocked: stage staging: waiting for approval staging (pending)" in out


def test_promotion_json_with_an_approval_time_runs_to_the_end() -> None:
    data = plan_json("-f", PROMOTION, "--fleet", FLEET, *START, "--approve-at", "staging=+10m")
    assert data["outcome"] == "Succeeded"
    assert data["finishedAt"] == "2026-11-22T10:10:30Z"
    assert [s["name"] for s in data["stages"]] == ["dev", "staging", "production"]
    dev, staging, prod = data["stages"]
    assert dev["batches"] == [
        {"index": 0, "clusters": ["member-1"], "start": "2026-11-22T10:00:00Z", "end": "2026-11-22T10:00:30Z"}
    ]
    assert dev["succeededAt"] == "2026-11-22T10:02:30Z"
    assert [(g["kind"], g["opensAt"], g["state"]) for g in staging["gates"]] == [
        ("Delay", "2026-11-22T10:05:00Z", "passed"),
        ("Approval", "2026-11-22T10:10:00Z", "passed"),
    ]
    assert prod["startedAt"] == "2026-11-22T10:10:00Z"
    assert data["assumptions"] == {
        "deliveryTime": "30s",
        "approvals": {"staging": "2026-11-22T10:10:00Z"},
        "autoApprove": False,
        "failing": [],
    }


def test_promotion_json_blocked_reports_pending_gate_and_unreached_stage() -> None:
    data = plan_json("-f", PROMOTION, "--fleet", FLEET, *START)
    assert data["outcome"] == "Blocked"
    assert data["finishedAt"] is None
    assert data["blockedOn"] == "stage staging: waiting for approval staging (pending)"
    staging, prod = data["stages"][1:]
    assert staging["state"] == "Blocked"
    assert staging["gates"][1] == {
        "when": "after",
        "kind": "Approval",
        "detail": "approval staging",
        "opensAt": None,
        "state": "pending",
        "approvalId": "staging",
    }
    assert prod["state"] == "NotReached"
    assert prod["batches"] == [{"index": 0, "clusters": ["member-3"], "start": None, "end": None}]


def test_staged_run_batches_follow_max_concurrency_and_sorting_label(tmp_path: Path) -> None:
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(
        "clusters:\n"
        "- {name: d1, labels: {env: dev}}\n"
        "- {name: s1, labels: {env: staging}}\n"
        "- {name: p-a, labels: {env: prod, order: 2}}\n"
        "- {name: p-b, labels: {env: prod, order: 1}}\n"
        "- {name: p-c, labels: {env: prod}}\n"
    )
    data = plan_json("-f", STAGED, "--fleet", str(fleet), *START, "--auto-approve")
    assert data["outcome"] == "Succeeded"
    assert data["unmatched"] == []
    prod = data["stages"][2]
    assert prod["clusters"] == ["p-b", "p-a", "p-c"]
    assert [(b["clusters"], b["start"]) for b in prod["batches"]] == [
        (["p-b"], "2026-11-22T10:02:30Z"),
        (["p-a"], "2026-11-22T10:03:00Z"),
        (["p-c"], "2026-11-22T10:03:30Z"),
    ]
    assert prod["gates"][0]["approvalId"] == "example-run-before-prod"
    assert data["finishedAt"] == "2026-11-22T10:04:00Z"


def test_staged_run_approvals_by_id_and_by_stage_in_the_table() -> None:
    result = plan(
        "-f",
        STAGED,
        "--fleet",
        FLEET,
        *START,
        "--approve-at",
        "example-run-staging=2026-11-22T10:05:00Z",
        "--approve-at",
        "prod=+6m",
    )
    assert result.exit_code == 0, result.stderr
    assert "before: approval example-run-before-prod" in result.stdout
    assert "opens 2026-11-22 10:06:00" in result.stdout
    assert "Succeeded at 2026-11-22 10:06:30 UTC" in result.stdout


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "in.yaml"
    path.write_text(text)
    return str(path)


PROMO_HEAD = (
    "apiVersion: fleetwave.io/v1alpha1\nkind: ClusterPromotion\nmetadata: {name: p}\nspec:\n  stages:\n"
)


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        (
            "apiVersion: fleetwave.io/v1alpha1\nkind: Rollout\nmetadata: {name: r}\n",
            "kind: unknown kind 'Rollout'",
        ),
        (PROMO_HEAD + "  - {name: dev, bogus: 1}\n", "spec.stages[0].bogus: unknown field"),
        (
            PROMO_HEAD
            + "  - {name: dev, clusterSelector: {matchLabels: {env: dev}}}\n"
            + "  - {name: staging, clusterSelector: {matchLabels: {env: staging}}}\n"
            + "  - {name: qa, clusterSelector: {matchLabels: {env: qa}}}\n",
            "spec.stages[2].clusterSelector: matches no cluster (stage qa: env=qa)",
        ),
        (
            "apiVersion: fleetwave.io/v1alpha1\nkind: MemberCluster\nmetadata: {name: m, namespace: x}\n",
            "kind: MemberCluster/m cannot be planned",
        ),
    ],
)
def test_bad_rollout_files_name_the_field(tmp_path: Path, text: str, needle: str) -> None:
    result = plan("-f", write(tmp_path, text), "--fleet", FLEET, *START)
    assert result.exit_code == 2
    assert needle in result.stderr
    assert result.stdout == ""


def test_staged_run_without_its_strategy_names_the_field(tmp_path: Path) -> None:
    run = Path(STAGED).read_text().split("---")[1]
    result = plan("-f", write(tmp_path, run), "--fleet", FLEET, *START)
    assert result.exit_code == 2
    assert "spec.stagedRolloutStrategyName: strategy 'example-strategy' is not in the file" in result.stderr


def test_bad_fleet_file_names_the_field(tmp_path: Path) -> None:
    fleet = write(tmp_path, "clusters:\n- {name: a, labels: {env: {nested: 1}}}\n")
    result = plan("-f", PROMOTION, "--fleet", fleet, *START)
    assert result.exit_code == 2
    assert "clusters[0].labels.env: label values must be strings" in result.stderr


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (
            ["--approve-at", "dev=+1m"],
            "--approve-at: 'dev' is not a stage with an approval (stages with one: staging)",
        ),
        (["--approve-at", "staging"], "--approve-at: 'staging' must be STAGE=TIME"),
        (["--start", "yesterday"], "--start: 'yesterday' is not an ISO-8601 time"),
        (["--delivery-time", "soon"], "--delivery-time: 'soon' is not a duration"),
        (["-o", "xml"], "-o: 'xml' must be table, json or yaml"),
    ],
)
def test_bad_options_are_named(args: list[str], needle: str) -> None:
    result = plan("-f", PROMOTION, "--fleet", FLEET, "--start", "2026-11-22T10:00:00Z", *args)
    assert result.exit_code == 2
    assert needle in result.stderr


def test_fleet_source_is_required_exactly_once() -> None:
    result = plan("-f", PROMOTION, *START)
    assert result.exit_code == 2
    assert "give exactly one of --fleet FLEETFILE or --kubeconfig FILE" in result.stderr


def test_unreachable_management_cluster_is_a_clear_error(tmp_path: Path) -> None:
    # A real connection attempt to a closed loopback port: nothing is mocked.
    kubeconfig = write(
        tmp_path,
        """
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
""",
    )
    result = plan("-f", PROMOTION, "--kubeconfig", kubeconfig, *START)
    assert result.exit_code == 2
    assert f"--kubeconfig {kubeconfig}: cannot reach the API server" in result.stderr


def test_a_paused_promotion_plans_nothing_and_says_how_to_resume(tmp_path: Path) -> None:
    text = Path(PROMOTION).read_text()
    assert "\nspec:\n" in text
    paused = tmp_path / "paused.yaml"
    paused.write_text(text.replace("\nspec:\n", "\nspec:\n  paused: true\n", 1))
    report = plan_json("-f", str(paused), "--fleet", FLEET, *START)
    assert report["outcome"] == "Blocked"
    assert report["blockedOn"].startswith("paused (spec.paused: true): nothing starts until")
    assert {s["state"] for s in report["stages"]} == {"NotReached"}
    assert plan_json("-f", PROMOTION, "--fleet", FLEET, *START)["blockedOn"].startswith("stage staging")


BUDGETED = """\
apiVersion: config.projectsveltos.io/v1beta1
kind: ClusterPromotion
metadata: {name: budgeted}
spec:
  failureBudget: {maxFailedPerStage: 1, maxFailed: 1, gracePeriod: 1m}
  profileSpec:
    policyRefs: [{kind: ConfigMap, name: c, namespace: default}]
  stages:
  - {name: dev, clusterSelector: {matchLabels: {env: dev}}}
  - {name: staging, clusterSelector: {matchLabels: {env: staging}}}
  - {name: production, clusterSelector: {matchLabels: {env: prod}}}
"""


def test_fail_shows_the_budget_setting_a_cluster_aside_then_stopping_the_rollout(tmp_path: Path) -> None:
    path = tmp_path / "budgeted.yaml"
    path.write_text(BUDGETED)
    one = plan_json("-f", str(path), "--fleet", FLEET, *START, "--fail", "dev:member-1")
    assert one["outcome"] == "Succeeded"
    assert one["failureBudget"] == {"maxFailedPerStage": "1", "maxFailed": "1", "gracePeriod": "1m"}
    dev, staging, _ = one["stages"]
    assert dev["setAside"] == ["member-1"]
    assert staging["startedAt"] == "2026-11-22T10:01:00Z"  # after dev-1's 1m grace period
    two = plan_json(
        "-f", str(path), "--fleet", FLEET, *START, "--fail", "dev:member-1", "--fail", "staging:member-2"
    )
    assert two["outcome"] == "Failed"
    assert "2 failed clusters in the rollout, 1 allowed" in two["failedOn"]
    assert two["stages"][2]["state"] == "NotReached"
    table = plan(
        "-f", str(path), "--fleet", FLEET, *START, "--fail", "dev:member-1", "--fail", "staging:member-2"
    )
    assert "set aside (failed): member-1" in table.stdout
    assert "Failure budget: maxFailedPerStage 1, maxFailed 1, gracePeriod 1m" in table.stdout
    assert "Failed at 2026-11-22 10:02:00 UTC: stage staging: failure budget exceeded" in table.stdout


def test_fail_with_on_failure_rollback_shows_what_the_rollback_does(tmp_path: Path) -> None:
    path = tmp_path / "rolls-back.yaml"
    path.write_text(BUDGETED.replace("  failureBudget:", "  onFailure: Rollback\n  failureBudget:", 1))
    report = plan_json(
        "-f", str(path), "--fleet", FLEET, *START, "--fail", "dev:member-1", "--fail", "staging:member-2"
    )
    assert report["outcome"] == "RolledBack"
    assert report["onFailure"] == "Rollback"
    assert "2 failed clusters in the rollout, 1 allowed" in report["failedOn"]
    # Last stage first, only what the revision reached: production never got it, so is not touched.
    assert [(s["name"], s["clusters"]) for s in report["rollback"]] == [
        ("staging", ["member-2"]),
        ("dev", ["member-1"]),
    ]
    assert report["rollback"][0]["succeededAt"] <= report["rollback"][1]["startedAt"]
    table = plan(
        "-f", str(path), "--fleet", FLEET, *START, "--fail", "dev:member-1", "--fail", "staging:member-2"
    )
    assert "on failure: Rollback" in table.stdout
    assert "rollback staging: member-2" in table.stdout
    assert "RolledBack at" in table.stdout


def test_fail_without_a_budget_is_blocked_on_the_held_stage() -> None:
    report = plan_json("-f", PROMOTION, "--fleet", FLEET, *START, "--fail", "dev:member-1")
    assert report["outcome"] == "Blocked"
    assert (
        report["blockedOn"]
        == "stage dev: cluster member-1 failed: delivery fails (assumed: --fail); stage held"
    )
    assert report["failureBudget"] is None


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("member-1", "must be STAGE:CLUSTER"),
        ("qa:member-1", "no stage 'qa'"),
        ("dev:member-3", "cluster 'member-3' is not in stage dev (its clusters: member-1)"),
    ],
)
def test_fail_names_what_is_wrong_with_its_value(value: str, expected: str) -> None:
    result = plan("-f", PROMOTION, "--fleet", FLEET, *START, "--fail", value)
    assert result.exit_code == 2
    assert expected in result.stderr


def test_yaml_output_is_the_json_data() -> None:
    args = ("-f", PROMOTION, "--fleet", FLEET, "--start", "2026-11-22T10:00:00Z")
    as_yaml = plan(*args, "-o", "yaml")
    assert as_yaml.exit_code == 0, as_yaml.stderr
    assert yaml.safe_load(as_yaml.stdout) == plan_json(*args)


def test_a_staged_run_leaving_a_cluster_in_no_stage_is_refused_as_the_controller_would(
    tmp_path: Path,
) -> None:
    fleet = tmp_path / "fleet.yaml"
    envs = ("dev", "staging", "prod", "lab")
    fleet.write_text("clusters:\n" + "".join(f"- {{name: {e}, labels: {{env: {e}}}}}\n" for e in envs))
    result = plan("-f", STAGED, "--fleet", str(fleet), *START)
    assert result.exit_code == 2
    assert "would fail to initialize: some clusters are not placed in any stage" in result.stderr
    assert result.stderr.rstrip().endswith("total 1, showing up to 10: lab")
