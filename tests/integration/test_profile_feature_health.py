"""validateHealths[].featureID on the real fleet (ADR 0113): a check runs after the feature it names
is deployed, and its failure is reported on that feature's featureSummary, not on the others."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from lightkube import ApiError, Client, codecs
from lightkube.resources.core_v1 import ConfigMap
from promotion_support import CHARTS, ControllerThread, registered, running_controller, wait_for

from fleetwave.kube import kinds
from fleetwave.local import binaries, chartrepo, fleet
from fleetwave.mgmt import manifests

NAME = "feature-checks"


@pytest.fixture(scope="module")
def repo(bins: binaries.Binaries, tmp_path_factory: pytest.TempPathFactory) -> Iterator[chartrepo.ChartRepo]:
    with chartrepo.serve(
        bins.path("helm"), tmp_path_factory.mktemp("feature-charts"), [(CHARTS / "hello", "1.0.0")]
    ) as served:
        yield served


@pytest.fixture(scope="module")
def controller(
    local_fleet: fleet.FleetState, management: Client, bins: binaries.Binaries
) -> Iterator[ControllerThread]:
    with (
        registered(management, local_fleet),
        running_controller(local_fleet, bins.path("helm"), "feature-checks") as thread,
    ):
        yield thread


def _check(name: str, feature: str, namespace: str, resource: str, rule: str) -> dict[str, Any]:
    return {
        "name": name,
        "featureID": feature,
        "group": "",
        "version": "v1",
        "kind": "ConfigMap",
        "namespace": namespace,
        "resourceName": resource,
        "evaluateCEL": [{"name": name, "rule": rule}],
    }


def _documents(namespace: str, repo_url: str) -> list[dict[str, Any]]:
    payload = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "payload", "namespace": namespace},
        "data": {"v": "1"},
    }
    source = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": f"content-{NAME}", "namespace": "default"},
        "data": {"content.yaml": yaml.safe_dump(payload)},
    }
    chart = {
        "repositoryURL": repo_url,
        "repositoryName": "local",
        "chartName": "local/hello",
        "chartVersion": "1.0.0",
        "releaseName": NAME,
        "releaseNamespace": namespace,
        "helmChartAction": "Install",
    }
    checks = [
        _check("payload-there", "Resources", namespace, "payload", "self.data.v == '1'"),
        # The chart's ConfigMap says "hello from fleetwave": this check fails until it is edited.
        _check("helm-says-ok", "Helm", namespace, f"{NAME}-config", "self.data.message == 'ok'"),
        # The profile has no Kustomize content: this check (which would fail) never runs.
        _check("never-run", "Kustomize", namespace, "missing", "true"),
    ]
    profile = {
        "apiVersion": "fleetwave.io/v1alpha1",
        "kind": "ClusterProfile",
        "metadata": {"name": NAME},
        "spec": {
            "clusterSelector": {"matchLabels": {"env": "dev"}},  # member-1 only
            "policyRefs": [{"kind": "ConfigMap", "name": f"content-{NAME}", "namespace": "default"}],
            "helmCharts": [chart],
            "validateHealths": checks,
        },
    }
    return [source, profile]


def _status(management: Client) -> dict[str, Any]:
    found = list(
        management.list(
            kinds.resource("ClusterSummary"), namespace="*", labels={"fleetwave.io/cluster-profile": NAME}
        )
    )
    return dict(found[0].status or {}) if found else {}


def _features(management: Client) -> dict[str, dict[str, Any]]:
    return {f["featureID"]: f for f in _status(management).get("featureSummaries") or []}


def _ready(management: Client) -> dict[str, Any]:
    return next((c for c in _status(management).get("conditions") or [] if c["type"] == "Ready"), {})


def test_a_helm_check_fails_the_helm_feature_only_and_a_check_of_an_absent_feature_never_runs(
    controller: ControllerThread,
    management: Client,
    members: dict[str, Client],
    namespace: str,
    repo: chartrepo.ChartRepo,
) -> None:
    member = members["member-1"]
    manifests.apply(management, _documents(namespace, repo.url))
    try:
        features = wait_for(
            lambda: f if (f := _features(management)).get("Helm", {}).get("status") == "Failed" else None,
            what="the Helm feature failed by its check",
        )
        helm = features["Helm"]["failureMessage"]
        assert helm.startswith("feature Helm: "), helm
        assert "helm-says-ok" in helm
        assert features["Resources"]["status"] == "Provisioned"  # its own check passed
        assert "failureMessage" not in features["Resources"]
        assert "consecutiveFailures" not in features["Helm"]  # deployed: not a delivery failure
        ready = _ready(management)
        assert (ready["status"], ready["reason"]) == ("False", "Unhealthy"), ready
        assert member.get(ConfigMap, f"{NAME}-config", namespace=namespace)  # the release is installed

        # The release's ConfigMap turns healthy on the member: the Helm check passes, and the
        # Kustomize check (which would fail: it matches nothing) is never run.
        edited = codecs.from_dict(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": f"{NAME}-config", "namespace": namespace},
                "data": {"message": "ok"},
            }
        )
        member.apply(edited, field_manager="test", force=True)
        wait_for(lambda: _ready(management).get("status") == "True", what="healthy once the check passes")
        features = _features(management)
        assert {f: v["status"] for f, v in features.items()} == {
            "Resources": "Provisioned",
            "Helm": "Provisioned",
        }
        assert "never-run" not in str(_status(management))
    finally:
        try:
            management.delete(kinds.resource("ClusterProfile"), NAME)
        except ApiError as err:
            if err.status.code != 404:
                raise
        wait_for(lambda: not _status(management), what="summary withdrawn")
