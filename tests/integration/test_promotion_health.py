"""Seed 001's flow on the real fleet: maxUpdate paces a profile one cluster at a time and a cluster
only frees its slot once its Lua validateHealths pass; postDelayHealthChecks (Lua with getResource)
gate a promotion's next stage and report which cluster fails and why."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from lightkube import ApiError, Client, codecs
from lightkube.resources.core_v1 import ConfigMap, Namespace
from promotion_support import (
    ControllerThread,
    registered,
    running_controller,
    stage_phases,
    status,
    wait_for,
)

from fleetwave.kube import kinds
from fleetwave.local import binaries, fleet
from fleetwave.mgmt import manifests

GATE_LUA = """
function evaluate()
  local hs = {healthy = false, message = "gate closed on this cluster"}
  if obj.data ~= nil and obj.data.go == "yes" then
    hs.healthy = true
    hs.message = "gate open"
  end
  return hs
end
"""

# Reads another object of the same cluster, as seed 001's post-delay check does.
SETTINGS_LUA = """
function evaluate()
  local settings = getResource("v1", "ConfigMap", "{ns}", "settings")
  if settings == nil then
    return {status = "Degraded", message = "ConfigMap {ns}/settings is missing"}
  end
  if obj.data.greeting == settings.data.expected then
    return {status = "Healthy", message = "greeting matches"}
  end
  local want = settings.data.expected
  return {status = "Degraded", message = "greeting " .. obj.data.greeting .. " is not " .. want}
end
"""


@pytest.fixture(scope="module")
def controller(
    local_fleet: fleet.FleetState, management: Client, bins: binaries.Binaries
) -> Iterator[ControllerThread]:
    with (
        registered(management, local_fleet),
        running_controller(local_fleet, bins.path("helm"), "health") as thread,
    ):
        yield thread


def policy_configmap(name: str, objects: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "default"},
        "data": {"content.yaml": yaml.safe_dump_all(objects)},
    }


def summaries(management: Client, profile: str) -> list[Any]:
    return list(
        management.list(
            kinds.resource("ClusterSummary"), namespace="*", labels={"fleetwave.io/cluster-profile": profile}
        )
    )


def _ready_condition(management: Client, profile: str, cluster: str) -> dict[str, Any] | None:
    for s in summaries(management, profile):
        if s.spec["clusterName"] == cluster:
            conditions = (s.status or {}).get("conditions", [])
            # Before the check has run, Ready may say "delivering": only its verdict counts here.
            verdicts = (c for c in conditions if c["type"] == "Ready" and "gate" in c.get("message", ""))
            return next(verdicts, None)
    return None


def explain(management: Client, promotion: str) -> str:
    """The promotion's status and every summary of its generated profiles, for a failure message."""
    lines = [f"promotion status: {status(management, promotion)}"]
    for s in management.list(kinds.resource("ClusterSummary"), namespace="*"):
        if promotion in str(s.metadata.labels.get("fleetwave.io/cluster-profile", "")):
            lines.append(f"summary {s.metadata.namespace}/{s.metadata.name}: {s.status}")
    clusters = management.list(kinds.resource("MemberCluster"), namespace="*")
    lines.append(
        "member clusters: " + ", ".join(f"{c.metadata.namespace}/{c.metadata.name}" for c in clusters)
    )
    return "\n".join(lines)


def open_gate(member: Client, namespace: str) -> None:
    member.apply(
        codecs.from_dict(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "gate", "namespace": namespace},
                "data": {"go": "yes"},
            }
        ),
        force=True,
    )


