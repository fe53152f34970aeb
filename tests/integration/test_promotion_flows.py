"""Seed 002's flows on the real local fleet: a ClusterPromotion through dev, staging and production,
an upgrade advancing stage by stage, a manual gate that holds and resets, bad values stopping at dev,
and restarts on content changes (but not on trigger edits)."""

from __future__ import annotations

import datetime as dt
import json
import re
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest
import yaml
from lightkube import ApiError, Client
from lightkube.resources.core_v1 import ConfigMap, Event
from lightkube.types import PatchType
from prometheus_client.parser import text_string_to_metric_families
from promotion_support import (
    CHARTS,
    ControllerThread,
    chart_version,
    deleted_after,
    profiles_of,
    promotion,
    registered,
    relabel,
    running_controller,
    stage_phases,
    status,
    wait_for,
)
from typer.testing import CliRunner

from fleetwave.cli import app as cli_app
from fleetwave.kube import kinds
from fleetwave.local import binaries, chartrepo, fleet
from fleetwave.mgmt import manifests


@pytest.fixture(scope="module")
def repo(bins: binaries.Binaries, tmp_path_factory: pytest.TempPathFactory) -> Iterator[chartrepo.ChartRepo]:
    charts = [(CHARTS / "hello", "1.0.0"), (CHARTS / "hello", "1.1.0")]
    with chartrepo.serve(bins.path("helm"), tmp_path_factory.mktemp("promo-charts"), charts) as served:
        yield served


@pytest.fixture(scope="module")
def controller(
    local_fleet: fleet.FleetState, management: Client, bins: binaries.Binaries
) -> Iterator[ControllerThread]:
    with (
        registered(management, local_fleet),
        running_controller(local_fleet, bins.path("helm"), "promo") as thread,
    ):
        yield thread


def promotion_doc(
    name: str,
    repo_url: str,
    *,
    version: str = "1.0.0",
    values: str | None = None,
    staging_manual: bool = False,
    dev_delay: str = "2s",
) -> dict[str, Any]:
    chart: dict[str, Any] = {
        "repositoryURL": repo_url,
        "repositoryName": "local",
        "chartName": "local/hello",
        "chartVersion": version,
        "releaseName": name,
        "releaseNamespace": name,
        "helmChartAction": "Install",
    }
    if values is not None:
        chart["values"] = values
    staging_trigger = {"manual": {"approved": False}} if staging_manual else {"auto": {}}
    return {
        "apiVersion": "config.projectsveltos.io/v1beta1",
        "kind": "ClusterPromotion",
        "metadata": {"name": name},
        "spec": {
            "profileSpec": {"syncMode": "Continuous", "helmCharts": [chart]},
            "stages": [
                {
                    "name": "dev",
                    "clusterSelector": {"matchLabels": {"env": "dev"}},
                    "trigger": {"auto": {"delay": dev_delay}},
                },
                {
                    "name": "staging",
                    "clusterSelector": {"matchLabels": {"env": "staging"}},
                    "trigger": staging_trigger,
                },
                {"name": "production", "clusterSelector": {"matchLabels": {"env": "prod"}}},
            ],
        },
    }


def apply(client: Client, doc: dict[str, Any]) -> None:
    manifests.apply(client, manifests.documents(yaml.safe_dump(doc)))


def versions(members: dict[str, Client], name: str) -> dict[str, str | None]:
    return {m: chart_version(c, name, name) for m, c in members.items()}


def _t(value: str) -> dt.datetime:
    return dt.datetime.fromisoformat(value.replace("Z", "+00:00"))


