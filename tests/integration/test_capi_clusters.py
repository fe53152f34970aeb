"""Cluster API clusters as Sveltos treats them (ADR 0109), on the real local fleet: Cluster API's own
`Cluster` CRD on the management cluster, one Cluster per member with its `<name>-kubeconfig` Secret
(the member's kubeconfig), its status written as a Cluster API controller writes it; fleetwave serving
the Sveltos groups, running as its installed ServiceAccount (so under the RBAC it ships).

A profile selects Cluster API clusters by their labels and delivers to them; a clusterRef tells a
Cluster from a SveltosCluster of the same namespace and name; a provisioning cluster waits until its
status says ready (and how long delivery then takes is printed); a promotion whose stages mix the two
kinds completes; a cluster being deleted is withdrawn from. First of all, the informer the controller
keeps on Clusters copes with the kind not being served at all.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import capi_support
import pytest
import upstream_support
from lightkube import ApiError, Client
from promotion_support import CHARTS, ControllerThread, chart_version, settings, wait_for
from typer.testing import CliRunner

from fleetwave.api import families
from fleetwave.cli import app
from fleetwave.kube import client as kubeclient
from fleetwave.kube import kinds
from fleetwave.local import binaries, chartrepo, fleet
from fleetwave.mgmt import install, manifests
from fleetwave.runtime import watching

CONFIG = "config.projectsveltos.io/v1beta1"
NS = capi_support.NAMESPACE
PROFILES = kinds.served_resource(CONFIG, "ClusterProfile", "clusterprofiles", False)
SUMMARIES = kinds.served_resource(CONFIG, "ClusterSummary", "clustersummaries", True)
PROMOTIONS = kinds.served_resource(CONFIG, "ClusterPromotion", "clusterpromotions", False)
SVELTOS_CLUSTERS = kinds.served_resource(
    "lib.projectsveltos.io/v1beta1", "SveltosCluster", "sveltosclusters", True
)
CAPI_REF = {"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Cluster"}


async def test_the_informer_on_clusters_waits_for_the_kind_and_picks_it_up_once_installed(
    local_fleet: fleet.FleetState, management: Client, capi_dir: Path
) -> None:
    """Where Cluster API is not installed the informer is empty and synced (the controller starts);
    once its CRD is installed, the Clusters appear without a restart."""
    capi_support.remove_crd(management)
    config = kubeclient.config_from_file(local_fleet.cluster(fleet.MANAGEMENT).kubeconfig)
    client = kubeclient.async_client(config)
    first, second = kinds.capi_cluster_resources()  # what the controller watches
    informer = watching.Informer(client, first, unserved_poll=0.5, fallbacks=[second])
    task = asyncio.create_task(informer.run())
    try:
        await asyncio.wait_for(informer.has_synced.wait(), 30)
        assert (informer.served, dict(informer.store)) == (False, {})
        capi_support.install_crd(management, capi_dir)
        body = capi_support.cluster_body("seen-later", "default", {})
        management.create(capi_support.V1BETA2.from_dict(body))
        deadline = time.monotonic() + 30
        while "default/seen-later" not in informer.store:
            assert time.monotonic() < deadline, "the informer never listed the Cluster"
            await asyncio.sleep(0.1)
        assert informer.served is True
        assert informer.resource is first  # v1beta2, the version Sveltos reads
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await client.close()
        capi_support.remove_crd(management)


@pytest.fixture(scope="module")
def repo(bins: binaries.Binaries, tmp_path_factory: pytest.TempPathFactory) -> Iterator[chartrepo.ChartRepo]:
    with chartrepo.serve(
        bins.path("helm"), tmp_path_factory.mktemp("capi-charts"), [(CHARTS / "hello", "1.0.0")]
    ) as served:
        yield served


def _sveltos_cluster(state: fleet.FleetState) -> list[dict[str, Any]]:
    """A SveltosCluster with the namespace and name of member-2's Cluster (another cluster to
    fleetwave, as to Sveltos), labelled sveltos-env=staging, its kubeconfig in Sveltos' default Secret."""
    member = next(m for m in state.members if m.name == "member-2")
    kubeconfig = base64.b64encode(Path(member.kubeconfig).read_bytes()).decode()
    return [
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "member-2-sveltos-kubeconfig", "namespace": NS},
            "data": {"kubeconfig": kubeconfig},
        },
        {
            "apiVersion": "lib.projectsveltos.io/v1beta1",
            "kind": "SveltosCluster",
            "metadata": {"name": "member-2", "namespace": NS, "labels": {"sveltos-env": "staging"}},
            "spec": {},
        },
    ]


