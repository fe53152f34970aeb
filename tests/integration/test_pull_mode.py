"""Pull mode on the real local fleet (issue 44, ADR 0106): member-3 (prod) joins through a real
`fleetwave agent run` process on its own kubeconfig; the hub holds no kubeconfig of it. A seed-002
style promotion (Helm chart, upgrade, a manual gate, a Lua health check the agent judges) goes over
two push members and the pull member; the agent refuses foreign work; unregistering revokes it."""

from __future__ import annotations

import collections
import datetime as dt
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from lightkube import ApiError, Client
from lightkube.resources.core_v1 import ConfigMap, Secret
from lightkube.types import PatchType
from promotion_support import (
    CHARTS,
    ControllerThread,
    chart_version,
    deleted_after,
    running_controller,
    stage_phases,
    wait_for,
)
from pull_support import NAMESPACE, AgentProcess, mixed_members, work_of

from fleetwave import cli
from fleetwave.api import pullmode
from fleetwave.controllers.fleet import pull
from fleetwave.kube import kinds
from fleetwave.local import agents as local_agents
from fleetwave.local import audit as local_audit
from fleetwave.local import binaries, chartrepo, fleet
from fleetwave.mgmt import manifests

PULL = "member-3"

HEALTH_LUA = """
function evaluate()
  local hs = {healthy = false, message = "chart not configured yet"}
  if obj.data ~= nil and obj.data.chartVersion ~= nil then
    hs.healthy = true
    hs.message = "chart " .. obj.data.chartVersion .. " configured"
  end
  return hs
end
"""


@pytest.fixture(scope="module")
def repo(bins: binaries.Binaries, tmp_path_factory: pytest.TempPathFactory) -> Iterator[chartrepo.ChartRepo]:
    charts = [(CHARTS / "hello", "1.0.0"), (CHARTS / "hello", "1.1.0")]
    with chartrepo.serve(bins.path("helm"), tmp_path_factory.mktemp("pull-charts"), charts) as served:
        yield served


