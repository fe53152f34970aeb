"""Sveltos' ClusterSet active/passive failover (ADR 0108) on the real local fleet, in the Sveltos groups
(`install --upstream-apis`), driven with the real `kubectl` and YAML as Sveltos' "ClusterSet / Set"
page writes it: two SveltosClusters labelled env=prod, a ClusterSet choosing one of them
(maxReplicas 1), a ClusterProfile delivering to the set's choice through setRefs. The chosen
cluster is paused: the set fails over to the other one and the profile delivers there.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import upstream_support
import yaml
from lightkube import ApiError, Client
from lightkube.resources.core_v1 import ConfigMap
from promotion_support import ControllerThread, wait_for
from upstream_support import Kubectl

from fleetwave.local import binaries, fleet

NS = "civo"  # the SveltosClusters' namespace, as on the docs page
CONTENT_NS = "failover-content"  # where the profile's policyRefs ConfigMap lives
LIB = "lib.projectsveltos.io"
CONFIG = "config.projectsveltos.io"
PAIR = ("member-1", "member-2")


@pytest.fixture(scope="module")
def kubectl(
    local_fleet: fleet.FleetState, bins: binaries.Binaries, tmp_path_factory: pytest.TempPathFactory
) -> Kubectl:
    cache = tmp_path_factory.mktemp("sets-kube-cache")
    return Kubectl(bins.path("kubectl"), local_fleet.cluster(fleet.MANAGEMENT).kubeconfig, cache)


def _registration(state: fleet.FleetState) -> str:
    """Two SveltosClusters labelled env=prod in one namespace, kubeconfigs under Sveltos' default
    Secret names, and the ConfigMap the profile delivers."""
    docs: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}},
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": CONTENT_NS}},
    ]
    for member in (m for m in state.members if m.name in PAIR):
        kubeconfig = base64.b64encode(Path(member.kubeconfig).read_bytes()).decode()
        docs += [
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": f"{member.name}-sveltos-kubeconfig", "namespace": NS},
                "data": {"kubeconfig": kubeconfig},
            },
            {
                "apiVersion": f"{LIB}/v1beta1",
                "kind": "SveltosCluster",
                "metadata": {"name": member.name, "namespace": NS, "labels": {"env": "prod"}},
                "spec": {},
            },
        ]
    marker = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "active", "namespace": "default"}}
    docs.append(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "active-marker", "namespace": CONTENT_NS},
            "data": {"marker.yaml": yaml.safe_dump({**marker, "data": {"role": "active"}})},
        }
    )
    return yaml.safe_dump_all(docs)


@pytest.fixture(scope="module")
def controller(
    local_fleet: fleet.FleetState, management: Client, bins: binaries.Binaries, kubectl: Kubectl
) -> Iterator[ControllerThread]:
    def register() -> None:
        kubectl("api-resources")  # refresh kubectl's discovery after switching (ADR 0062)
        kubectl("apply -f -", stdin=_registration(local_fleet))

    def cleanup() -> None:
        kubectl(f"delete sveltoscluster --all -n {NS} --wait=false")
        kubectl(f"delete namespace {CONTENT_NS} --wait=false")

    with upstream_support.upstream_controller(
        local_fleet, management, bins, "sets", register, cleanup=cleanup
    ) as thread:
        yield thread


# The docs page's ClusterSet and ClusterProfile, with this fleet's content in place of its chart.
CLUSTER_SET = f"""apiVersion: {LIB}/v1beta1
kind: ClusterSet
metadata:
  name: prod
spec:
  clusterSelector:
    matchLabels:
      env: prod
  maxReplicas: 1
"""
PROFILE = f"""apiVersion: {CONFIG}/v1beta1
kind: ClusterProfile
metadata:
  name: deploy-on-active
spec:
  setRefs:
  - prod
  policyRefs:
  - kind: ConfigMap
    name: active-marker
    namespace: {CONTENT_NS}