def test_an_automatic_rollout_goes_through_three_stages_in_order(
    controller: ControllerThread, management: Client, members: dict[str, Client], repo: chartrepo.ChartRepo
) -> None:
    name = "auto-rollout"
    apply(management, promotion_doc(name, repo.url, dev_delay="3s"))
    with deleted_after(management, name):
        wait_for(
            lambda: stage_phases(management, name).get("production") == "Succeeded", what="production done"
        )
        assert versions(members, name) == {"member-1": "1.0.0", "member-2": "1.0.0", "member-3": "1.0.0"}
        stages = {s["name"]: s for s in status(management, name)["stages"]}
        record = {s["name"]: s for s in status(management, name)["rollout"]["stages"]}
        # The dev delay is measured from the moment every dev cluster was deployed, never cut short.
        assert _t(record["staging"]["startedAt"]) - _t(record["dev"]["deliveredAt"]) >= dt.timedelta(
            seconds=3
        )
        assert _t(stages["staging"]["lastSuccessfulAppliedTime"]) <= _t(
            stages["production"]["lastUpdateReconciledTime"]
        )
        st = status(management, name)
        assert st["currentStageName"] == "production"
        assert any(c["type"] == "Ready" and c["status"] == "True" for c in st["conditions"])
        assert profiles_of(management, name) == {f"{name}-dev", f"{name}-staging", f"{name}-production"}
        # A stage profile lists the clusters it matches; its progress is the promotion's (ADR 0145).
        dev = management.get(kinds.resource("ClusterProfile"), f"{name}-dev").status
        assert [c["name"] for c in dev["matchingClusters"]] == ["member-1"]
        assert "updatedClusters" not in dev, dev
        assert "updatingClusters" not in dev, dev
        _finalizer_came_with_the_apply(management, f"{name}-dev")
        _dashboard_metrics_are_served(controller, name)


def _finalizer_came_with_the_apply(management: Client, profile: str) -> None:
    """The stage profile was created with its withdrawal finalizer in the promotion's apply, not
    given it by the profile controller in a write of its own (an Update entry would own it)."""
    meta = management.get(kinds.resource("ClusterProfile"), profile).metadata
    assert "fleetwave.io/withdraw-in-batches" in (meta.finalizers or [])
    owners = {
        entry.operation
        for entry in meta.managedFields or []
        if "f:finalizers" in ((entry.fieldsV1 or {}).get("f:metadata") or {})
    }
    assert owners == {"Apply"}, meta.managedFields


def test_a_cluster_that_comes_to_match_a_finished_stage_joins_it_and_receives_the_content(
    controller: ControllerThread, management: Client, members: dict[str, Client], repo: chartrepo.ChartRepo
) -> None:
    """ADR 0032 and 0144: member-3 matches no stage when the plan freezes and is not recorded; once
    relabelled into staging it joins that stage (its stage profile names it) and gets the chart."""
    name = "late-joiner"
    doc = promotion_doc(name, repo.url, dev_delay="1s")
    doc["spec"]["stages"] = doc["spec"]["stages"][:2]  # dev and staging: member-3 (prod) matches none
    apply(management, doc)
    with deleted_after(management, name):
        try:
            phases = lambda: stage_phases(management, name)  # noqa: E731
            wait_for(lambda: phases().get("staging") == "Succeeded", what="staging done")
            assert status(management, name)["rollout"]["lateJoiners"] == []
            assert versions(members, name)["member-3"] is None
            relabel(management, "member-3", "staging")
            wait_for(lambda: versions(members, name)["member-3"] == "1.0.0", what="the joiner installed")
            record = status(management, name)["rollout"]
            assert record["lateJoiners"] == [["fleetwave-system/member-3", 1]], record
            staging = management.get(kinds.resource("ClusterProfile"), f"{name}-staging")
            assert "member-3" in {r["name"] for r in staging.spec["clusterRefs"]}
        finally:
            relabel(management, "member-3", "prod")


DASHBOARD = CHARTS.parents[1] / "deploy" / "grafana" / "fleetwave-rollouts.json"
_METRIC = re.compile(r"\b(fleetwave_[a-z0-9_]+?)(?:_bucket|_count|_sum|_total)?\b")