@pytest.fixture(scope="module")
def agents(
    local_fleet: fleet.FleetState,
    management: Client,
    bins: binaries.Binaries,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[dict[str, AgentProcess]]:
    workdir = tmp_path_factory.mktemp("pull")
    with mixed_members(management, local_fleet, (PULL,), bins.path("helm"), workdir) as started:
        yield started


@pytest.fixture(scope="module")
def controller(
    agents: dict[str, AgentProcess], local_fleet: fleet.FleetState, bins: binaries.Binaries
) -> Iterator[ControllerThread]:
    with running_controller(local_fleet, bins.path("helm"), "pull") as thread:
        yield thread


def promotion_doc(name: str, repo_url: str, version: str) -> dict[str, Any]:
    chart = {
        "repositoryURL": repo_url,
        "repositoryName": "local",
        "chartName": "local/hello",
        "chartVersion": version,
        "releaseName": name,
        "releaseNamespace": name,
        "helmChartAction": "Install",
    }
    check = {
        "name": "chart-configured",
        "featureID": "Helm",
        "group": "",
        "version": "v1",
        "kind": "ConfigMap",
        "namespace": name,
        "resourceName": f"{name}-config",
        "script": HEALTH_LUA,
    }
    return {
        "apiVersion": "config.projectsveltos.io/v1beta1",
        "kind": "ClusterPromotion",
        "metadata": {"name": name},
        "spec": {
            "profileSpec": {"syncMode": "Continuous", "helmCharts": [chart], "validateHealths": [check]},
            "stages": [
                {"name": "dev", "clusterSelector": {"matchLabels": {"env": "dev"}}, "trigger": {"auto": {}}},
                {
                    "name": "staging",
                    "clusterSelector": {"matchLabels": {"env": "staging"}},
                    "trigger": {"manual": {"approved": False, "automaticReset": True}},
                },
                {"name": "production", "clusterSelector": {"matchLabels": {"env": "prod"}}},
            ],
        },
    }


def _approve(management: Client, name: str) -> None:
    approve = [{"op": "replace", "path": "/spec/stages/1/trigger/manual/approved", "value": True}]
    management.patch(kinds.resource("ClusterPromotion"), name, approve, patch_type=PatchType.JSON)


def _summary_of(management: Client, cluster: str, name: str) -> dict[str, Any] | None:
    for s in management.list(kinds.resource("ClusterSummary"), namespace=NAMESPACE):
        raw = s.to_dict()
        labels = raw["metadata"].get("labels") or {}
        if raw["spec"]["clusterName"] == cluster and labels.get(
            "fleetwave.io/cluster-profile", ""
        ).startswith(name):
            return raw
    return None


def test_a_promotion_goes_over_two_push_members_and_one_pull_member_with_an_upgrade_and_a_manual_gate(
    controller: ControllerThread,
    agents: dict[str, AgentProcess],
    management: Client,
    members: dict[str, Client],
    repo: chartrepo.ChartRepo,
) -> None:
    name = "pull-promo"
    manifests.apply(management, manifests.documents(yaml.safe_dump(promotion_doc(name, repo.url, "1.0.0"))))
    with deleted_after(management, name):
        wait_for(lambda: stage_phases(management, name).get("staging") == "WaitingAfter", what="gate")
        _approve(management, name)
        wait_for(
            lambda: stage_phases(management, name).get("production") == "Succeeded",
            what="production done",
            explain=agents[PULL].output,
        )
        assert {m: chart_version(c, name, name) for m, c in members.items()} == dict.fromkeys(
            members, "1.0.0"
        )
        # What the pull member runs came through its work, reported by its agent.
        # Only this promotion's (one work): an earlier module's withdrawn work may be on its way out.
        works = [w for w in work_of(management, PULL) if name in w["spec"]["owner"]]
        assert [w["status"]["agent"] for w in works] == [agents[PULL].identity]
        summary = _summary_of(management, PULL, name)
        assert summary is not None
        ready = next(c for c in summary["status"]["conditions"] if c["type"] == "Ready")
        assert ready["status"] == "True", ready
        # The hub holds no kubeconfig of the pull member.
        with pytest.raises(ApiError):
            management.get(Secret, f"{PULL}-kubeconfig", namespace=NAMESPACE)

        manifests.apply(
            management, manifests.documents(yaml.safe_dump(promotion_doc(name, repo.url, "1.1.0")))
        )
        wait_for(lambda: stage_phases(management, name).get("staging") == "WaitingAfter", what="gate 2")
        assert chart_version(members[PULL], name, name) == "1.0.0"  # prod keeps its revision
        _approve(management, name)
        wait_for(
            lambda: chart_version(members[PULL], name, name) == "1.1.0",
            what="the pull member upgraded",
            explain=agents[PULL].output,
        )
        wait_for(lambda: stage_phases(management, name).get("production") == "Succeeded", what="prod 1.1.0")


def test_the_agent_refuses_work_for_another_cluster_and_work_edited_behind_the_hub(
    agents: dict[str, AgentProcess], management: Client, members: dict[str, Client]
) -> None:
    namespace = pullmode.hub_namespace(f"{NAMESPACE}/{PULL}")
    marker = "refused-marker"

    def work(name: str, cluster: str, revision: str | None = None) -> dict[str, Any]:
        obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": marker, "namespace": "default"}}
        spec: dict[str, Any] = {
            "cluster": cluster,
            "owner": "placement/test",
            "placement": {"inventory": "test", "objects": [obj], "rules": {}, "kinds": []},
            "withdraw": False,
        }
        spec["revision"] = revision or pull.revision_of(spec)
        return {
            "apiVersion": f"{kinds.GROUP}/{kinds.VERSION}",
            "kind": "MemberWork",
            "metadata": {"name": name, "namespace": namespace},
            "spec": spec,
        }

    manifests.apply(management, [work("foreign", "fleetwave-system/member-1")])
    manifests.apply(management, [work("tampered", f"{NAMESPACE}/{PULL}", revision="0" * 32)])
    try:

        def refusals() -> dict[str, str] | None:
            found = {
                w["metadata"]["name"]: str((w.get("status") or {}).get("outcome", {}).get("failureMessage"))
                for w in work_of(management, PULL)
                if w["metadata"]["name"] in ("foreign", "tampered")
            }
            return found if len(found) == 2 and "None" not in found.values() else None

        found = wait_for(refusals, what="both refused", explain=agents[PULL].output)
        assert "this agent delivers to fleetwave-system/member-3 only" in found["foreign"]
        assert "spec.revision does not match" in found["tampered"]
        with pytest.raises(ApiError):
            members[PULL].get(ConfigMap, marker, namespace="default")
    finally:
        for name in ("foreign", "tampered"):
            management.delete(kinds.resource("MemberWork"), name, namespace=namespace)


def test_the_pull_members_agent_is_its_heartbeat_and_the_member_reports_ready(
    agents: dict[str, AgentProcess],
    controller: ControllerThread,
    management: Client,
    local_fleet: fleet.FleetState,
    capsys: pytest.CaptureFixture[str],
) -> None:
    def ready() -> dict[str, Any] | None:
        member = management.get(kinds.resource("MemberCluster"), PULL, namespace=NAMESPACE).to_dict()
        status = member.get("status") or {}
        return status if status.get("ready") and status.get("version") else None

    status = wait_for(ready, what="the pull member ready", explain=agents[PULL].output)
    condition = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert condition["reason"] == "AgentConnected"
    assert agents[PULL].identity in condition["message"]
    with pytest.raises(SystemExit):
        cli.run(
            [
                "--kubeconfig",
                local_fleet.cluster(fleet.MANAGEMENT).kubeconfig,
                "cluster",
                "list",
                "-o",
                "json",
            ]
        )
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)["clusters"]}
    assert (rows[PULL]["mode"], rows[PULL]["kubeconfigSecret"], rows[PULL]["ready"]) == ("pull", None, True)
    assert rows["member-1"]["mode"] == "push"


