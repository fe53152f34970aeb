"""`syncMode: ContinuousWithDriftDetection` on the real fleet (ADR 0114): an edit on the member to a
policyRef's object or to an object of a helm release is undone — the release's without a new helm
revision — and a path the profile's driftExclusions name is left as the member has it.

The controller's drift polls are pushed out of the test's reach (an hour): every restore here was
started by a member watch noticing the edit. The time from each edit to its restore is printed (a
measurement, not an assertion: the machine is shared).
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from lightkube import ApiError, Client
from lightkube.resources.apps_v1 import Deployment
from lightkube.resources.core_v1 import ConfigMap
from promotion_support import ControllerThread, registered, running_controller, wait_for

from fleetwave.controllers.sveltos import summary_drift
from fleetwave.kube import kinds
from fleetwave.local import binaries, chartrepo, fleet
from fleetwave.mgmt import manifests

CHARTS = Path(__file__).resolve().parents[1] / "charts"
EDITOR = "drift-test"  # the field manager of the edits: someone other than fleetwave and helm
RELEASE = "drifty"


@pytest.fixture(scope="module")
def repo(bins: binaries.Binaries, tmp_path_factory: pytest.TempPathFactory) -> Iterator[chartrepo.ChartRepo]:
    charts = [(CHARTS / "hello", "1.0.0")]
    with chartrepo.serve(bins.path("helm"), tmp_path_factory.mktemp("drift-charts"), charts) as served:
        yield served


@pytest.fixture(scope="module")
def controller(
    local_fleet: fleet.FleetState, management: Client, bins: binaries.Binaries
) -> Iterator[ControllerThread]:
    with (
        registered(management, local_fleet),
        running_controller(local_fleet, bins.path("helm"), "drift") as t,
    ):
        yield t


def _profile(name: str, namespace: str, repo_url: str) -> list[dict[str, Any]]:
    plain = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "plain", "namespace": namespace},
        "data": {"setting": "from-profile"},
    }
    source = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": f"content-{name}", "namespace": "default"},
        "data": {"content.yaml": yaml.safe_dump(plain)},
    }
    chart = {
        "repositoryURL": repo_url,
        "repositoryName": "local",
        "chartName": "local/hello",
        "chartVersion": "1.0.0",
        "releaseName": RELEASE,
        "releaseNamespace": namespace,
    }
    profile = {
        "apiVersion": "fleetwave.io/v1alpha1",
        "kind": "ClusterProfile",
        "metadata": {"name": name},
        "spec": {
            "clusterSelector": {"matchLabels": {"env": "dev"}},  # member-1 only
            "syncMode": "ContinuousWithDriftDetection",
            "policyRefs": [{"kind": "ConfigMap", "name": f"content-{name}", "namespace": "default"}],
            "helmCharts": [chart],
            # The release's Deployment may be scaled on the member (an autoscaler's field).
            "driftExclusions": [{"paths": ["/spec/replicas"], "target": {"kind": "Deployment"}}],
        },
    }
    return [source, profile]


def _summary_status(management: Client, profile: str) -> dict[str, Any]:
    found = list(
        management.list(
            kinds.resource("ClusterSummary"), namespace="*", labels={"fleetwave.io/cluster-profile": profile}
        )
    )
    return dict(found[0].status or {}) if found else {}


def _ready(management: Client, profile: str) -> bool:
    status = _summary_status(management, profile)
    ready: dict[str, Any] = next((c for c in status.get("conditions") or [] if c["type"] == "Ready"), {})
    releases = status.get("helmReleaseSummaries") or []
    return ready.get("status") == "True" and [r.get("status") for r in releases] == ["Managing"]


def _revisions(bins: binaries.Binaries, kubeconfig: str, namespace: str) -> list[int]:
    proc = subprocess.run(
        [bins.path("helm"), "--kubeconfig", kubeconfig, "history", RELEASE, "-n", namespace, "-o", "json"],
        capture_output=True,
        text=True,
        check=True,
    )
    return [int(r["revision"]) for r in json.loads(proc.stdout)]


def _cm_data(member: Client, name: str, namespace: str) -> dict[str, str] | None:
    try:
        return dict(member.get(ConfigMap, name, namespace=namespace).data or {})
    except ApiError as err:
        if err.status.code == 404:
            return None
        raise


def _restored_after(edit: Callable[[], object], restored: Callable[[], bool], what: str) -> float:
    """Seconds from `edit` on the member until `restored()` holds (generous: a shared machine)."""
    began = time.monotonic()
    edit()
    wait_for(lambda: restored() or None, timeout=120, what=what)
    return time.monotonic() - began


def test_edits_to_policyref_and_helm_objects_are_restored_by_watch_without_a_helm_revision(
    controller: ControllerThread,
    management: Client,
    members: dict[str, Client],
    local_fleet: fleet.FleetState,
    bins: binaries.Binaries,
    repo: chartrepo.ChartRepo,
    namespace: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # No pass on a timer within the test: a restore can only come from a member watch's event.
    monkeypatch.setattr(summary_drift, "DRIFT_POLL", 3600.0)
    monkeypatch.setattr(summary_drift, "DRIFT_RESYNC", 3600.0)
    member, kubeconfig = members["member-1"], local_fleet.members[0].kubeconfig
    name = f"drift-{namespace}"
    manifests.apply(management, _profile(name, namespace, repo.url))
    try:
        wait_for(lambda: _ready(management, name), timeout=180, what="policyRefs and the release delivered")
        assert _revisions(bins, kubeconfig, namespace) == [1]
        config = f"{RELEASE}-config"

        timings = {
            "policyRef ConfigMap edited": _restored_after(
                lambda: member.patch(
                    ConfigMap,
                    "plain",
                    {"data": {"setting": "edited"}},
                    namespace=namespace,
                    field_manager=EDITOR,
                ),
                lambda: _cm_data(member, "plain", namespace) == {"setting": "from-profile"},
                "the policyRef's ConfigMap restored",
            ),
            "helm ConfigMap edited": _restored_after(
                lambda: member.patch(
                    ConfigMap,
                    config,
                    {"data": {"message": "edited"}},
                    namespace=namespace,
                    field_manager=EDITOR,
                ),
                lambda: (_cm_data(member, config, namespace) or {}).get("message") == "hello from fleetwave",
                "the release's ConfigMap restored",
            ),
            "helm ConfigMap deleted": _restored_after(
                lambda: member.delete(ConfigMap, config, namespace=namespace),
                lambda: (_cm_data(member, config, namespace) or {}).get("chartVersion") == "1.0.0",
                "the release's deleted ConfigMap recreated",
            ),
        }
        # One edit of the release's Deployment: its image is restored, its replicas (excluded) stay.
        image = {
            "spec": {
                "replicas": 3,
                "template": {"spec": {"containers": [{"name": "hello", "image": "edited"}]}},
            }
        }

        def deployment() -> Any:
            return member.get(Deployment, RELEASE, namespace=namespace)

        timings["helm Deployment edited"] = _restored_after(
            lambda: member.patch(Deployment, RELEASE, image, namespace=namespace, field_manager=EDITOR),
            lambda: deployment().spec.template.spec.containers[0].image == "registry.invalid/hello:1.0.0",
            "the release's Deployment image restored",
        )
        assert deployment().spec.replicas == 3  # driftExclusions: /spec/replicas is the member's
        assert _revisions(bins, kubeconfig, namespace) == [1]  # restored without a new helm revision

        # Another pass (woken by an edit elsewhere) still leaves the excluded path as it is.
        _restored_after(
            lambda: member.patch(
                ConfigMap, "plain", {"data": {"setting": "again"}}, namespace=namespace, field_manager=EDITOR
            ),
            lambda: _cm_data(member, "plain", namespace) == {"setting": "from-profile"},
            "the policyRef's ConfigMap restored again",
        )
        assert deployment().spec.replicas == 3
        assert _revisions(bins, kubeconfig, namespace) == [1]
        drift = _summary_status(management, name).get("drift") or []
        for what, seconds in timings.items():
            print(f"drift restored: {what}: {seconds:.2f}s from the edit on the member")
        print(f"last reported drift: {drift}")
    finally:
        management.delete(kinds.resource("ClusterProfile"), name)
        wait_for(lambda: not _summary_status(management, name), what="summary withdrawn")