def _dashboard_metrics_are_served(controller: ControllerThread, name: str) -> None:
    """Every metric the Grafana dashboard queries is on the controller's /metrics (ADR 0082), and the
    rollout just done shows in them."""
    port = controller._settings.metrics_port
    page = httpx2.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    families = {f.name: f for f in text_string_to_metric_families(page)}
    dashboard = json.loads(DASHBOARD.read_text())
    used = {n for p in dashboard["panels"] for t in p["targets"] for n in _METRIC.findall(t["expr"])}
    assert used - set(families) == set()
    # Each has a sample, but failures and reconcile errors (none happen here: declared, empty).
    empty = {n for n in used if not families[n].samples}
    assert empty <= {"fleetwave_member_delivery_failures", "fleetwave_reconcile_errors"}

    def value(family: str, sample: str, **labels: str) -> float:
        found = [
            s.value
            for s in families[family].samples
            if s.name == sample and labels.items() <= s.labels.items()
        ]
        return sum(found)

    kind = {"kind": "ClusterPromotion"}
    assert value("fleetwave_rollouts", "fleetwave_rollouts", **kind, phase="Succeeded") >= 1
    mine = {**kind, "namespace": "", "rollout": name}
    for stage in ("dev", "staging", "production"):
        assert (
            value(
                "fleetwave_rollout_stage_phase",
                "fleetwave_rollout_stage_phase",
                **mine,
                stage=stage,
                phase="Succeeded",
            )
            == 1
        )
        assert (
            value(
                "fleetwave_rollout_clusters", "fleetwave_rollout_clusters", **mine, stage=stage, state="done"
            )
            >= 1
        )
    duration = "fleetwave_stage_duration_seconds"
    assert value(duration, f"{duration}_count", rollout_kind="ClusterPromotion") >= 3
    assert value("fleetwave_gate_wait_seconds", "fleetwave_gate_wait_seconds_count") >= 1
    delivered = [
        s for s in families["fleetwave_member_deliveries"].samples if s.labels["kind"] == "ClusterPromotion"
    ]
    # Members are named namespace/name in the rollout record.
    assert {s.labels["member"].rpartition("/")[2] for s in delivered} >= {"member-1", "member-2", "member-3"}
    assert value("fleetwave_health_check_evaluations", "fleetwave_health_check_evaluations_total") >= 1


def test_an_upgrade_advances_stage_by_stage_and_a_manual_gate_holds_until_approved_then_resets(
    controller: ControllerThread, management: Client, members: dict[str, Client], repo: chartrepo.ChartRepo
) -> None:
    name = "upgrade"
    apply(management, promotion_doc(name, repo.url, staging_manual=True))
    resource = kinds.resource("ClusterPromotion")
    approve = [{"op": "replace", "path": "/spec/stages/1/trigger/manual/approved", "value": True}]
    with deleted_after(management, name):
        wait_for(lambda: stage_phases(management, name).get("staging") == "WaitingAfter", what="staging gate")
        assert versions(members, name)["member-3"] is None  # production untouched before the approval
        management.patch(resource, name, approve, patch_type=PatchType.JSON)  # seed 002's kubectl patch
        wait_for(lambda: versions(members, name)["member-3"] == "1.0.0", what="1.0.0 in production")
        # automaticReset: the approval is consumed once it promoted.
        wait_for(
            lambda: (
                management.get(resource, name).spec["stages"][1]["trigger"]["manual"]["approved"] is False
            ),
            what="approval reset",
        )

        upgrade = [{"op": "replace", "path": "/spec/profileSpec/helmCharts/0/chartVersion", "value": "1.1.0"}]
        management.patch(resource, name, upgrade, patch_type=PatchType.JSON)
        wait_for(lambda: versions(members, name)["member-2"] == "1.1.0", what="1.1.0 in staging")
        wait_for(
            lambda: stage_phases(management, name).get("staging") == "WaitingAfter", what="staging gate again"
        )
        assert versions(members, name) == {"member-1": "1.1.0", "member-2": "1.1.0", "member-3": "1.0.0"}
        description = {s["name"]: s["currentStatusDescription"] for s in status(management, name)["stages"]}
        assert "approval" in description["staging"]
        management.patch(resource, name, approve, patch_type=PatchType.JSON)
        wait_for(lambda: versions(members, name)["member-3"] == "1.1.0", what="1.1.0 in production")


def test_bad_helm_values_fail_at_dev_and_never_reach_staging(
    controller: ControllerThread, management: Client, members: dict[str, Client], repo: chartrepo.ChartRepo
) -> None:
    name = "bad-values"
    apply(management, promotion_doc(name, repo.url, values="replicas: true\n", dev_delay="0s"))
    with deleted_after(management, name):

        def dev_failed() -> str | None:
            dev = next((s for s in status(management, name).get("stages") or [] if s["name"] == "dev"), None)
            return (dev or {}).get("failureMessage")

        message = wait_for(dev_failed, what="dev failure in status")
        assert "member-1" in message
        assert "replicas" in message
        phases = stage_phases(management, name)
        assert phases["staging"] == "Pending"
        assert profiles_of(management, name) == {f"{name}-dev"}
        assert versions(members, name)["member-2"] is None