@pytest.fixture(scope="module")
def controller(
    local_fleet: fleet.FleetState, management: Client, bins: binaries.Binaries, capi_clusters: dict[str, str]
) -> Iterator[ControllerThread]:
    install.install(management)
    upstream_support.clear_native_kubefleet_objects(management)
    install.install(management, upstream_apis=True)
    wait_for(lambda: install.upstream_installed(management), timeout=30, what="upstream mode seen")
    wait_for(lambda: _listable(management, SVELTOS_CLUSTERS), timeout=60, what="SveltosClusters served")
    manifests.apply(management, _sveltos_cluster(local_fleet))
    upstream = replace(settings(bins.path("helm"), "capi"), upstream=families.UPSTREAM)
    thread = ControllerThread(local_fleet.cluster(fleet.MANAGEMENT).kubeconfig, upstream)
    thread.start()
    try:
        yield thread
    finally:
        thread.stop()
        install.install(management)  # fleetwave.io's KubeFleet kinds again for later modules
        upstream_support.remove_upstream_groups(management)
    assert thread.error is None, thread.error


def _listable(management: Client, resource: Any) -> bool:
    try:
        list(management.list(resource, namespace=NS))
    except ApiError as e:
        if e.status.code in (404, 429):
            return False
        raise
    return True


def _chart(name: str, repo_url: str) -> dict[str, Any]:
    return {
        "repositoryURL": repo_url,
        "repositoryName": "local",
        "chartName": "local/hello",
        "chartVersion": "1.0.0",
        "releaseName": name,
        "releaseNamespace": name,
        "helmChartAction": "Install",
    }


def _profile(name: str, repo_url: str, **selection: Any) -> dict[str, Any]:
    return {
        "apiVersion": CONFIG,
        "kind": "ClusterProfile",
        "metadata": {"name": name},
        "spec": {"syncMode": "Continuous", "helmCharts": [_chart(name, repo_url)], **selection},
    }


def _summaries(management: Client, profile: str) -> dict[str, dict[str, Any]]:
    found = management.list(SUMMARIES, namespace="*", labels={"fleetwave.io/cluster-profile": profile})
    return {s.metadata.name: s.to_dict() for s in found}


def _ready(summary: dict[str, Any]) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (summary.get("status") or {}).get("conditions") or []
    )


def _delete_profile(management: Client, name: str) -> None:
    management.delete(PROFILES, name)
    wait_for(lambda: not _summaries(management, name), timeout=90, what=f"summaries of {name} withdrawn")


def test_a_profile_selecting_cluster_api_clusters_by_label_delivers_to_them(
    controller: ControllerThread, management: Client, members: dict[str, Client], repo: chartrepo.ChartRepo
) -> None:
    name = "capi-by-label"
    manifests.apply(
        management, [_profile(name, repo.url, clusterSelector={"matchLabels": {"capi-env": "dev"}})]
    )
    try:
        wait_for(
            lambda: chart_version(members["member-1"], name, name) == "1.0.0", what="delivered to member-1"
        )
        summaries = wait_for(lambda: _summaries(management, name), what="its summary")
        assert list(summaries) == [f"{name}-capi-member-1"]
        summary = summaries[f"{name}-capi-member-1"]
        assert summary["metadata"]["namespace"] == NS
        assert summary["spec"]["clusterType"] == "Capi"
        assert summary["spec"]["clusterName"] == "member-1"
        assert summary["metadata"]["labels"]["projectsveltos.io/cluster-type"] == "Capi"
        assert summary["metadata"]["labels"]["projectsveltos.io/cluster-name"] == "member-1"
        profile = management.get(PROFILES, name).to_dict()
        assert profile["status"]["matchingClusters"] == [{**CAPI_REF, "namespace": NS, "name": "member-1"}]
        assert chart_version(members["member-2"], name, name) is None
        assert chart_version(members["member-3"], name, name) is None
    finally:
        _delete_profile(management, name)
    wait_for(lambda: chart_version(members["member-1"], name, name) is None, what="withdrawn from member-1")


