"""API families: where each native kind is served, the native view of upstream objects, and the
upstream CRDs and RBAC (ADR 0062)."""

from __future__ import annotations

from fleetwave.api import crds, families
from fleetwave.api.meta import API_VERSION
from fleetwave.mgmt import rbac


def test_the_native_family_serves_every_kind_in_fleetwave_io() -> None:
    assert {s.api_version for s in families.NATIVE.kinds.values()} == {API_VERSION}
    obj = {"apiVersion": API_VERSION, "kind": "ClusterProfile", "metadata": {"name": "p"}}
    assert families.NATIVE.view("ClusterProfile", obj) is obj


def test_a_sveltos_cluster_is_viewed_as_a_member_with_sveltos_default_kubeconfig_secret() -> None:
    cluster = {
        "apiVersion": "lib.projectsveltos.io/v1beta1",
        "kind": "SveltosCluster",
        "metadata": {"name": "dev", "namespace": "dev", "labels": {"env": "dev"}},
        "spec": {"kubeconfigKeyName": "value"},
        "status": {"ready": True},
    }
    view = families.SVELTOS.view("MemberCluster", cluster)
    assert view["apiVersion"] == API_VERSION
    assert view["kind"] == "MemberCluster"
    assert view["spec"] == {"kubeconfigSecretRef": {"name": "dev-sveltos-kubeconfig", "key": "value"}}
    assert view["metadata"] == cluster["metadata"]
    assert view["status"] == {"ready": True}
    assert cluster["spec"] == {"kubeconfigKeyName": "value"}  # the cached object is not changed


