"""syncMode DryRun on the real fleet (ADR 0113): nothing changes on the member, and a ClusterReport
per cluster says what would be created, updated (where) or deleted, and what each Helm release
would do; `fleetwave status profile NAME --dry-run-report` prints it; the report goes when the
profile leaves DryRun. A Secret's values never appear in it."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from lightkube import ApiError, Client
from lightkube.resources.core_v1 import ConfigMap, Secret
from promotion_support import (
    CHARTS,
    ControllerThread,
    chart_version,
    registered,
    running_controller,
    wait_for,
)
from typer.testing import CliRunner

from fleetwave.cli import app as cli_app
from fleetwave.kube import kinds
from fleetwave.local import binaries, chartrepo, fleet
from fleetwave.mgmt import manifests

NAME = "preview"
NEW_SECRET = "s3cr3t-would-be"


@pytest.fixture(scope="module")
def repo(bins: binaries.Binaries, tmp_path_factory: pytest.TempPathFactory) -> Iterator[chartrepo.ChartRepo]:
    with chartrepo.serve(
        bins.path("helm"), tmp_path_factory.mktemp("dry-run-charts"), [(CHARTS / "hello", "1.0.0")]
    ) as served:
        yield served


@pytest.fixture(scope="module")
def controller(
    local_fleet: fleet.FleetState, management: Client, bins: binaries.Binaries
) -> Iterator[ControllerThread]:
    with (
        registered(management, local_fleet),
        running_controller(local_fleet, bins.path("helm"), "dry-run") as thread,
    ):
        yield thread


def _cm(namespace: str, name: str, **data: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace},
        "data": data,
    }


def _secret(namespace: str, password: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "creds", "namespace": namespace},
        "stringData": {"password": password},
    }


def _documents(
    namespace: str, objects: list[dict[str, Any]], secret: dict[str, Any], mode: str, charts: list[Any]
) -> list[dict[str, Any]]:
    encoded = base64.b64encode(yaml.safe_dump(secret).encode()).decode()
    return [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": f"content-{NAME}", "namespace": "default"},
            "data": {"content.yaml": yaml.safe_dump_all(objects)},
        },
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "addons.projectsveltos.io/cluster-profile",
            "metadata": {"name": f"secret-{NAME}", "namespace": "default"},
            "data": {"secret.yaml": encoded},
        },
        {
            "apiVersion": "fleetwave.io/v1alpha1",
            "kind": "ClusterProfile",
            "metadata": {"name": NAME},
            "spec": {
                "clusterSelector": {"matchLabels": {"env": "dev"}},  # member-1 only
                "syncMode": mode,
                "policyRefs": [
                    {"kind": "ConfigMap", "name": f"content-{NAME}", "namespace": "default"},
                    {"kind": "Secret", "name": f"secret-{NAME}", "namespace": "default"},
                ],
                "helmCharts": charts,
            },
        },
    ]


def _chart(repo_url: str, namespace: str) -> dict[str, Any]:
    return {
        "repositoryURL": repo_url,
        "repositoryName": "local",
        "chartName": "local/hello",
        "chartVersion": "1.0.0",
        "releaseName": NAME,
        "releaseNamespace": namespace,
        "helmChartAction": "Install",
    }


def _reports(management: Client) -> list[dict[str, Any]]:
    found = management.list(
        kinds.resource("ClusterReport"), namespace="*", labels={"fleetwave.io/cluster-profile": NAME}
    )
    return [o.to_dict() for o in found]


def _summary(management: Client) -> dict[str, Any]:
    found = list(
        management.list(
            kinds.resource("ClusterSummary"), namespace="*", labels={"fleetwave.io/cluster-profile": NAME}
        )
    )
    return dict(found[0].status or {}) if found else {}


def _ready(management: Client) -> dict[str, Any]:
    status = _summary(management)
    return next((c for c in status.get("conditions") or [] if c["type"] == "Ready"), {})


def _data(member: Client, namespace: str, name: str) -> dict[str, str] | None:
    try:
        return dict(member.get(ConfigMap, name, namespace=namespace).data or {})
    except ApiError as err:
        if err.status.code == 404:
            return None
        raise


def _with_mode(profile: dict[str, Any], mode: str) -> dict[str, Any]:
    return {**profile, "spec": {**profile["spec"], "syncMode": mode}}


def _release_report(management: Client, action: str) -> dict[str, Any] | None:
    reports = _reports(management)
    releases = ((reports[0].get("status") or {}).get("releaseReports") or []) if reports else []
    return next((r for r in releases if r.get("action") == action), None)


def _by_name(entries: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {e["resource"]["name"]: e for e in entries}


def _report_with_everything(management: Client) -> dict[str, Any] | None:
    reports = _reports(management)
    status = (reports[0].get("status") or {}) if reports else {}
    names = _by_name(status.get("resourceReports") or [])
    return (
        reports[0]
        if {"fresh", "kept", "gone", "creds"} <= set(names) and status.get("releaseReports")
        else None
    )


def test_dry_run_changes_nothing_and_reports_each_object_and_release_until_it_leaves_dry_run(
    controller: ControllerThread,
    management: Client,
    members: dict[str, Client],
    namespace: str,
    repo: chartrepo.ChartRepo,
    local_fleet: fleet.FleetState,
) -> None:
    member = members["member-1"]
    first = [_cm(namespace, "kept", v="old", same="1"), _cm(namespace, "gone", v="1")]
    manifests.apply(management, _documents(namespace, first, _secret(namespace, "old"), "Continuous", []))
    try:
        wait_for(lambda: _ready(management).get("status") == "True", what="first content delivered")
        wait_for(lambda: _reports(management) == [], what="no report outside DryRun")

        # DryRun first (the content edited before would be delivered for real)...
        docs = _documents(namespace, first, _secret(namespace, "old"), "DryRun", [])
        manifests.apply(management, docs[2:])
        wait_for(lambda: _ready(management).get("reason") == "DryRun", what="the profile in DryRun")
        # ...then "kept" changes, "gone" leaves the content, "fresh" is new, the Secret changes, a chart.
        preview = [_cm(namespace, "kept", v="new", same="1"), _cm(namespace, "fresh", v="1")]
        docs = _documents(
            namespace, preview, _secret(namespace, NEW_SECRET), "DryRun", [_chart(repo.url, namespace)]
        )
        manifests.apply(management, docs)
        report = wait_for(
            lambda: _report_with_everything(management),
            what="the DryRun report",
            explain=lambda: f"reports: {_reports(management)}; summary: {_summary(management)}",
        )

        status = report["status"]
        resources = _by_name(status["resourceReports"])
        assert resources["fresh"]["action"] == "Create"
        assert resources["gone"]["action"] == "Delete"
        assert resources["kept"]["action"] == "Update"
        assert "/data/v" in resources["kept"]["message"]
        assert "/data/same" not in resources["kept"]["message"]
        assert resources["creds"]["action"] == "Update"
        assert resources["creds"]["message"] == "would change /data"
        assert resources["kept"]["resource"] == {
            "name": "kept",
            "namespace": namespace,
            "group": "",
            "kind": "ConfigMap",
            "version": "v1",
        }
        [release] = status["releaseReports"]
        assert (release["chartName"], release["releaseNamespace"], release["action"]) == (
            NAME,
            namespace,
            "Install",
        )
        assert release["chartVersion"] == "1.0.0"
        helm_objects = {
            (e["resource"]["kind"], e["resource"]["name"]): e["action"] for e in status["helmResourceReports"]
        }
        assert helm_objects == {("ConfigMap", f"{NAME}-config"): "Create", ("Deployment", NAME): "Create"}
        text = json.dumps(report)
        assert NEW_SECRET not in text
        assert base64.b64encode(NEW_SECRET.encode()).decode() not in text
        assert report["spec"] == {
            "clusterNamespace": report["metadata"]["namespace"],
            "clusterName": "member-1",
        }
        assert report["metadata"]["name"] == f"{NAME}--sveltos--member-1"

        # Nothing changed on the member.
        assert _data(member, namespace, "kept") == {"v": "old", "same": "1"}
        assert _data(member, namespace, "gone") == {"v": "1"}
        assert _data(member, namespace, "fresh") is None
        assert chart_version(member, namespace, NAME) is None
        secret = member.get(Secret, "creds", namespace=namespace)
        assert base64.b64decode((secret.data or {})["password"]).decode() == "old"

        # The CLI prints it, one row per object and release (sveltosctl show dryrun's columns).
        kubeconfig = local_fleet.cluster(fleet.MANAGEMENT).kubeconfig
        args = ["status", "profile", NAME, "--dry-run-report", "-o", "json", "--kubeconfig", kubeconfig]
        result = CliRunner().invoke(cli_app, args)
        assert result.exit_code == 0, result.output
        rows = json.loads(result.output)["rows"]
        actions = {(r["RESOURCE TYPE"], r["NAME"]): r["ACTION"] for r in rows}
        assert actions[("helm release", NAME)] == "Install"
        assert actions[("v1:ConfigMap", "gone")] == "Delete"
        assert {r["CLUSTER"] for r in rows} == {f"{report['metadata']['namespace']}/member-1"}
        table = CliRunner().invoke(
            cli_app, ["status", "profile", NAME, "--dry-run-report", "--kubeconfig", kubeconfig]
        )
        assert table.exit_code == 0, table.output
        assert "CLUSTER" in table.output
        assert "Install" in table.output
        assert NEW_SECRET not in table.output

        # Leaving DryRun deploys and removes the report.
        docs = _documents(
            namespace, preview, _secret(namespace, NEW_SECRET), "Continuous", [_chart(repo.url, namespace)]
        )
        manifests.apply(management, docs)
        wait_for(lambda: _data(member, namespace, "fresh") == {"v": "1"}, what="delivered after DryRun")
        wait_for(lambda: _reports(management) == [], what="the report removed once out of DryRun")
        assert _data(member, namespace, "gone") is None
        wait_for(lambda: chart_version(member, namespace, NAME) == "1.0.0", what="the release installed")

        # Back to DryRun with other values: the release's values would change, and which object.
        manifests.apply(management, [_with_mode(docs[2], "DryRun")])
        wait_for(lambda: _ready(management).get("reason") == "DryRun", what="in DryRun again")
        changed = _chart(repo.url, namespace) | {"values": "message: changed\n"}
        docs = _documents(namespace, preview, _secret(namespace, NEW_SECRET), "DryRun", [changed])
        manifests.apply(management, docs)
        values = wait_for(lambda: _release_report(management, "Update Values"), what="Update Values reported")
        assert values["chartVersion"] == "1.0.0"
        helm_objects = {
            e["resource"]["name"]: (e["action"], e.get("message", ""))
            for e in _reports(management)[0]["status"]["helmResourceReports"]
        }
        assert helm_objects[f"{NAME}-config"] == ("Update", "would change /data/message")
        assert helm_objects[NAME] == ("No Action", "")
        assert _data(member, namespace, f"{NAME}-config")["message"] == "hello from fleetwave"  # not changed
    finally:
        try:
            management.delete(kinds.resource("ClusterProfile"), NAME)
        except ApiError as err:
            if err.status.code != 404:
                raise
        wait_for(lambda: not _ready(management), what="summary withdrawn")