def test_a_cluster_ref_tells_a_cluster_api_cluster_from_a_sveltos_cluster_of_the_same_name(
    controller: ControllerThread, management: Client, members: dict[str, Client], repo: chartrepo.ChartRepo
) -> None:
    """capi-fleet/member-2 is both a Cluster and a SveltosCluster: two clusters, each named by its kind."""
    by_kind, unkinded = "refs-cluster-kind", "refs-no-kind"
    ref = {"namespace": NS, "name": "member-2"}
    manifests.apply(
        management,
        [
            _profile(by_kind, repo.url, clusterRefs=[{**CAPI_REF, **ref}]),
            _profile(unkinded, repo.url, clusterRefs=[ref]),  # no kind: a SveltosCluster, as upstream
        ],
    )
    try:
        for name in (by_kind, unkinded):
            wait_for(
                lambda n=name: (
                    all(_ready(s) for s in _summaries(management, n).values()) and _summaries(management, n)
                ),
                what=f"{name} delivered",
            )
        assert list(_summaries(management, by_kind)) == [f"{by_kind}-capi-member-2"]
        assert list(_summaries(management, unkinded)) == [f"{unkinded}-sveltos-member-2"]
        assert chart_version(members["member-2"], by_kind, by_kind) == "1.0.0"
        assert chart_version(members["member-2"], unkinded, unkinded) == "1.0.0"
        matching = management.get(PROFILES, unkinded).to_dict()["status"]["matchingClusters"]
        assert [c["kind"] for c in matching] == ["SveltosCluster"]
    finally:
        _delete_profile(management, by_kind)
        _delete_profile(management, unkinded)


def test_a_provisioning_cluster_waits_until_its_status_says_ready_then_is_delivered_to(
    controller: ControllerThread,
    management: Client,
    members: dict[str, Client],
    repo: chartrepo.ChartRepo,
    local_fleet: fleet.FleetState,
) -> None:
    name, cluster = "capi-late", "late"
    kubeconfig = Path(next(m for m in local_fleet.members if m.name == "member-3").kubeconfig).read_bytes()
    capi_support.create(management, cluster, kubeconfig, {"capi-env": "late"}, ready=False)
    manifests.apply(
        management, [_profile(name, repo.url, clusterSelector={"matchLabels": {"capi-env": "late"}})]
    )
    try:

        def waiting() -> str | None:
            status = management.get(PROFILES, name).to_dict().get("status") or {}
            said = " ".join(str(c.get("message")) for c in status.get("conditions") or [])
            return said if f"capi:{NS}/{cluster}" in said and "provisioning" in said else None

        said = wait_for(waiting, what="the profile saying it waits for the provisioning cluster")
        assert "control plane is not initialized" in said, said
        row = _listed(local_fleet, cluster)
        assert (row["mode"], row["ready"], row["kubeconfigSecret"]) == (
            "capi",
            False,
            f"{cluster}-kubeconfig",
        )
        assert "control plane is not initialized" in row["message"]
        time.sleep(2)  # a few passes more: still nothing may be delivered
        assert not _summaries(management, name)
        assert chart_version(members["member-3"], name, name) is None

        became_ready = time.monotonic()
        capi_support.mark_ready(management, cluster)
        wait_for(
            lambda: chart_version(members["member-3"], name, name) == "1.0.0", what="delivered once ready"
        )
        delivered = time.monotonic() - became_ready
        assert _listed(local_fleet, cluster)["ready"] is True
        wait_for(lambda: all(_ready(s) for s in _summaries(management, name).values()), what="summary Ready")
        healthy = time.monotonic() - became_ready
        print(  # the figure the issue asks for (docs/adr/0109)
            f"\nCAPI cluster ready -> first delivery on the member: {delivered:.2f}s; "
            f"-> summary Ready: {healthy:.2f}s"
        )
    finally:
        _delete_profile(management, name)
        management.delete(capi_support.V1BETA2, cluster, namespace=NS)