def test_a_profile_spec_change_restarts_from_the_first_stage_but_a_trigger_edit_does_not(
    controller: ControllerThread, management: Client, members: dict[str, Client], repo: chartrepo.ChartRepo
) -> None:
    name = "restarts"
    apply(management, promotion_doc(name, repo.url, staging_manual=True, dev_delay="1s"))
    resource = kinds.resource("ClusterPromotion")
    with deleted_after(management, name):
        wait_for(lambda: stage_phases(management, name).get("staging") == "WaitingAfter", what="staging gate")
        started = status(management, name)["rollout"]["startedAt"]

        trigger_edit = [{"op": "replace", "path": "/spec/stages/0/trigger/auto/delay", "value": "2s"}]
        management.patch(resource, name, trigger_edit, patch_type=PatchType.JSON)
        wait_for(
            lambda: (
                status(management, name).get("observedGeneration")
                == management.get(resource, name).metadata.generation
            ),
            what="trigger edit observed",
        )
        assert status(management, name)["rollout"]["startedAt"] == started
        assert stage_phases(management, name)["staging"] == "WaitingAfter"

        content_edit = [
            {"op": "add", "path": "/spec/profileSpec/helmCharts/0/values", "value": "message: v2\n"}
        ]
        management.patch(resource, name, content_edit, patch_type=PatchType.JSON)
        wait_for(lambda: status(management, name)["rollout"]["startedAt"] != started, what="a new revision")
        wait_for(
            lambda: stage_phases(management, name).get("staging") == "WaitingAfter", what="staging gate again"
        )
        for member in ("member-1", "member-2"):
            cm = members[member].get(ConfigMap, f"{name}-config", namespace=name)
            assert (cm.data or {})["message"] == "v2"


def test_editing_a_referenced_configmap_is_a_new_revision_that_walks_the_stages_again(
    controller: ControllerThread, management: Client, members: dict[str, Client], repo: chartrepo.ChartRepo
) -> None:
    name = "pinned"

    def policy(message: str) -> dict[str, Any]:
        greeting = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "default"},
            "data": {"message": message},
        }
        return {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "default"},
            "data": {"greeting.yaml": yaml.safe_dump(greeting)},
        }

    def seen() -> dict[str, str | None]:
        out: dict[str, str | None] = {}
        for member, client in members.items():
            try:
                out[member] = (client.get(ConfigMap, name, namespace="default").data or {}).get("message")
            except ApiError:
                out[member] = None
        return out

    doc = promotion_doc(name, repo.url, staging_manual=True, dev_delay="1s")
    doc["spec"]["profileSpec"] = {"policyRefs": [{"kind": "ConfigMap", "name": name, "namespace": "default"}]}
    manifests.apply(management, [policy("v1")])
    apply(management, doc)
    approve = [{"op": "replace", "path": "/spec/stages/1/trigger/manual/approved", "value": True}]
    with deleted_after(management, name):
        wait_for(lambda: stage_phases(management, name).get("staging") == "WaitingAfter", what="staging gate")
        management.patch(kinds.resource("ClusterPromotion"), name, approve, patch_type=PatchType.JSON)
        wait_for(
            lambda: seen() == {"member-1": "v1", "member-2": "v1", "member-3": "v1"}, what="v1 everywhere"
        )

        manifests.apply(management, [policy("v2")])  # edit the referenced ConfigMap, not the promotion
        wait_for(lambda: seen()["member-2"] == "v2", what="v2 in staging")
        wait_for(
            lambda: stage_phases(management, name).get("staging") == "WaitingAfter", what="staging gate again"
        )
        assert seen() == {"member-1": "v2", "member-2": "v2", "member-3": "v1"}, "v2 reached production early"
        management.patch(kinds.resource("ClusterPromotion"), name, approve, patch_type=PatchType.JSON)
        wait_for(lambda: seen()["member-3"] == "v2", what="v2 in production after approval")


def _gone(management: Client, name: str) -> bool:
    try:
        promotion(management, name)
    except ApiError as e:
        return e.status.code == 404
    return False


