"""Sveltos' namespaced Profile on the real management cluster, in the Sveltos groups (ADR 0110).

Two tenant namespaces each register a SveltosCluster of the same name and the same labels (on
different members). A Profile is Sveltos' YAML as its docs write it, driven with the real kubectl:

- its clusterSelector matches both clusters' labels, yet it delivers only to its own namespace's;
- a Profile whose policyRefs name another namespace's ConfigMap is refused in its status, naming the
  field, and delivers nothing (no ClusterProfile is generated for it);
- deleting a Profile withdraws its content from the member, then the Profile goes.
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

TENANTS = {"tenant-a": "member-1", "tenant-b": "member-2"}  # namespace -> the member its cluster is
CLUSTER = "edge"  # the same SveltosCluster name in both namespaces


@pytest.fixture(scope="module")
def kubectl(
    local_fleet: fleet.FleetState, bins: binaries.Binaries, tmp_path_factory: pytest.TempPathFactory
) -> Kubectl:
    cache = tmp_path_factory.mktemp("kube-cache")
    return Kubectl(bins.path("kubectl"), local_fleet.cluster(fleet.MANAGEMENT).kubeconfig, cache)


def _tenants(state: fleet.FleetState) -> str:
    """Each tenant namespace: a SveltosCluster `edge` labelled env=prod, its kubeconfig in Sveltos'
    default Secret, and a ConfigMap of content naming the tenant."""
    by_name = {m.name: m for m in state.members}
    docs: list[dict[str, Any]] = []
    for namespace, member in TENANTS.items():
        kubeconfig = base64.b64encode(Path(by_name[member].kubeconfig).read_bytes()).decode()
        docs += [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": f"{CLUSTER}-sveltos-kubeconfig", "namespace": namespace},
                "data": {"kubeconfig": kubeconfig},
            },
            {
                "apiVersion": "lib.projectsveltos.io/v1beta1",
                "kind": "SveltosCluster",
                "metadata": {"name": CLUSTER, "namespace": namespace, "labels": {"env": "prod"}},
                "spec": {},
            },
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "content", "namespace": namespace},
                "data": {"cm.yaml": _delivered(namespace)},
            },
        ]
    return yaml.safe_dump_all(docs)


def _delivered(namespace: str) -> str:
    body = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": f"from-{namespace}", "namespace": "default"},
        "data": {"tenant": namespace},
    }
    return yaml.safe_dump(body)


@pytest.fixture(scope="module")
def controller(
    local_fleet: fleet.FleetState, management: Client, bins: binaries.Binaries, kubectl: Kubectl
) -> Iterator[ControllerThread]:
    def register() -> None:
        kubectl("api-resources")  # kubectl caches discovery: refresh it after switching (ADR 0062)
        kubectl("apply -f -", stdin=_tenants(local_fleet))

    def cleanup() -> None:
        kubectl("delete profile.config.projectsveltos.io --all -A --wait=false", ok=False)
        kubectl("delete sveltoscluster --all -A --wait=false")

    with upstream_support.upstream_controller(
        local_fleet, management, bins, "tenancy", register, cleanup=cleanup
    ) as thread:
        yield thread
    kubectl(f"delete namespace {' '.join(TENANTS)} --wait=false", ok=False)


def _profile(name: str, namespace: str, policy_ref: str) -> str:
    """A Profile as Sveltos' docs write one: a clusterSelector and a policyRef."""
    return f"""apiVersion: config.projectsveltos.io/v1beta1
kind: Profile
metadata:
  name: {name}
  namespace: {namespace}
spec:
  clusterSelector:
    matchLabels:
      env: prod
  policyRefs:
  - {policy_ref}
"""


def _on_member(member: Client, name: str) -> ConfigMap | None:
    try:
        return member.get(ConfigMap, name, namespace="default")
    except ApiError as e:
        if e.status.code == 404:
            return None
        raise


def _status(kubectl: Kubectl, namespace: str, name: str) -> dict[str, Any]:
    got = kubectl.yaml(f"get profile.config.projectsveltos.io/{name} -n {namespace} -o yaml")
    return dict(got.get("status") or {})


def _when(value: dict[str, Any], done: Callable[[dict[str, Any]], bool]) -> dict[str, Any] | None:
    return value if done(value) else None


def _ready(status: dict[str, Any]) -> dict[str, Any]:
    return next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), {})