def _listed(local_fleet: fleet.FleetState, cluster: str) -> dict[str, Any]:
    """`fleetwave cluster list -o json`'s row of a Cluster API cluster."""
    kubeconfig = local_fleet.cluster(fleet.MANAGEMENT).kubeconfig
    said = CliRunner().invoke(app, ["cluster", "list", "-n", NS, "-o", "json", "--kubeconfig", kubeconfig])
    assert said.exit_code == 0, said.output
    return next(r for r in json.loads(said.output)["clusters"] if r["name"] == cluster)


def _stage_phases(management: Client, name: str) -> dict[str, str]:
    status = management.get(PROMOTIONS, name).to_dict().get("status") or {}
    return {s["name"]: s.get("phase", "") for s in status.get("stages") or []}


def test_a_promotion_whose_stages_mix_a_cluster_api_cluster_and_a_sveltos_cluster_completes(
    controller: ControllerThread, management: Client, members: dict[str, Client], repo: chartrepo.ChartRepo
) -> None:
    name = "capi-mixed"
    promotion = {
        "apiVersion": CONFIG,
        "kind": "ClusterPromotion",
        "metadata": {"name": name},
        "spec": {
            "profileSpec": {"syncMode": "Continuous", "helmCharts": [_chart(name, repo.url)]},
            "stages": [
                {
                    "name": "dev",
                    "clusterSelector": {"matchLabels": {"capi-env": "dev"}},
                    "trigger": {"auto": {"delay": "1s"}},
                },
                {"name": "staging", "clusterSelector": {"matchLabels": {"sveltos-env": "staging"}}},
            ],
        },
    }
    manifests.apply(management, [promotion])
    try:
        wait_for(lambda: _stage_phases(management, name).get("staging") == "Succeeded", what="staging done")
        assert _stage_phases(management, name)["dev"] == "Succeeded"
        assert chart_version(members["member-1"], name, name) == "1.0.0"
        assert chart_version(members["member-2"], name, name) == "1.0.0"
        assert chart_version(members["member-3"], name, name) is None
        dev = management.get(PROFILES, f"{name}-dev").to_dict()["spec"]["clusterRefs"]
        staging = management.get(PROFILES, f"{name}-staging").to_dict()["spec"]["clusterRefs"]
        assert dev == [{**CAPI_REF, "namespace": NS, "name": "member-1"}]
        assert [(r["kind"], r["namespace"], r["name"]) for r in staging] == [
            ("SveltosCluster", NS, "member-2")
        ]
        assert set(_summaries(management, f"{name}-dev")) == {f"{name}-dev-capi-member-1"}
        assert set(_summaries(management, f"{name}-staging")) == {f"{name}-staging-sveltos-member-2"}
    finally:
        management.delete(PROMOTIONS, name)
    for member in ("member-1", "member-2"):
        wait_for(
            lambda m=member: chart_version(members[m], name, name) is None, what=f"withdrawn from {member}"
        )


def test_a_cluster_being_deleted_is_withdrawn_from(
    controller: ControllerThread,
    management: Client,
    members: dict[str, Client],
    repo: chartrepo.ChartRepo,
    local_fleet: fleet.FleetState,
) -> None:
    name, cluster = "capi-doomed", "doomed"
    kubeconfig = Path(next(m for m in local_fleet.members if m.name == "member-3").kubeconfig).read_bytes()
    capi_support.create(management, cluster, kubeconfig, {"capi-env": "doomed"})
    manifests.apply(
        management, [_profile(name, repo.url, clusterSelector={"matchLabels": {"capi-env": "doomed"}})]
    )
    try:
        wait_for(lambda: chart_version(members["member-3"], name, name) == "1.0.0", what="delivered")
        capi_support.start_deleting(management, cluster)
        assert management.get(capi_support.V1BETA2, cluster, namespace=NS).metadata.deletionTimestamp
        wait_for(lambda: not _summaries(management, name), what="its summary withdrawn")
        wait_for(lambda: chart_version(members["member-3"], name, name) is None, what="content withdrawn")
        profile = management.get(PROFILES, name).to_dict()
        assert not (profile.get("status") or {}).get("matchingClusters")
    finally:
        capi_support.finish_deleting(management, cluster)
        _delete_profile(management, name)
