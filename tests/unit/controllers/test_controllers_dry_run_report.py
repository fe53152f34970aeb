"""DryRun reports (ADR 0113): what a dry-run delivery found, as a ClusterReport's status, and as the
rows `fleetwave status profile NAME --dry-run-report` prints."""

from __future__ import annotations

import json

from fleetwave.api.reports import ClusterReportStatus
from fleetwave.controllers.sveltos import dry_run_report as dr
from fleetwave.controllers.sveltos import summary_status as ss
from fleetwave.delivery import content as dc
from fleetwave.delivery import manifests
from fleetwave.ux import dry_run


def _ref(
    name: str, kind: str = "ConfigMap", api_version: str = "v1", namespace: str | None = "app"
) -> dc.ObjectRef:
    return dc.ObjectRef(api_version, kind, namespace, name)


def test_changed_paths_name_fields_but_a_secret_only_says_its_data_changes() -> None:
    before = {"metadata": {"name": "a", "resourceVersion": "1"}, "data": {"v": "old", "same": "1"}}
    after = {"metadata": {"name": "a", "resourceVersion": "2"}, "data": {"v": "new", "same": "1"}}
    assert manifests.changed_paths("ConfigMap", before, after) == ("/data/v",)
    secret_before = {
        "metadata": {"name": "s"},
        "data": {"password": "b2xk", "user": "YQ=="},
        "type": "Opaque",
    }
    secret_after = {
        "metadata": {"name": "s", "labels": {"x": "1"}},
        "data": {"password": "bmV3", "token": "dA=="},
    }
    paths = manifests.changed_paths("Secret", secret_before, secret_after)
    assert paths == ("/data", "/metadata/labels", "/type")  # which keys changed is not told either
    many = {"data": {f"k{i}": "1" for i in range(30)}}
    bounded = manifests.changed_paths("ConfigMap", {"data": {}}, many)
    assert len(bounded) == manifests.MAX_CHANGED_PATHS + 1
    assert bounded[-1] == "... and 10 more"


def test_objects_releases_and_deletions_become_upstreams_report_fields() -> None:
    applied = [
        manifests.AppliedObject(_ref("fresh"), "h", "created"),
        manifests.AppliedObject(_ref("kept"), "h", "configured", changes=("/data/v",)),
        manifests.AppliedObject(_ref("same"), "h", "unchanged"),
        manifests.AppliedObject(_ref("theirs"), "h", "conflict", "conflict: already deployed by X"),
        manifests.AppliedObject(_ref("web", "Deployment", "apps/v1"), "h", "created"),
        manifests.AppliedObject(_ref("bad"), "h", "failed", "admission refused"),
    ]
    releases = [
        ss.HelmRelease("new", "ns", "Managing", chart_version="1.0.0", action="installed"),
        ss.HelmRelease(
            "up", "ns", "Managing", chart_version="1.1.0", action="upgraded", installed_version="1.0.0"
        ),
        ss.HelmRelease(
            "vals", "ns", "Managing", chart_version="1.0.0", action="upgraded", installed_version="1.0.0"
        ),
        ss.HelmRelease(
            "same", "ns", "Managing", chart_version="1.0.0", action="unchanged", installed_version="1.0.0"
        ),
        ss.HelmRelease("old", "ns", "Uninstalled", action=dr.UNINSTALL),
    ]
    kustomized = {("apps", "Deployment", "", "web")}  # content that named no namespace
    status = dr.report_status(applied, [_ref("gone")], releases, kustomized)
    ClusterReportStatus.model_validate(status)  # the served schema's field names
    resources = {e["resource"]["name"]: e for e in status["resourceReports"]}
    assert {n: e["action"] for n, e in resources.items()} == {
        "fresh": "Create",
        "kept": "Update",
        "same": "No Action",
        "theirs": "Conflict",
        "bad": "Error",
        "gone": "Delete",
    }
    assert resources["kept"]["message"] == "would change /data/v"
    assert resources["theirs"]["message"].startswith("conflict: already deployed by X")
    assert resources["fresh"]["resource"] == {
        "name": "fresh",
        "namespace": "app",
        "group": "",
        "kind": "ConfigMap",
        "version": "v1",
    }
    [web] = status["kustomizeResourceReports"]
    assert (web["resource"]["group"], web["resource"]["version"], web["action"]) == ("apps", "v1", "Create")
    actions = {r["chartName"]: (r.get("action"), r.get("message", "")) for r in status["releaseReports"]}
    assert actions["new"] == ("Install", "")
    assert actions["up"] == ("Upgrade", "from chart version 1.0.0")
    assert actions["vals"][0] == "Update Values"
    assert actions["same"] == ("No Action", "")
    assert actions["old"][0] == "Delete"
    assert status["helmResourceReports"] is None


def test_a_report_is_named_and_owned_as_upstream_names_it_and_owned_by_its_summary() -> None:
    summary = {
        "metadata": {
            "name": "web-sveltos-one",
            "namespace": "fleet",
            "uid": "u1",
            "labels": {ss.PROFILE_LABEL: "web"},
        },
        "spec": {"clusterName": "one", "clusterNamespace": "fleet", "clusterType": "Sveltos"},
    }
    doc = dr.document(summary, "config.projectsveltos.io/v1beta1", "config.projectsveltos.io/v1beta1")
    assert doc["metadata"]["name"] == "web--sveltos--one"
    assert doc["metadata"]["namespace"] == "fleet"
    assert doc["metadata"]["labels"]["projectsveltos.io/cluster-profile-name"] == "web"
    [owner] = doc["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"]) == ("ClusterSummary", "web-sveltos-one", "u1")
    assert doc["spec"] == {"clusterNamespace": "fleet", "clusterName": "one"}


def test_the_cli_rows_follow_sveltosctl_show_dryrun() -> None:
    status = dr.report_status(
        [manifests.AppliedObject(_ref("kept"), "h", "configured", changes=("/data/v",))],
        [],
        [
            ss.HelmRelease(
                "web", "apps", "Managing", chart_version="2.0.0", action="upgraded", installed_version="1.0.0"
            )
        ],
        set(),
    )
    report = {
        "metadata": {"labels": {dry_run.PROFILE_LABEL: "web"}},
        "spec": {"clusterNamespace": "fleet", "clusterName": "one"},
        "status": json.loads(json.dumps(status)),
    }
    rows = dry_run.rows([report])
    assert rows[0] == {
        "CLUSTER": "fleet/one",
        "RESOURCE TYPE": "helm release",
        "NAMESPACE": "apps",
        "NAME": "web",
        "ACTION": "Upgrade",
        "MESSAGE": "chart version 2.0.0; from chart version 1.0.0",
        "PROFILE": "ClusterProfile/web",
    }
    assert (rows[1]["RESOURCE TYPE"], rows[1]["ACTION"], rows[1]["MESSAGE"]) == (
        "v1:ConfigMap",
        "Update",
        "would change /data/v",
    )