def test_max_update_admits_one_cluster_at_a_time_and_waits_for_validate_healths(
    controller: ControllerThread, management: Client, members: dict[str, Client], namespace: str
) -> None:
    name = "paced"
    gate_closed = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "gate", "namespace": namespace},
        "data": {"go": "no"},
    }
    manifests.apply(management, [policy_configmap(name, [gate_closed])])
    profile = {
        "apiVersion": "fleetwave.io/v1alpha1",
        "kind": "ClusterProfile",
        "metadata": {"name": name},
        "spec": {
            "clusterSelector": {
                "matchExpressions": [{"key": "env", "operator": "In", "values": ["dev", "staging", "prod"]}]
            },
            "maxUpdate": 1,
            "syncMode": "OneTime",  # the test opens the gates by hand; OneTime never re-applies "no"
            "policyRefs": [{"kind": "ConfigMap", "name": name, "namespace": "default"}],
            "validateHealths": [
                {
                    "name": "gate-open",
                    "featureID": "Resources",
                    "group": "",
                    "version": "v1",
                    "kind": "ConfigMap",
                    "namespace": namespace,
                    "resourceName": "gate",
                    "script": GATE_LUA,
                }
            ],
        },
    }
    manifests.apply(management, [profile])
    try:
        for i, member in enumerate(["member-1", "member-2", "member-3"], start=1):
            wait_for(lambda i=i: len(summaries(management, name)) == i, what=f"{i} cluster(s) admitted")
            time.sleep(2)  # give the controller every chance to admit one too many
            admitted = summaries(management, name)
            assert len(admitted) == i, "maxUpdate 1 admitted a cluster before the previous one was healthy"
            assert admitted[-1].spec["clusterName"] == member or member in {
                s.spec["clusterName"] for s in admitted
            }
            # The summary reports its health verdict once delivery and the check ran (slow on a busy
            # machine): wait for the verdict, then check what it says.
            ready = wait_for(lambda m=member: _ready_condition(management, name, m), what=f"{member} verdict")
            assert ready["status"] == "False"
            assert "gate closed" in ready["message"]
            open_gate(members[member], namespace)
        wait_for(
            lambda: (
                all(
                    c["status"] == "True"
                    for s in summaries(management, name)
                    for c in (s.status or {}).get("conditions", [])
                    if c["type"] == "Ready"
                )
                and len(summaries(management, name)) == 3
            ),
            what="all three healthy",
        )
    finally:
        management.delete(kinds.resource("ClusterProfile"), name)
        wait_for(lambda: not summaries(management, name), what="summaries withdrawn")


def test_post_delay_health_checks_with_get_resource_gate_the_next_stage(
    controller: ControllerThread, management: Client, members: dict[str, Client]
) -> None:
    name = "checked"
    ns = "checked-app"
    greeting = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "greeting", "namespace": ns},
        "data": {"greeting": "hello"},
    }
    app_ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
    manifests.apply(management, [policy_configmap(name, [app_ns, greeting])])
    check = {
        "name": "greeting-matches",
        "group": "",
        "version": "v1",
        "kind": "ConfigMap",
        "namespace": ns,
        "resourceName": "greeting",
        "script": SETTINGS_LUA.replace("{ns}", ns),
    }
    promotion = {
        "apiVersion": "fleetwave.io/v1alpha1",
        "kind": "ClusterPromotion",
        "metadata": {"name": name},
        "spec": {
            "profileSpec": {"policyRefs": [{"kind": "ConfigMap", "name": name, "namespace": "default"}]},
            "stages": [
                {
                    "name": "dev",
                    "clusterSelector": {"matchLabels": {"env": "dev"}},
                    "trigger": {"auto": {"delay": "1s", "postDelayHealthChecks": [check]}},
                },
                {"name": "staging", "clusterSelector": {"matchLabels": {"env": "staging"}}},
            ],
        },
    }
    manifests.apply(management, [promotion])
    dev = members["member-1"]
    try:

        def holding() -> str | None:
            stages = {s["name"]: s for s in status(management, name).get("stages") or []}
            text = stages.get("dev", {}).get("currentStatusDescription", "")
            return text if "greeting-matches" in text else None

        message = wait_for(holding, what="dev held by its post-delay check")
        assert "member-1" in message
        assert "settings is missing" in message
        assert stage_phases(management, name)["staging"] == "Pending"

        wrong = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "settings", "namespace": ns},
            "data": {"expected": "bonjour"},
        }
        dev.apply(codecs.from_dict(wrong), force=True)
        wait_for(lambda: "is not bonjour" in (holding() or ""), what="the check's own message")
        assert stage_phases(management, name)["staging"] == "Pending"

        wrong["data"] = {"expected": "hello"}
        dev.apply(codecs.from_dict(wrong), force=True)
        wait_for(
            lambda: stage_phases(management, name).get("staging") == "Succeeded", what="staging promoted"
        )
    finally:
        management.delete(kinds.resource("ClusterPromotion"), name)
        wait_for(
            lambda: not summaries(management, f"{name}-dev") and not summaries(management, f"{name}-staging"),
            what="summaries withdrawn",
        )
        for client in members.values():
            with contextlib.suppress(ApiError):  # best effort: the namespace may not exist there
                client.delete(Namespace, ns)