def test_deleting_a_promotion_withdraws_its_stages_last_first(
    controller: ControllerThread, management: Client, members: dict[str, Client], repo: chartrepo.ChartRepo
) -> None:
    name = "withdrawn"
    apply(management, promotion_doc(name, repo.url, dev_delay="0s"))
    wait_for(
        lambda: (
            "fleetwave.io/withdraw-stages-in-reverse"
            in (promotion(management, name).metadata.finalizers or [])
        ),
        what="the withdrawal finalizer",
    )
    wait_for(lambda: set(stage_phases(management, name).values()) == {"Succeeded"}, what="every stage done")
    assert versions(members, name) == {"member-1": "1.0.0", "member-2": "1.0.0", "member-3": "1.0.0"}

    management.delete(kinds.resource("ClusterPromotion"), name)
    gone_at: dict[str, float] = {}
    deadline = time.monotonic() + 120
    while len(gone_at) < 3 and time.monotonic() < deadline:
        for member, installed in versions(members, name).items():
            if installed is None and member not in gone_at:
                gone_at[member] = time.monotonic()
        time.sleep(0.1)
    assert set(gone_at) == {"member-1", "member-2", "member-3"}, gone_at
    # production (member-3), then staging (member-2), then dev (member-1): each stage is withdrawn only
    # once the later one's summaries are gone.
    assert gone_at["member-3"] < gone_at["member-2"] < gone_at["member-1"], gone_at

    wait_for(lambda: _gone(management, name), what="the promotion deleted once its stages are withdrawn")
    reasons = [
        e.message
        for e in management.list(Event, namespace="default", fields={"involvedObject.name": name})
        if e.reason == "WithdrawingStage"
    ]
    # Events are listed in no particular order (and a second may hold two): the order is asserted on
    # the members above; each stage said it was withdrawn.
    assert {m.split("stage ")[1].split(" ")[0] for m in reasons} == {"production", "staging", "dev"}, reasons


def test_preserve_cluster_profiles_on_delete_leaves_stage_profiles_and_their_delivery_in_place(
    controller: ControllerThread, management: Client, members: dict[str, Client], repo: chartrepo.ChartRepo
) -> None:
    name = "preserved"
    doc = promotion_doc(name, repo.url, dev_delay="0s")
    doc["spec"]["stages"] = doc["spec"]["stages"][:1]  # dev only
    doc["spec"]["preserveClusterProfilesOnDelete"] = True
    apply(management, doc)
    resource = kinds.resource("ClusterPromotion")
    wait_for(
        lambda: (
            "fleetwave.io/preserve-stage-profiles" in (promotion(management, name).metadata.finalizers or [])
        ),
        what="the preserve finalizer",
    )
    wait_for(lambda: stage_phases(management, name).get("dev") == "Succeeded", what="dev done")
    assert chart_version(members["member-1"], name, name) == "1.0.0"

    management.delete(resource, name)

    wait_for(lambda: _gone(management, name), what="the promotion deleted")
    profile = management.get(kinds.resource("ClusterProfile"), f"{name}-dev")
    assert not profile.metadata.ownerReferences  # orphaned: garbage collection leaves it
    assert chart_version(members["member-1"], name, name) == "1.0.0"
    # Now a standalone profile: deleting it withdraws what it delivered, as any profile's deletion does.
    management.delete(kinds.resource("ClusterProfile"), f"{name}-dev")
    wait_for(
        lambda: chart_version(members["member-1"], name, name) is None, what="withdrawn with the profile"
    )


def _cli(local_fleet: fleet.FleetState, *args: str) -> str:
    kubeconfig = local_fleet.cluster(fleet.MANAGEMENT).kubeconfig
    result = CliRunner().invoke(cli_app, [*args, "--kubeconfig", kubeconfig])
    assert result.exit_code == 0, result.output
    return result.output


def test_a_paused_promotion_starts_nothing_new_and_resumes_where_it_stopped(
    controller: ControllerThread,
    management: Client,
    members: dict[str, Client],
    repo: chartrepo.ChartRepo,
    local_fleet: fleet.FleetState,
) -> None:
    """`fleetwave pause promotion` (spec.paused): dev's delay runs out while paused and staging still
    gets nothing; `fleetwave resume promotion` goes on at once (the delay kept its start), no restart."""
    name = "paused-rollout"
    apply(management, promotion_doc(name, repo.url, dev_delay="4s"))
    with deleted_after(management, name):
        wait_for(lambda: stage_phases(management, name).get("dev") == "WaitingAfter", what="dev delivered")
        out = _cli(local_fleet, "pause", "promotion", name)
        assert f"clusterpromotion/{name} paused" in out
        paused = wait_for(
            lambda: (st := status(management, name)).get("rollout", {}).get("phase") == "Paused" and st,
            what="the promotion paused",
        )
        progressing = next(c for c in paused["conditions"] if c["type"] == "Progressing")
        assert (progressing["status"], progressing["reason"]) == ("False", "Paused")
        delivered = _t(paused["rollout"]["stages"][0]["deliveredAt"])
        # Well past the dev delay: still nothing beyond dev.
        wait_for(
            lambda: dt.datetime.now(dt.UTC) > delivered + dt.timedelta(seconds=6), what="the delay ran out"
        )
        assert stage_phases(management, name).get("staging") == "Pending"
        assert versions(members, name) == {"member-1": "1.0.0", "member-2": None, "member-3": None}
        assert "already paused" in _cli(local_fleet, "pause", "promotion", name)
        _cli(local_fleet, "resume", "promotion", name)
        wait_for(
            lambda: stage_phases(management, name).get("production") == "Succeeded", what="production done"
        )
        assert versions(members, name) == {"member-1": "1.0.0", "member-2": "1.0.0", "member-3": "1.0.0"}
        record = status(management, name)["rollout"]
        assert _t(record["startedAt"]) < delivered  # the same rollout went on: it was never restarted


