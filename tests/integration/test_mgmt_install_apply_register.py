"""fleetwave install / apply / cluster register against the real management cluster."""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from lightkube import ApiError, Client, codecs
from lightkube.resources.core_v1 import Node, Secret
from promotion_support import wait_for
from typer.testing import CliRunner

from fleetwave.api import crds
from fleetwave.api.codec import ManifestError
from fleetwave.api.models import KINDS
from fleetwave.cli import app
from fleetwave.delivery import sessions
from fleetwave.delivery.target import MemberTarget
from fleetwave.kube import kinds, sync_ops
from fleetwave.local import binaries, fleet
from fleetwave.mgmt import install, manifests, registration

UPSTREAM_PROMOTION = """
apiVersion: config.projectsveltos.io/v1beta1
kind: ClusterPromotion
metadata:
  name: {name}
spec:
  profileSpec:
    syncMode: Continuous
    helmCharts:
    - repositoryURL: https://kyverno.github.io/kyverno/
      repositoryName: kyverno
      chartName: kyverno/kyverno
      chartVersion: 3.5.2
      releaseName: kyverno-latest
      releaseNamespace: kyverno
      helmChartAction: Install
  stages:
  - name: dev
    clusterSelector:
      matchLabels:
        env: dev
    trigger:
      auto:
        delay: 5m
  - name: production
    clusterSelector:
      matchLabels:
        env: prod
"""


@pytest.fixture(scope="module")
def installed(management: Client) -> Iterator[list[str]]:
    yield install.install(management)
    # Registrations made here must not join the fleets other test modules roll out to.
    for mc in management.list(kinds.resource("MemberCluster"), namespace="fleet-members"):
        management.delete(kinds.resource("MemberCluster"), mc.metadata.name, namespace="fleet-members")


def test_install_establishes_every_crd_the_types_generate(installed: list[str]) -> None:
    assert sorted(installed) == sorted(c["metadata"]["name"] for c in crds.all_crds())
    assert "clusterpromotions.fleetwave.io" in installed


def test_kubectl_explain_teaches_the_api_from_the_installed_crds(
    installed: list[str], local_fleet: fleet.FleetState, bins: binaries.Binaries
) -> None:
    kubeconfig = local_fleet.cluster(fleet.MANAGEMENT).kubeconfig
    argv = [
        bins.path("kubectl"),
        "--kubeconfig",
        kubeconfig,
        "explain",
        "clusterpromotion.spec.stages.trigger",
    ]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=True)
    said = " ".join(done.stdout.split())
    crd = crds.crd_for(KINDS["ClusterPromotion"])["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    trigger = crd["properties"]["spec"]["properties"]["stages"]["items"]["properties"]["trigger"]
    for text in (trigger["description"], trigger["properties"]["auto"]["description"]):
        assert " ".join(text.split()) in said
    assert "<empty>" not in said


def test_apply_maps_an_upstream_sveltos_promotion_to_the_native_kind(
    installed: list[str], management: Client
) -> None:
    docs = manifests.documents(UPSTREAM_PROMOTION.format(name="upstream-kyverno"))
    applied = manifests.apply(management, docs)
    assert applied[0].converted_from == "config.projectsveltos.io/v1beta1"
    stored = management.get(kinds.resource("ClusterPromotion"), "upstream-kyverno")
    assert stored.spec["stages"][0]["trigger"]["auto"]["delay"] == "5m"
    assert stored.spec["profileSpec"]["helmCharts"][0]["chartVersion"] == "3.5.2"
    # Defaults come from the CRD schema, applied by the API server itself.
    assert stored.spec["profileSpec"]["stopMatchingBehavior"] == "WithdrawPolicies"


def test_apply_reads_manifests_from_stdin_as_kubectl_does(
    installed: list[str], management: Client, local_fleet: fleet.FleetState
) -> None:
    kubeconfig = local_fleet.cluster(fleet.MANAGEMENT).kubeconfig
    text = UPSTREAM_PROMOTION.format(name="from-stdin")
    result = CliRunner().invoke(app, ["apply", "-f", "-", "--kubeconfig", kubeconfig], input=text)
    try:
        assert result.exit_code == 0, result.output
        assert "clusterpromotion/from-stdin applied (from config.projectsveltos.io/v1beta1)" in result.output
        stored = management.get(kinds.resource("ClusterPromotion"), "from-stdin")
        assert stored.spec["stages"][1]["name"] == "production"
    finally:
        management.delete(kinds.resource("ClusterPromotion"), "from-stdin")


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (
            lambda d: d["spec"]["stages"][0]["trigger"].update(manual={"approved": False}),
            "exactly one of auto or manual",
        ),
        (lambda d: d["spec"]["stages"][1].update(name="dev"), "unique"),
        (lambda d: d["spec"]["profileSpec"].update(maxUpdate="150%"), "maxUpdate"),
        (lambda d: d["spec"]["stages"][0]["trigger"]["auto"].update(delay="5 minutes"), "delay"),
    ],
)
def test_the_api_server_rejects_invalid_promotions_at_admission(
    installed: list[str], management: Client, mutate: object, message: str
) -> None:
    doc = manifests.documents(UPSTREAM_PROMOTION.format(name="bad-promotion"))[0]
    native = manifests.to_native(doc)
    assert callable(mutate)
    mutate(native)
    with pytest.raises(ApiError) as err:
        management.create(codecs.from_dict(native))
    assert err.value.status.code == 422
    assert message.lower() in (err.value.status.message or "").lower()