def test_seed_001_promotion_paces_each_stage_by_max_update_and_checks_dev_with_get_resource(
    controller: ControllerThread, management: Client, members: dict[str, Client], namespace: str
) -> None:
    """Seed 001's shape as one promotion: profileSpec with maxUpdate 1 and a Lua validateHealth;
    dev deploys a settings ConfigMap after its delay (preHealthCheckDeployment) that its post-delay
    check reads with getResource; the next stage (two clusters) is admitted one cluster at a time."""
    name = "seed-001-shape"
    gate_closed = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "gate", "namespace": namespace},
        "data": {"go": "no"},
    }
    greeting = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "greeting", "namespace": namespace},
        "data": {"greeting": "hello"},
    }
    settings = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "settings", "namespace": namespace},
        "data": {"expected": "hello"},
    }
    manifests.apply(
        management,
        [policy_configmap(name, [gate_closed, greeting]), policy_configmap(f"{name}-pre", [settings])],
    )
    gate_check = {
        "name": "gate-open",
        "featureID": "Resources",
        "group": "",
        "version": "v1",
        "kind": "ConfigMap",
        "namespace": namespace,
        "resourceName": "gate",
        "script": GATE_LUA,
    }
    post_check = {
        "name": "greeting-matches",
        "group": "",
        "version": "v1",
        "kind": "ConfigMap",
        "namespace": namespace,
        "resourceName": "greeting",
        "script": SETTINGS_LUA.replace("{ns}", namespace),
    }
    promotion = {
        "apiVersion": "config.projectsveltos.io/v1beta1",
        "kind": "ClusterPromotion",
        "metadata": {"name": name},
        "spec": {
            "profileSpec": {
                "maxUpdate": 1,
                "syncMode": "OneTime",  # the test opens the gates by hand; OneTime never re-applies "no"
                "policyRefs": [{"kind": "ConfigMap", "name": name, "namespace": "default"}],
                "validateHealths": [gate_check],
            },
            "stages": [
                {
                    "name": "dev",
                    "clusterSelector": {"matchLabels": {"env": "dev"}},
                    "trigger": {
                        "auto": {
                            "delay": "1s",
                            "preHealthCheckDeployment": [
                                {"kind": "ConfigMap", "name": f"{name}-pre", "namespace": "default"}
                            ],
                            "postDelayHealthChecks": [post_check],
                        }
                    },
                },
                {
                    "name": "staging-and-production",
                    "clusterSelector": {
                        "matchExpressions": [{"key": "env", "operator": "In", "values": ["staging", "prod"]}]
                    },
                },
            ],
        },
    }
    manifests.apply(management, manifests.documents(yaml.safe_dump(promotion)))
    later = f"{name}-staging-and-production"
    try:
        wait_for(lambda: summaries(management, f"{name}-dev"), what="dev admitted")
        wait_for(lambda: _ready_condition(management, f"{name}-dev", "member-1"), what="dev judged")
        assert not summaries(management, later)  # dev is not healthy yet: nothing further
        open_gate(members["member-1"], namespace)
        # dev healthy -> delay -> settings deployed -> getResource check passes -> next stage.
        wait_for(
            lambda: summaries(management, later),
            timeout=180,
            what="next stage admitted",
            explain=lambda: explain(management, name),
        )
        # The check passed by reading settings (it says "missing" otherwise); the preHealthCheckDeployment
        # is withdrawn once the stage is done with it.
        wait_for(
            lambda: (
                not list(
                    members["member-1"].list(
                        ConfigMap, namespace=namespace, fields={"metadata.name": "settings"}
                    )
                )
            ),
            what="settings withdrawn after dev",
            explain=lambda: (
                "profiles: "
                + str([p.metadata.name for p in management.list(kinds.resource("ClusterProfile"))])
                + "\n"
                + explain(management, name)
            ),
        )
        opened: set[str] = set()
        for admitted in (1, 2):
            wait_for(lambda a=admitted: len(summaries(management, later)) == a, what=f"{admitted} admitted")
            time.sleep(2)  # every chance to admit one too many
            now = {s.spec["clusterName"] for s in summaries(management, later)}
            assert len(now) == admitted, "maxUpdate 1 admitted a cluster before the previous one was healthy"
            (cluster,) = now - opened
            verdict = wait_for(
                lambda c=cluster: _ready_condition(management, later, c), what=f"{cluster} judged"
            )
            assert verdict["status"] == "False"  # its gate is closed: it holds the next cluster back
            open_gate(members[cluster], namespace)
            opened.add(cluster)
        wait_for(
            lambda: stage_phases(management, name).get("staging-and-production") == "Succeeded", what="done"
        )
    finally:
        management.delete(kinds.resource("ClusterPromotion"), name)
        wait_for(
            lambda: not summaries(management, f"{name}-dev") and not summaries(management, later),
            what="withdrawn",
        )