def test_a_failure_budget_sets_a_failed_cluster_aside_then_stops_the_promotion_past_it(
    controller: ControllerThread, management: Client, members: dict[str, Client], repo: chartrepo.ChartRepo
) -> None:
    """failureBudget (issue 13): helm fails everywhere (bad values); dev's one failure is within the
    stage's and the promotion's limit, so after the grace period dev is passed without it and staging
    starts; staging's failure is the second in the promotion, past `maxFailed: 1`: the promotion stops,
    Failed with FailureBudgetExceeded naming both clusters, and production is never reached."""
    name = "budgeted"
    doc = promotion_doc(name, repo.url, values="replicas: true\n", dev_delay="0s")
    doc["spec"]["failureBudget"] = {"maxFailedPerStage": 1, "maxFailed": 1, "gracePeriod": "3s"}
    apply(management, doc)
    with deleted_after(management, name):
        stopped = wait_for(
            lambda: (st := status(management, name)).get("rollout", {}).get("phase") == "Failed" and st,
            what="the promotion stopped by its failure budget",
        )
        record = {s["name"]: s for s in stopped["rollout"]["stages"]}
        assert record["dev"]["phase"] == "Succeeded"
        assert [a["cluster"] for a in record["dev"]["setAside"]] == ["fleetwave-system/member-1"]
        # The delivery's error as it stood when the grace ran out (helm's first refusal, or its retry's).
        assert "Helm" in record["dev"]["setAside"][0]["message"]
        assert record["staging"]["phase"] == "Failed"
        assert record["production"]["phase"] == "Pending"
        progressing = next(c for c in stopped["conditions"] if c["type"] == "Progressing")
        assert progressing["reason"] == "FailureBudgetExceeded"
        assert "2 failed clusters in the rollout, 1 allowed" in progressing["message"]
        assert "member-1:" in progressing["message"]
        assert "member-2:" in progressing["message"]
        # The grace period was honoured: staging started no sooner than 3 s after dev's failure.
        assert _t(record["staging"]["startedAt"]) - _t(record["dev"]["startedAt"]) >= dt.timedelta(seconds=3)
        assert profiles_of(management, name) == {f"{name}-dev", f"{name}-staging"}
        assert versions(members, name)["member-3"] is None


NO_DEBUG_IN_PROD = """
function evaluate()
  if string.find(obj.data.message or "", "debug", 1, true) then
    return {status = "Degraded", message = "a debug build must not run in production"}
  end
  return {status = "Healthy", message = "no debug build"}
end
"""


def _helm_history(helm: str, kubeconfig: str, release: str) -> list[str]:
    """The chart of every revision of a release on a member, oldest first."""
    proc = subprocess.run(
        [helm, "--kubeconfig", kubeconfig, "history", release, "--namespace", release, "-o", "json"],
        capture_output=True,
        text=True,
        check=True,
    )
    return [entry["chart"] for entry in json.loads(proc.stdout)]