def test_the_controller_never_contacts_the_pull_member_only_its_agent_does(
    controller: ControllerThread,
    agents: dict[str, AgentProcess],
    management: Client,
    local_fleet: fleet.FleetState,
) -> None:
    """The pull member's audit log over a whole rollout (deliver, judge, withdraw): every request
    from a person or a program is its agent's; the test reads the member through the hub alone."""
    since = dt.datetime.now(dt.UTC)
    name = "pull-audit"
    _content_and_profile(management, name, {})
    try:
        wait_for(lambda: _ready(management, name), what="the profile's summary ready on the pull member")
    finally:
        management.delete(kinds.resource("ClusterProfile"), name)
        wait_for(lambda: _summary_of(management, PULL, name) is None, what="withdrawn through the agent")
        management.delete(ConfigMap, name, namespace="default")
    users = _speakers(local_fleet.cluster(PULL).audit_log, since)
    assert users[local_agents.username()] > 0
    # The member's own components aside (system:apiserver, kube-system's accounts, and the controller
    # manager, scheduler and kwok's fake node, which run as the member's admin), the only identity
    # that spoke to it is its agent's: not the hub's.
    own = ("system:serviceaccount:kube-system:", "system:kube-", "system:apiserver", "system:node")
    others = {u for u in users if not u.startswith(own)}
    assert others == {local_agents.username()}, users


def _speakers(log: Path, since: dt.datetime) -> collections.Counter[str]:
    """Who made the member's completed requests since `since`, its own components left out (told
    apart by their user agent: they share the member's admin identity on the local fleet)."""
    found: collections.Counter[str] = collections.Counter()
    for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
        user = local_audit.completed_user(line, since)
        if user is not None and not str(json.loads(line).get("userAgent", "")).startswith(_COMPONENTS):
            found[user] += 1
    return found


_COMPONENTS = ("kwok/", "kube-controller-manager/", "kube-scheduler/")


