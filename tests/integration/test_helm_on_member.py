"""A real helm installs, upgrades and uninstalls a chart served over HTTP on loopback."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from lightkube import ApiError, Client
from lightkube.resources.apps_v1 import Deployment
from lightkube.resources.core_v1 import ConfigMap

from fleetwave.local import binaries, chartrepo, fleet

CHARTS = Path(__file__).resolve().parents[1] / "charts"


@pytest.fixture(scope="module")
def repo(bins: binaries.Binaries, tmp_path_factory: pytest.TempPathFactory) -> Iterator[chartrepo.ChartRepo]:
    charts = [(CHARTS / "hello", "1.0.0"), (CHARTS / "hello", "1.1.0")]
    with chartrepo.serve(bins.path("helm"), tmp_path_factory.mktemp("charts"), charts) as served:
        yield served


def _helm(bins: binaries.Binaries, kubeconfig: str, *args: str) -> str:
    proc = subprocess.run(
        [bins.path("helm"), "--kubeconfig", kubeconfig, *args], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_helm_install_upgrade_uninstall_from_a_loopback_chart_repository(
    bins: binaries.Binaries,
    repo: chartrepo.ChartRepo,
    local_fleet: fleet.FleetState,
    members: dict[str, Client],
    namespace: str,
) -> None:
    member = local_fleet.members[0]
    client = members[member.name]
    common = ["--namespace", namespace, "--repo", repo.url]

    _helm(bins, member.kubeconfig, "install", "greeter", "hello", "--version", "1.0.0", *common)
    cm = client.get(ConfigMap, "greeter-config", namespace=namespace)
    assert cm.data is not None
    assert cm.data["chartVersion"] == "1.0.0"
    assert client.get(Deployment, "greeter", namespace=namespace).spec.replicas == 1

    _helm(
        bins,
        member.kubeconfig,
        "upgrade",
        "greeter",
        "hello",
        "--version",
        "1.1.0",
        "--set",
        "replicas=2",
        *common,
    )
    cm = client.get(ConfigMap, "greeter-config", namespace=namespace)
    assert cm.data is not None
    assert cm.data["chartVersion"] == "1.1.0"
    assert client.get(Deployment, "greeter", namespace=namespace).spec.replicas == 2
    history = _helm(bins, member.kubeconfig, "history", "greeter", "--namespace", namespace)
    assert "1.1.0" in history
    assert "1.0.0" in history

    _helm(bins, member.kubeconfig, "uninstall", "greeter", "--namespace", namespace, "--wait")
    with pytest.raises(ApiError) as err:
        client.get(Deployment, "greeter", namespace=namespace)
    assert err.value.status.code == 404