def test_a_promotion_failing_its_prod_health_check_rolls_every_updated_cluster_back(
    controller: ControllerThread,
    management: Client,
    members: dict[str, Client],
    repo: chartrepo.ChartRepo,
    local_fleet: fleet.FleetState,
    bins: binaries.Binaries,
) -> None:
    """onFailure: Rollback (issue 13): 1.0.0 reaches every stage; 1.1.0, a debug build, reaches dev
    and staging, then production's post-delay health check keeps failing past the grace period. The
    promotion rolls production, then staging, then dev back to 1.0.0 and ends RolledBack naming the
    check; each member's Helm history shows 1.0.0 -> 1.1.0 -> 1.0.0 (upgraded back in place: never
    uninstalled on the way), and status.revisions tells the story."""
    name = "rolls-back"
    doc = promotion_doc(name, repo.url, dev_delay="0s")
    check = {"name": "no-debug-build", "group": "", "version": "v1", "kind": "ConfigMap"}
    check |= {"namespace": name, "resourceName": f"{name}-config", "script": NO_DEBUG_IN_PROD}
    doc["spec"]["stages"][2]["trigger"] = {"auto": {"postDelayHealthChecks": [check]}}
    doc["spec"]["onFailure"] = "Rollback"
    doc["spec"]["failureBudget"] = {"gracePeriod": "3s"}
    apply(management, doc)
    resource = kinds.resource("ClusterPromotion")
    with deleted_after(management, name):
        wait_for(
            lambda: status(management, name).get("rollout", {}).get("phase") == "Succeeded", what="1.0.0"
        )
        debug = [
            {"op": "replace", "path": "/spec/profileSpec/helmCharts/0/chartVersion", "value": "1.1.0"},
            {"op": "add", "path": "/spec/profileSpec/helmCharts/0/values", "value": "message: debug build\n"},
        ]
        management.patch(resource, name, debug, patch_type=PatchType.JSON)
        ended = wait_for(
            lambda: (st := status(management, name)).get("rollout", {}).get("phase") == "RolledBack" and st,
            what="the promotion rolled back",
            timeout=180,
        )
        assert versions(members, name) == {"member-1": "1.0.0", "member-2": "1.0.0", "member-3": "1.0.0"}
        for member in local_fleet.members:
            history = _helm_history(bins.path("helm"), member.kubeconfig, name)
            assert history == ["hello-1.0.0", "hello-1.1.0", "hello-1.0.0"], member.name
        record = ended["rollout"]
        assert record["stages"][2]["phase"] == "Failed"  # what happened forward is kept
        back = record["rollback"]
        assert [s["name"] for s in back["stages"]] == ["production", "staging", "dev"]
        assert all(s["phase"] == "Succeeded" for s in back["stages"])
        # Reverse stage order, one stage at a time.
        assert _t(back["stages"][0]["succeededAt"]) <= _t(back["stages"][1]["startedAt"])
        assert _t(back["stages"][1]["succeededAt"]) <= _t(back["stages"][2]["startedAt"])
        succeeded = next(c for c in ended["conditions"] if c["type"] == "Succeeded")
        assert succeeded["reason"] == "RolledBack"
        assert "rolled back to revision 1" in succeeded["message"]
        assert "no-debug-build" in succeeded["message"]
        assert "a debug build must not run in production" in succeeded["message"]
        revisions = ended["revisions"]
        assert [(r["revision"], r["outcome"]) for r in revisions] == [(1, "Succeeded"), (2, "RolledBack")]
        assert revisions[1]["rolledBackTo"] == "revision 1"


ALWAYS_DEGRADED = """
function evaluate()
  return {status = "Degraded", message = "this check is wrong: it fails every revision"}
end
"""