def _ready(management: Client, name: str) -> bool:
    summary = _summary_of(management, PULL, name)
    conditions = (summary or {}).get("status", {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def test_a_disconnected_agent_holds_its_members_delivery_with_a_message_and_it_resumes(
    controller: ControllerThread,
    agents: dict[str, AgentProcess],
    management: Client,
    members: dict[str, Client],
) -> None:
    """The agent gone for longer than its lease: the member turns not ready, the profile says it waits
    for it (naming the member and when its agent was last seen), nothing new reaches the member; the
    agent back, the new revision is delivered and the summary turns Ready."""
    agent = agents[PULL]
    agent.kill()
    wait_for(
        lambda: _member_reason(management) == "AgentDisconnected", timeout=90, what="the member not ready"
    )
    name = "pull-offline"
    _content_and_profile(management, name, {})
    try:
        # A member that is not ready gets no new deliveries; once its agent is back, it does.
        agent.start()
        wait_for(
            lambda: _ready(management, name), what="delivered once the agent is back", explain=agent.output
        )
        assert members[PULL].get(ConfigMap, name, namespace="default").metadata.name == name
        agent.kill()
        wait_for(lambda: _member_reason(management) == "AgentDisconnected", timeout=90, what="gone again")
        _content_and_profile(management, name, {"v": "2"})

        def held() -> str | None:
            status = management.get(kinds.resource("ClusterProfile"), name).to_dict().get("status") or {}
            ready = next((c for c in status.get("conditions") or [] if c["type"] == "Ready"), {})
            message = str(ready.get("message") or "")
            return message if "agent not connected" in message else None

        message = wait_for(held, timeout=60, what="the profile waiting for the pull member's agent")
        assert f"waiting for cluster fleetwave-system/{PULL} to become ready" in message
        assert "to become ready: agent not connected (last seen at " in message
        assert (members[PULL].get(ConfigMap, name, namespace="default").data or {}).get("v") is None
        agent.start()
        wait_for(
            lambda: (members[PULL].get(ConfigMap, name, namespace="default").data or {}).get("v") == "2",
            what="the new revision delivered once the agent is back",
            explain=agent.output,
        )
        wait_for(lambda: _ready(management, name), what="Ready again")
    finally:
        if agent.proc is None or agent.proc.poll() is not None:
            agent.start()
        management.delete(kinds.resource("ClusterProfile"), name)
        wait_for(lambda: _summary_of(management, PULL, name) is None, timeout=90, what="withdrawn")
        management.delete(ConfigMap, name, namespace="default")


def _content_and_profile(management: Client, name: str, data: dict[str, str]) -> None:
    """A ConfigMap `name` in default holding one ConfigMap (with `data`) as content, and a
    ClusterProfile `name` delivering it to the prod member (the pull member)."""
    policy = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default"}}
    source = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "default"},
        "data": {"cm.yaml": yaml.safe_dump({**policy, "data": data} if data else policy)},
    }
    profile = {
        "apiVersion": "config.projectsveltos.io/v1beta1",
        "kind": "ClusterProfile",
        "metadata": {"name": name},
        "spec": {
            "clusterSelector": {"matchLabels": {"env": "prod"}},
            "policyRefs": [{"kind": "ConfigMap", "name": name, "namespace": "default"}],
        },
    }
    manifests.apply(management, [source])
    manifests.apply(management, manifests.documents(yaml.safe_dump(profile)))


def _member_reason(management: Client) -> str:
    member = management.get(kinds.resource("MemberCluster"), PULL, namespace=NAMESPACE).to_dict()
    conditions = (member.get("status") or {}).get("conditions") or []
    return str(next((c.get("reason") for c in conditions if c["type"] == "Ready"), ""))


def test_a_failing_pull_delivery_is_retried_with_backoff_not_in_a_loop(
    controller: ControllerThread,
    agents: dict[str, AgentProcess],
    management: Client,
    repo: chartrepo.ChartRepo,
) -> None:
    """A chart version that does not exist fails on the pull member as on a push member; the agent's
    own report does not wake it to try again at once (its retries back off)."""
    name = "pull-failing"
    chart = {
        "repositoryURL": repo.url,
        "repositoryName": "local",
        "chartName": "local/hello",
        "chartVersion": "9.9.9",
        "releaseName": name,
        "releaseNamespace": name,
        "helmChartAction": "Install",
    }
    profile = {
        "apiVersion": "config.projectsveltos.io/v1beta1",
        "kind": "ClusterProfile",
        "metadata": {"name": name},
        "spec": {"clusterSelector": {"matchLabels": {"env": "prod"}}, "helmCharts": [chart]},
    }
    manifests.apply(management, manifests.documents(yaml.safe_dump(profile)))
    try:

        def failures() -> int:
            summary = _summary_of(management, PULL, name) or {}
            found = [
                f.get("consecutiveFailures", 0)
                for f in (summary.get("status") or {}).get("featureSummaries") or []
            ]
            return max(found, default=0)

        wait_for(failures, what="the pull member's delivery failed", explain=agents[PULL].output)
        first = failures()
        # Retried with the controllers' per-key exponential backoff (from a fraction of a second,
        # doubling: about ten tries in these ten seconds, as for a push member); a delivery that
        # its own report woke again fails hundreds of times in this while.
        time.sleep(10)
        assert failures() - first <= 20, failures()
    finally:
        management.delete(kinds.resource("ClusterProfile"), name)
        wait_for(lambda: _summary_of(management, PULL, name) is None, timeout=90, what="withdrawn")