def test_register_stores_the_kubeconfig_in_a_secret_and_probes_the_member(
    installed: list[str], management: Client, local_fleet: fleet.FleetState
) -> None:
    member = local_fleet.members[0]
    runner = CliRunner()
    result = runner.invoke(
        app,
        [
            "cluster",
            "register",
            member.name,
            "--cluster-kubeconfig",
            member.kubeconfig,
            "--labels",
            "env=dev,tier=web",
            "--namespace",
            "fleet-members",
            "--kubeconfig",
            local_fleet.cluster(fleet.MANAGEMENT).kubeconfig,
        ],
    )
    assert result.exit_code == 0, result.output
    assert "Kubernetes v1.35" in result.output
    assert member.token not in result.output  # the kubeconfig is never echoed
    mc = management.get(kinds.resource("MemberCluster"), member.name, namespace="fleet-members")
    assert mc.metadata.labels == {"env": "dev", "tier": "web"}
    assert mc.status["ready"] is True
    assert mc.status["version"].startswith("v1.35")
    stored = management.get(Secret, registration.secret_name(member.name), namespace="fleet-members")
    assert stored.data is not None
    assert registration.KUBECONFIG_KEY in stored.data


def test_a_member_that_is_down_is_registered_as_not_ready(
    installed: list[str], management: Client, tmp_path: Path
) -> None:
    dead = _dead_kubeconfig(tmp_path)
    probe = registration.register(
        management, name="gone", namespace="fleet-members", kubeconfig=dead.read_bytes(), labels={"env": "x"}
    ).probe
    assert not probe.ready
    assert "unreachable" in probe.message
    mc = management.get(kinds.resource("MemberCluster"), "gone", namespace="fleet-members")
    assert mc.status["ready"] is False
    assert "unreachable" in mc.status["failureMessage"]


def test_the_probe_counts_a_members_nodes(local_fleet: fleet.FleetState, members: dict[str, Client]) -> None:
    member = local_fleet.members[0]
    listed = len(list(members[member.name].list(Node)))
    probe = registration.probe(Path(member.kubeconfig).read_bytes())
    assert probe.ready
    assert listed >= 1  # a full member's kwok node
    assert probe.nodes == listed


