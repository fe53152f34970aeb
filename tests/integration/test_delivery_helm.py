"""Helm releases on a real member via the delivery layer: install, upgrade, no-op, bad values, uninstall."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from lightkube import ApiError, Client
from lightkube.resources.apps_v1 import Deployment
from lightkube.resources.core_v1 import ConfigMap

from fleetwave.api.sveltos import HelmChart
from fleetwave.delivery import helm
from fleetwave.delivery.target import MemberTarget, MemberUnreachable
from fleetwave.local import binaries, chartrepo, fleet

CHARTS = Path(__file__).resolve().parents[1] / "charts"


@pytest.fixture(scope="module")
def repo(bins: binaries.Binaries, tmp_path_factory: pytest.TempPathFactory) -> Iterator[chartrepo.ChartRepo]:
    charts = [(CHARTS / "hello", "1.0.0"), (CHARTS / "hello", "1.1.0")]
    with chartrepo.serve(bins.path("helm"), tmp_path_factory.mktemp("delivery-charts"), charts) as served:
        yield served


@pytest.fixture
def target(local_fleet: fleet.FleetState) -> MemberTarget:
    member = local_fleet.members[1]
    return MemberTarget.from_file(member.name, member.kubeconfig)


@pytest.fixture
def member(local_fleet: fleet.FleetState, members: dict[str, Client]) -> Client:
    return members[local_fleet.members[1].name]


def _chart(repo_url: str, namespace: str, version: str, values: str | None = None, **extra: Any) -> HelmChart:
    return HelmChart.model_validate(
        {
            "repositoryURL": repo_url,
            "repositoryName": "local",
            "chartName": "local/hello",
            "chartVersion": version,
            "releaseName": "greeter",
            "releaseNamespace": namespace,
            "values": values,
            **extra,
        }
    )


async def test_install_upgrade_noop_bad_values_and_uninstall(
    bins: binaries.Binaries, repo: chartrepo.ChartRepo, target: MemberTarget, member: Client, namespace: str
) -> None:
    helm_bin = bins.path("helm")

    installed = await helm.install_or_upgrade(target, _chart(repo.url, namespace, "1.0.0"), helm=helm_bin)
    assert installed.ok, installed.error
    assert (installed.action, installed.revision, installed.status) == ("installed", 1, "deployed")
    assert (installed.chart_name, installed.chart_version) == ("hello", "1.0.0")
    assert member.get(ConfigMap, "greeter-config", namespace=namespace).data == {
        "message": "hello from fleetwave",
        "chartVersion": "1.0.0",
    }

    chart_v11 = _chart(repo.url, namespace, "1.1.0", "replicas: 2\n")
    upgraded = await helm.install_or_upgrade(
        target, chart_v11, helm=helm_bin, values={"message": "from valuesFrom"}
    )
    assert upgraded.ok, upgraded.error
    assert (upgraded.action, upgraded.revision, upgraded.chart_version) == ("upgraded", 2, "1.1.0")
    assert member.get(Deployment, "greeter", namespace=namespace).spec.replicas == 2
    cm = member.get(ConfigMap, "greeter-config", namespace=namespace)
    assert cm.data == {"message": "from valuesFrom", "chartVersion": "1.1.0"}

    again = await helm.install_or_upgrade(
        target, chart_v11, helm=helm_bin, values={"message": "from valuesFrom"}
    )
    assert (again.action, again.revision, again.values_hash) == ("unchanged", 2, upgraded.values_hash)

    # Seed 002: `replicas: true` must fail, with helm's message in the report, not an exception.
    bad = await helm.install_or_upgrade(
        target, _chart(repo.url, namespace, "1.1.0", "replicas: true\n"), helm=helm_bin
    )
    assert not bad.ok
    assert bad.action == "failed"
    assert bad.error is not None
    assert "replicas" in bad.error
    assert bad.recovery == "rolled back to revision 2"  # the API server refused mid-upgrade
    assert bad.status == "deployed"
    still = await helm.status(target, helm=helm_bin, release_name="greeter", release_namespace=namespace)
    assert still is not None
    assert (still.status, still.chart_version) == ("deployed", "1.1.0")
    assert still.values == {"replicas": 2, "message": "from valuesFrom"}
    assert member.get(Deployment, "greeter", namespace=namespace).spec.replicas == 2

    # The failed attempt does not block the next one.
    fixed = await helm.install_or_upgrade(
        target, _chart(repo.url, namespace, "1.1.0", "replicas: 3\n"), helm=helm_bin
    )
    assert fixed.ok, fixed.error
    assert fixed.action == "upgraded"
    assert member.get(Deployment, "greeter", namespace=namespace).spec.replicas == 3

    removed = await helm.uninstall(target, helm=helm_bin, release_name="greeter", release_namespace=namespace)
    assert removed.action == "uninstalled"
    with pytest.raises(ApiError) as err:
        member.get(Deployment, "greeter", namespace=namespace)
    assert err.value.status.code == 404
    assert (
        await helm.status(target, helm=helm_bin, release_name="greeter", release_namespace=namespace) is None
    )
    gone = await helm.uninstall(target, helm=helm_bin, release_name="greeter", release_namespace=namespace)
    assert gone.action == "absent"


async def test_a_failed_first_install_leaves_nothing_behind(
    bins: binaries.Binaries, repo: chartrepo.ChartRepo, target: MemberTarget, member: Client, namespace: str
) -> None:
    helm_bin = bins.path("helm")
    chart = _chart(repo.url, namespace, "1.0.0", "replicas: true\n")

    first = await helm.install_or_upgrade(target, chart, helm=helm_bin)

    assert first.action == "failed"
    assert first.error is not None
    assert "replicas" in first.error
    assert first.recovery == "uninstalled the failed first install"
    assert (
        await helm.status(target, helm=helm_bin, release_name="greeter", release_namespace=namespace) is None
    )
    retry = await helm.install_or_upgrade(target, _chart(repo.url, namespace, "1.0.0"), helm=helm_bin)
    assert retry.ok, retry.error
    assert (retry.action, retry.revision) == ("installed", 1)
    assert member.get(Deployment, "greeter", namespace=namespace).spec.replicas == 1


async def test_dry_run_and_a_local_chart_directory(
    bins: binaries.Binaries, target: MemberTarget, member: Client, namespace: str
) -> None:
    helm_bin = bins.path("helm")
    local = HelmChart.model_validate(
        {"repositoryURL": str(CHARTS / "hello"), "releaseName": "local", "releaseNamespace": namespace}
    )

    planned = await helm.install_or_upgrade(target, local, helm=helm_bin, dry_run=True)
    assert planned.ok, planned.error
    assert (planned.action, planned.dry_run) == ("installed", True)
    assert await helm.status(target, helm=helm_bin, release_name="local", release_namespace=namespace) is None
    with pytest.raises(ApiError):
        member.get(ConfigMap, "local-config", namespace=namespace)

    done = await helm.install_or_upgrade(target, local, helm=helm_bin)
    assert (done.action, done.chart_name, done.chart_version) == ("installed", "hello", "1.0.0")
    assert (await helm.install_or_upgrade(target, local, helm=helm_bin)).action == "unchanged"


async def test_helm_against_a_member_that_is_down_raises_member_unreachable(
    bins: binaries.Binaries, repo: chartrepo.ChartRepo, dead_target: MemberTarget
) -> None:
    with pytest.raises(MemberUnreachable) as err:
        await helm.install_or_upgrade(
            dead_target, _chart(repo.url, "default", "1.0.0"), helm=bins.path("helm")
        )
    assert err.value.cluster == "dead"