"""


def _selected(kubectl: Kubectl) -> list[str]:
    got = kubectl.yaml(f"get clusterset.{LIB}/prod -o yaml")
    return [
        f"{r['namespace']}/{r['name']}" for r in (got.get("status") or {}).get("selectedClusterRefs") or []
    ]


def _matching(kubectl: Kubectl) -> list[str]:
    profile = kubectl.yaml(f"get clusterprofile.{CONFIG}/deploy-on-active -o yaml")
    return [c["name"] for c in (profile.get("status") or {}).get("matchingClusters") or []]


def _has_marker(member: Client) -> bool:
    try:
        return (member.get(ConfigMap, "active", namespace="default").data or {}).get("role") == "active"
    except ApiError as e:
        if e.status.code == 404:
            return False
        raise


def _explain(kubectl: Kubectl) -> Callable[[], str]:
    return lambda: kubectl(f"get clusterset.{LIB}/prod clusterprofile.{CONFIG}/deploy-on-active -o yaml")


def test_a_cluster_set_fails_over_to_the_other_member_and_the_profile_follows(
    controller: ControllerThread, kubectl: Kubectl, members: dict[str, Client]
) -> None:
    wait_for(
        lambda: all(
            kubectl.yaml(f"get sveltoscluster.{LIB}/{m} -n {NS} -o yaml").get("status", {}).get("ready")
            for m in PAIR
        ),
        what="both SveltosClusters ready",
    )
    kubectl("apply -f -", stdin=CLUSTER_SET + "---\n" + PROFILE)
    try:
        (active,) = wait_for(
            lambda: _selected(kubectl), what="the set's first choice", explain=_explain(kubectl)
        )
        got = kubectl.yaml(f"get clusterset.{LIB}/prod -o yaml")
        matching = {f"{r['namespace']}/{r['name']}" for r in got["status"]["matchingClusterRefs"]}
        assert matching == {f"{NS}/{m}" for m in PAIR}
        assert {r["kind"] for r in got["status"]["selectedClusterRefs"]} == {"SveltosCluster"}
        first = active.partition("/")[2]
        (second,) = (m for m in PAIR if m != first)
        wait_for(lambda: _has_marker(members[first]), what=f"the profile delivered to {first}")
        assert not _has_marker(members[second])  # the passive member gets nothing
        wait_for(lambda: _matching(kubectl) == [first], what="the profile matching the set's choice")

        # The active member goes away (paused: nothing is delivered to it any more).
        kubectl(f"patch sveltoscluster {first} -n {NS} --type merge -p " + """'{"spec":{"paused":true}}'""")
        wait_for(
            lambda: _selected(kubectl) == [f"{NS}/{second}"],
            what=f"the set failing over to {second}",
            explain=_explain(kubectl),
        )
        wait_for(lambda: _has_marker(members[second]), what=f"the profile delivering to {second}")
        # The member let go is one the profile no longer selects: reachable (only paused), it has
        # the content withdrawn (stopMatchingBehavior WithdrawPolicies, the default).
        wait_for(lambda: not _has_marker(members[first]), what=f"the content withdrawn from {first}")
        wait_for(
            lambda: _matching(kubectl) == [second],
            what="the profile matching the new choice only",
            explain=_explain(kubectl),
        )
        events = kubectl("get events -n default --field-selector involvedObject.name=prod -o yaml")
        assert f"let go of {NS}/{first} (not ready: paused); chose {NS}/{second}" in events
    finally:
        kubectl(
            f"patch sveltoscluster {PAIR[0]} -n {NS} --type merge -p " + """'{"spec":{"paused":false}}'"""
        )
        kubectl(
            f"patch sveltoscluster {PAIR[1]} -n {NS} --type merge -p " + """'{"spec":{"paused":false}}'"""
        )
        kubectl(f"delete clusterprofile.{CONFIG}/deploy-on-active --wait=true --timeout=120s")
        kubectl(f"delete clusterset.{LIB}/prod")
        wait_for(
            lambda: not any(_has_marker(members[m]) for m in PAIR),
            timeout=120,
            what="the profile's content withdrawn from both members",
        )