def test_upstream_crds_use_upstream_names_scope_and_columns_and_are_marked_as_fleetwaves() -> None:
    made = {c["metadata"]["name"]: c for c in crds.upstream_crds(families.UPSTREAM)}
    sveltos = {n: c for n, c in made.items() if "projectsveltos" in n}
    assert set(sveltos) == {
        "clusterprofiles.config.projectsveltos.io",
        "clusterpromotions.config.projectsveltos.io",
        "clusterreports.config.projectsveltos.io",
        "clustersummaries.config.projectsveltos.io",
        "profiles.config.projectsveltos.io",
        "sveltosclusters.lib.projectsveltos.io",
        "rolerequests.lib.projectsveltos.io",
        "clustersets.lib.projectsveltos.io",
        "sets.lib.projectsveltos.io",
    }
    # ten placement kinds, four override kinds, two envelopes, eviction and disruption budget, and
    # KubeFleet's MemberCluster
    assert len(made) == len(sveltos) + 19
    eviction = made["clusterresourceplacementevictions.placement.kubernetes-fleet.io"]["spec"]
    assert (eviction["scope"], eviction["names"]["shortNames"]) == ("Cluster", ["crpe"])
    assert [v["name"] for v in eviction["versions"]] == ["v1beta1", "v1"]
    columns = eviction["versions"][0]["additionalPrinterColumns"]
    assert [(c["name"], c["jsonPath"]) for c in columns] == [
        ("Valid", '.status.conditions[?(@.type=="Valid")].status'),
        ("Executed", '.status.conditions[?(@.type=="Executed")].status'),
    ]
    budget = made["clusterresourceplacementdisruptionbudgets.placement.kubernetes-fleet.io"]["spec"]
    assert (budget["scope"], budget["names"]["shortNames"]) == ("Cluster", ["crpdb"])
    assert "additionalPrinterColumns" not in budget["versions"][0]  # as upstream: none
    for kind in (
        "clusterresourceoverrides",
        "resourceoverrides",
        "resourceoverridesnapshots",
        "clusterresourceenvelopes",
        "resourceenvelopes",
    ):
        names = made[f"{kind}.placement.kubernetes-fleet.io"]["spec"]["names"]
        assert "shortNames" not in names  # as upstream: none
        assert names["categories"] == ["fleet", "fleet-placement"]
    for crd in made.values():
        assert crd["metadata"]["labels"] == {crds.MANAGED_BY: crds.FLEETWAVE, crds.PART_OF: crds.FLEETWAVE}
    for crd in sveltos.values():
        assert "shortNames" not in crd["spec"]["names"]  # fleetwave's short names stay on its own group
        assert [v["name"] for v in crd["spec"]["versions"]] == ["v1beta1"]
    summary = made["clustersummaries.config.projectsveltos.io"]["spec"]
    assert summary["scope"] == "Namespaced"
    assert summary["names"]["kind"] == "ClusterSummary"
    assert made["clusterpromotions.config.projectsveltos.io"]["spec"]["scope"] == "Cluster"
    cluster = made["sveltosclusters.lib.projectsveltos.io"]["spec"]
    columns = [c["name"] for c in cluster["versions"][0]["additionalPrinterColumns"]]
    assert columns == ["Ready", "Version", "Age"]
    spec = cluster["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert set(spec["properties"]) == {"kubeconfigName", "kubeconfigKeyName", "paused"}
    # The native schema is reused where the field names are the same (they are: ADR 0011).
    promotion = made["clusterpromotions.config.projectsveltos.io"]["spec"]["versions"][0]
    native = crds.crd_for(crds.KINDS["ClusterPromotion"])["spec"]["versions"][0]
    assert promotion["schema"] == native["schema"]
    # Cluster sets (ADR 0108): upstream's scope, no columns, the native schema.
    for plural, kind, scope in (("clustersets", "ClusterSet", "Cluster"), ("sets", "Set", "Namespaced")):
        served = made[f"{plural}.lib.projectsveltos.io"]["spec"]
        assert (served["names"]["kind"], served["scope"]) == (kind, scope)
        assert "additionalPrinterColumns" not in served["versions"][0]
        own = crds.crd_for(crds.KINDS[kind])["spec"]["versions"][0]
        assert served["versions"][0]["schema"] == own["schema"]
        assert set(own["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]) == {
            "matchingClusterRefs",
            "selectedClusterRefs",
        }


def test_upstream_rbac_grants_the_native_verbs_on_the_upstream_groups_only() -> None:
    rules = {(r.group, r.resources, r.verbs) for r in rbac.family_rules(families.SVELTOS)}
    assert (
        "config.projectsveltos.io",
        ("clusterprofiles", "clusterreports", "clustersummaries"),
        ("create", "patch", "delete"),
    ) in rules
    # A Profile's finalizer is a merge patch (ADR 0110); its status is written like a ClusterProfile's.
    assert ("config.projectsveltos.io", ("clusterpromotions", "profiles"), ("patch",)) in rules
    on_status = {res for g, res, verbs in rules if verbs == ("patch",) and any("/status" in r for r in res)}
    assert any("profiles/status" in res for res in on_status)
    reads = ("clustersets", "rolerequests", "sets", "sveltosclusters")
    assert ("lib.projectsveltos.io", reads, ("get", "list", "watch")) in rules
    status = ("clustersets/status", "rolerequests/status", "sets/status", "sveltosclusters/status")
    assert ("lib.projectsveltos.io", status, ("patch",)) in rules
    # And Cluster API's clusters, the members Sveltos takes from Cluster API (ADR 0109): read only,
    # and nothing else of Cluster API.
    assert ("cluster.x-k8s.io", ("clusters",), ("get", "list", "watch")) in rules
    assert all(
        r.group in ("config.projectsveltos.io", "lib.projectsveltos.io")
        for r in rbac.family_rules(families.SVELTOS)
        if r.group != "cluster.x-k8s.io"
        or (r.resources, r.verbs) != (("clusters",), ("get", "list", "watch"))
    )
    assert not any(
        r.group == "cluster.x-k8s.io"
        for f in (families.NATIVE, families.KUBEFLEET)
        for r in rbac.family_rules(f)
    )
    # Nothing on sveltosclusters beyond reading them, writing their status and their registration
    # labels (a merge patch of metadata.labels).
    on_clusters = {v for g, res, verbs in rules if "sveltosclusters" in res for v in verbs}
    assert on_clusters == {"get", "list", "watch", "patch"}
    # Nor on cluster sets: users write them, the controller only their status.
    on_sets = {v for g, res, verbs in rules for r in ("clustersets", "sets") if r in res for v in verbs}
    assert on_sets == {"get", "list", "watch"}
    documents = rbac.upstream_documents("fleetwave-system", families.UPSTREAM)
    assert [d["kind"] for d in documents] == ["ClusterRole", "ClusterRoleBinding"]
    assert documents[1]["subjects"] == [
        {"kind": "ServiceAccount", "name": rbac.NAME, "namespace": "fleetwave-system"}
    ]


def test_kubefleet_crds_serve_v1beta1_and_v1_with_the_seeds_columns_and_short_names() -> None:
    made = {c["metadata"]["name"]: c for c in crds.upstream_crds(families.UPSTREAM)}
    run = made["clusterstagedupdateruns.placement.kubernetes-fleet.io"]["spec"]
    assert run["names"]["shortNames"] == ["csur"]
    assert [(v["name"], v["served"], v["storage"]) for v in run["versions"]] == [
        ("v1beta1", True, True),
        ("v1", True, False),
    ]
    columns = [c["name"].upper() for c in run["versions"][0]["additionalPrinterColumns"]]
    assert columns == ["PLACEMENT", "RESOURCE-SNAPSHOT", "POLICY-SNAPSHOT", "INITIALIZED", "SUCCEEDED", "AGE"]
    approval = made["clusterapprovalrequests.placement.kubernetes-fleet.io"]["spec"]
    columns = [c["name"].upper() for c in approval["versions"][0]["additionalPrinterColumns"]]
    assert columns == ["UPDATE-RUN", "STAGE", "APPROVED", "APPROVALACCEPTED", "AGE"]
    member = made["memberclusters.cluster.kubernetes-fleet.io"]["spec"]
    assert (member["scope"], member["names"]["shortNames"]) == ("Cluster", ["cluster"])


def test_with_upstream_apis_the_native_kubefleet_kinds_are_kept_but_not_served() -> None:
    native = {c["spec"]["names"]["kind"]: c for c in crds.all_crds(unserved=crds.UPSTREAM_ONLY)}
    assert not native["ClusterStagedUpdateRun"]["spec"]["versions"][0]["served"]
    assert native["ClusterStagedUpdateRun"]["spec"]["versions"][0]["storage"]  # its data stays
    assert native["ClusterPromotion"]["spec"]["versions"][0]["served"]
    assert native["MemberCluster"]["spec"]["versions"][0]["served"]
    assert all(v["served"] for c in crds.all_crds() for v in c["spec"]["versions"])


def test_a_kubefleet_member_is_viewed_in_the_controller_namespace_with_its_fixed_secret() -> None:
    member = {
        "apiVersion": "cluster.kubernetes-fleet.io/v1beta1",
        "kind": "MemberCluster",
        "metadata": {"name": "member1", "labels": {"environment": "canary"}},
        "spec": {"heartbeatPeriodSeconds": 60, "kubeconfigSecretRef": {"name": "someone-elses"}},
    }
    view = families.kubefleet("ops").view("MemberCluster", member)
    assert view["metadata"]["namespace"] == "ops"
    # Whatever the object says, its kubeconfig is `<name>-kubeconfig` in the controller's namespace.
    assert view["spec"]["kubeconfigSecretRef"] == {"name": "member1-kubeconfig"}
    assert view["spec"]["heartbeatPeriodSeconds"] == 60