def test_a_profile_delivers_only_to_its_namespaces_cluster_and_withdraws_when_deleted(
    controller: ControllerThread, kubectl: Kubectl, members: dict[str, Client]
) -> None:
    wait_for(
        lambda: all(
            kubectl.yaml(f"get sveltoscluster {CLUSTER} -n {ns} -o yaml").get("status", {}).get("ready")
            for ns in TENANTS
        ),
        what="both SveltosClusters ready",
    )
    kubectl("apply -f -", stdin=_profile("web", "tenant-a", "kind: ConfigMap\n    name: content"))
    mine, theirs = members[TENANTS["tenant-a"]], members[TENANTS["tenant-b"]]
    wait_for(lambda: _on_member(mine, "from-tenant-a"), what="tenant-a's content on its cluster")
    status = wait_for(
        lambda: _when(_status(kubectl, "tenant-a", "web"), lambda s: _ready(s).get("status") == "True"),
        what="the Profile Ready",
    )
    assert status["matchingClusters"] == [
        {
            "apiVersion": "lib.projectsveltos.io/v1beta1",
            "kind": "SveltosCluster",
            "name": CLUSTER,
            "namespace": "tenant-a",
        }
    ]
    assert status["clusterProfileName"] == "p--tenant-a.web"
    assert status["clusterSummaries"] == [f"p--tenant-a.web-sveltos-{CLUSTER}"]
    # Found as Sveltos users find a Profile's summaries: by its label.
    summaries = kubectl(
        "get clustersummary.config.projectsveltos.io -A -l projectsveltos.io/profile-name=web -o name"
    )
    assert summaries.split() == [f"clustersummary.config.projectsveltos.io/p--tenant-a.web-sveltos-{CLUSTER}"]
    assert _on_member(theirs, "from-tenant-a") is None  # same name, same labels, other namespace

    kubectl("delete profile.config.projectsveltos.io/web -n tenant-a --wait=false")
    wait_for(lambda: _on_member(mine, "from-tenant-a") is None, what="the content withdrawn")
    wait_for(
        lambda: not kubectl("get profile.config.projectsveltos.io -n tenant-a -o name").strip(),
        what="the Profile gone",
    )
    assert "p--tenant-a.web" not in kubectl("get clusterprofile.config.projectsveltos.io -o name")


def test_a_profile_naming_another_namespaces_content_is_refused_and_delivers_nothing(
    controller: ControllerThread, kubectl: Kubectl, members: dict[str, Client]
) -> None:
    ref = "kind: ConfigMap\n    name: content\n    namespace: tenant-b"
    kubectl("apply -f -", stdin=_profile("steal", "tenant-a", ref))
    ready = wait_for(
        lambda: _when(_ready(_status(kubectl, "tenant-a", "steal")), lambda r: bool(r.get("reason"))),
        what="the Profile refused",
    )
    assert ready["status"] == "False"
    assert ready["reason"] == "InvalidSpec"
    assert ready["message"].startswith("spec.policyRefs[0].namespace: tenant-b:"), ready["message"]
    assert "p--tenant-a.steal" not in kubectl("get clusterprofile.config.projectsveltos.io -o name")
    for member in members.values():
        assert _on_member(member, "from-tenant-b") is None
    kubectl("delete profile.config.projectsveltos.io/steal -n tenant-a")


def _native_members(state: fleet.FleetState) -> str:
    """The same two tenants' clusters as fleetwave.io MemberClusters (`native`, labelled env=prod),
    with content naming the group it went through."""
    by_name = {m.name: m for m in state.members}
    docs: list[dict[str, Any]] = []
    for namespace, member in TENANTS.items():
        docs += [
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {
                    "name": "native-kubeconfig",
                    "namespace": namespace,
                    "labels": {"fleetwave.io/member-cluster": "native"},
                },
                "stringData": {"kubeconfig": Path(by_name[member].kubeconfig).read_text()},
            },
            {
                "apiVersion": "fleetwave.io/v1alpha1",
                "kind": "MemberCluster",
                "metadata": {"name": "native", "namespace": namespace, "labels": {"env": "prod"}},
                "spec": {"kubeconfigSecretRef": {"name": "native-kubeconfig", "key": "kubeconfig"}},
            },
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "native-content", "namespace": namespace},
                "data": {"cm.yaml": _delivered(namespace).replace("from-", "native-from-")},
            },
        ]
    return yaml.safe_dump_all(docs)


def test_the_native_group_serves_profiles_with_the_same_confinement(
    controller: ControllerThread, kubectl: Kubectl, members: dict[str, Client], local_fleet: fleet.FleetState
) -> None:
    kubectl("apply -f -", stdin=_native_members(local_fleet))
    try:
        profile = _profile("native-web", "tenant-a", "kind: ConfigMap\n    name: native-content")
        kubectl(
            "apply -f -", stdin=profile.replace("config.projectsveltos.io/v1beta1", "fleetwave.io/v1alpha1")
        )
        mine, theirs = members[TENANTS["tenant-a"]], members[TENANTS["tenant-b"]]
        wait_for(lambda: _on_member(mine, "native-from-tenant-a"), what="tenant-a's content, natively")
        got = wait_for(
            lambda: _when(
                dict(
                    kubectl.yaml("get profile.fleetwave.io/native-web -n tenant-a -o yaml").get("status")
                    or {}
                ),
                lambda s: _ready(s).get("status") == "True",
            ),
            what="the native Profile Ready",
        )
        assert [c["namespace"] + "/" + c["name"] for c in got["matchingClusters"]] == ["tenant-a/native"]
        assert _on_member(theirs, "native-from-tenant-a") is None
        kubectl("delete profile.fleetwave.io/native-web -n tenant-a --wait=false")
        wait_for(
            lambda: _on_member(mine, "native-from-tenant-a") is None, what="the native content withdrawn"
        )
    finally:
        kubectl("delete profile.fleetwave.io --all -n tenant-a --wait=false", ok=False)
        kubectl("delete memberclusters.fleetwave.io native -n tenant-a", ok=False)
        kubectl("delete memberclusters.fleetwave.io native -n tenant-b", ok=False)