def test_the_controllers_probe_reuses_the_members_pooled_session(
    local_fleet: fleet.FleetState, members: dict[str, Client], tmp_path: Path
) -> None:
    # The controller probes every member every PROBE_INTERVAL: over the pool's connection, not a
    # handshake (and a thread) per probe; the answers are those of the one-off probe.
    member = local_fleet.members[0]
    target = MemberTarget.from_file(member.name, member.kubeconfig)
    dead = MemberTarget(name="gone", kubeconfig=_dead_kubeconfig(tmp_path).read_bytes())

    async def probes() -> tuple[list[registration.Probe], int, registration.Probe]:
        pool = sessions.pool()
        try:
            found = [await registration.probe_pooled(target) for _ in range(3)]
            opened = pool.created
            return found, opened, await registration.probe_pooled(dead)
        finally:
            await pool.close()

    found, opened, gone = asyncio.run(probes())
    one_off = registration.probe(Path(member.kubeconfig).read_bytes())
    assert opened == 1
    assert all(p == one_off for p in found)
    assert one_off.ready
    assert one_off.nodes == len(list(members[member.name].list(Node)))
    assert not gone.ready
    assert gone.message.startswith("API server unreachable: ConnectError")


def _dead_kubeconfig(tmp_path: Path) -> Path:
    """A kubeconfig of a server nobody listens on."""
    dead = tmp_path / "dead.kubeconfig"
    dead.write_text(
        "apiVersion: v1\nkind: Config\nclusters: [{name: x, cluster: {server: 'https://127.0.0.1:9'}}]\n"
        "users: [{name: x, user: {token: t}}]\ncontexts: [{name: x, context: {cluster: x, user: x}}]\n"
        "current-context: x\n"
    )
    return dead


WIDGETS_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.apply-test.example.com"},
    "spec": {
        "group": "apply-test.example.com",
        "names": {"kind": "Widget", "plural": "widgets", "singular": "widget", "listKind": "WidgetList"},
        "scope": "Namespaced",
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
                        },
                    }
                },
            }
        ],
    },
}
WIDGET = {
    "apiVersion": "apply-test.example.com/v1",
    "kind": "Widget",
    "metadata": {"name": "w1"},
    "spec": {"size": 3},
}


def test_apply_applies_a_custom_resource_its_crd_serves_in_the_default_namespace(
    installed: list[str], management: Client
) -> None:
    manifests.apply(management, [WIDGETS_CRD])
    info = kinds.KindInfo(kinds.GVK("apply-test.example.com/v1", "Widget"), "widgets", namespaced=True)
    try:
        wait_for(
            lambda: kinds.SyncKinds(management).find(info.gvk),
            what="the Widget CRD served",
        )
        applied = manifests.apply(management, [WIDGET], default_namespace="default")
        assert [(a.kind, a.name, a.namespace) for a in applied] == [("Widget", "w1", "default")]
        stored = management.get(kinds.resource_class(info), "w1", namespace="default")
        assert stored["spec"] == {"size": 3}
    finally:
        management.delete(
            kinds.builtin_resource("apiextensions.k8s.io/v1", "CustomResourceDefinition"),
            WIDGETS_CRD["metadata"]["name"],
        )


def test_apply_of_a_kind_the_cluster_does_not_serve_names_it_and_applies_nothing(
    installed: list[str], management: Client
) -> None:
    first = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "before-unserved", "namespace": "default"},
    }
    unserved = {"apiVersion": "nowhere.example.com/v1", "kind": "Gadget", "metadata": {"name": "g"}}
    with pytest.raises(ManifestError) as refused:
        manifests.apply(management, [first, unserved])
    assert "the cluster does not serve Gadget in nowhere.example.com/v1" in str(refused.value)
    assert (
        sync_ops.get(
            management, kinds.builtin_resource("v1", "ConfigMap"), "before-unserved", namespace="default"
        )
        is None
    )