def test_a_rollback_never_waits_on_the_check_that_failed_and_leaves_no_cluster_on_the_bad_revision(
    controller: ControllerThread,
    management: Client,
    members: dict[str, Client],
    repo: chartrepo.ChartRepo,
) -> None:
    """ADR 0078: 1.0.0 succeeds everywhere; revision 2 moves to 1.1.0 and adds a staging health check
    that fails on every revision (a wrong check). Past the grace the promotion rolls back: staging,
    whose check still fails on 1.0.0, and then dev are put back — the rollback is not held at the
    gate that failed — and it ends RolledBack with no cluster on 1.1.0, the check's verdict on record."""
    name = "wrong-check"
    doc = promotion_doc(name, repo.url, dev_delay="0s")
    doc["spec"]["onFailure"] = "Rollback"
    doc["spec"]["failureBudget"] = {"gracePeriod": "2s"}
    apply(management, doc)
    with deleted_after(management, name):
        wait_for(
            lambda: status(management, name).get("rollout", {}).get("phase") == "Succeeded", what="1.0.0"
        )
        check = {"name": "wrong", "group": "", "version": "v1", "kind": "ConfigMap"}
        check |= {"namespace": name, "resourceName": f"{name}-config", "script": ALWAYS_DEGRADED}
        doc["spec"]["profileSpec"]["helmCharts"][0]["chartVersion"] = "1.1.0"
        doc["spec"]["stages"][1]["trigger"] = {"auto": {"postDelayHealthChecks": [check]}}
        apply(management, doc)
        ended = wait_for(
            lambda: (st := status(management, name)).get("rollout", {}).get("phase") == "RolledBack" and st,
            what="the promotion rolled back past its failing check",
            timeout=180,
        )
        assert versions(members, name) == {"member-1": "1.0.0", "member-2": "1.0.0", "member-3": "1.0.0"}
        back = ended["rollout"]["rollback"]
        assert [(s["name"], s["phase"]) for s in back["stages"]] == [
            ("staging", "Succeeded"),
            ("dev", "Succeeded"),
        ]
        assert "fails every revision" in back["stages"][0]["message"]  # the health it saw, reported
        assert ended["rollout"]["stages"][2]["phase"] == "Pending"  # production never ran 1.1.0


def test_fleetwave_rollback_returns_a_succeeded_promotion_to_its_previous_revision(
    controller: ControllerThread,
    management: Client,
    members: dict[str, Client],
    repo: chartrepo.ChartRepo,
    local_fleet: fleet.FleetState,
) -> None:
    """`fleetwave rollback promotion NAME` on demand: 1.0.0 then 1.1.0 both succeed everywhere; the
    rollback puts 1.0.0 back on every member and the promotion ends RolledBack. Asking again says so
    and changes nothing; a promotion with nothing earlier to return to is refused with the reason."""
    name = "rolled-back-on-demand"
    apply(management, promotion_doc(name, repo.url, dev_delay="0s"))
    resource = kinds.resource("ClusterPromotion")

    def phase() -> str:
        return str(status(management, name).get("rollout", {}).get("phase"))

    with deleted_after(management, name):
        wait_for(lambda: phase() == "Succeeded", what="1.0.0 everywhere")
        refused = CliRunner().invoke(
            cli_app,
            ["rollback", "promotion", name, "--kubeconfig", local_fleet.cluster(fleet.MANAGEMENT).kubeconfig],
        )
        assert refused.exit_code == 1
        assert "nothing to roll back to" in refused.output
        upgrade = [{"op": "replace", "path": "/spec/profileSpec/helmCharts/0/chartVersion", "value": "1.1.0"}]
        management.patch(resource, name, upgrade, patch_type=PatchType.JSON)
        wait_for(
            lambda: phase() == "Succeeded" and versions(members, name)["member-3"] == "1.1.0",
            what="1.1.0 everywhere",
        )
        said = _cli(local_fleet, "rollback", "promotion", name)
        assert "rolling revision 2 back to revision 1" in said
        wait_for(lambda: phase() == "RolledBack", what="rolled back on demand")
        assert versions(members, name) == {"member-1": "1.0.0", "member-2": "1.0.0", "member-3": "1.0.0"}
        ended = status(management, name)
        assert ended["rollout"]["rollback"]["reason"] == "requested with fleetwave rollback"
        assert [r["outcome"] for r in ended["revisions"]] == ["Succeeded", "RolledBack"]
        assert "already RolledBack" in _cli(local_fleet, "rollback", "promotion", name)

        def history() -> dict[str, Any] | None:
            # Events are written in the background, after the status that announces them.
            seen = json.loads(_cli(local_fleet, "history", "promotion", name, "-o", "json"))
            return seen if "RolledBack" in [e["reason"] for e in seen["events"]] else None

        told = wait_for(history, what="the RolledBack Event in the promotion's history", timeout=30)
        assert [(r["revision"], r["outcome"]) for r in told["revisions"]] == [
            (1, "Succeeded"),
            (2, "RolledBack"),
        ]
        as_yaml = yaml.safe_load(_cli(local_fleet, "history", "promotion", name, "-o", "yaml"))
        assert as_yaml["revisions"] == told["revisions"]
        reasons = [e["reason"] for e in told["events"]]
        assert "RollingBack" in reasons
        assert reasons.index("RollingBack") < reasons.index("RolledBack")
        table = _cli(local_fleet, "history", "promotion", name)
        assert "rolled back to revision 1" in table
