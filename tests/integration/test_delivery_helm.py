"""Helm releases on a real member via the delivery layer: install, upgrade, no-op, bad values, uninstall;
a summary finalized without its snapshot removes only its own release;
a cancelled install (lost lease, SIGTERM) leaves no helm process behind."""

from __future__ import annotations

import asyncio
import os
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from lightkube import ApiError, Client
from lightkube.resources.apps_v1 import Deployment
from lightkube.resources.core_v1 import ConfigMap

from fleetwave.api.sveltos import HelmChart
from fleetwave.controllers.fleet.ports import HelmAdapter
from fleetwave.controllers.shared.context import Context
from fleetwave.controllers.sveltos import summary
from fleetwave.controllers.sveltos import summary_status as ss
from fleetwave.delivery import content as dc
from fleetwave.delivery import egress, helm
from fleetwave.delivery import helmplan as hp
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


@contextmanager
def hanging_repo() -> Iterator[tuple[str, list[socket.socket]]]:
    """A chart repository that accepts connections and never answers (helm waits on it)."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            held.append(conn)

    thread = threading.Thread(target=accept, name="hanging-repo", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}", held
    finally:
        stop.set()
        thread.join(5)
        for conn in held:
            conn.close()
        server.close()


def helm_processes(marker: str) -> list[int]:
    """Live (non-zombie) processes whose command line mentions `marker`."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read().decode(errors="replace")
            with open(f"/proc/{entry}/stat", encoding="utf-8") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            continue
        if marker in cmdline and state not in ("Z", "X"):
            found.append(int(entry))
    return found


async def test_a_cancelled_install_kills_and_reaps_helm(
    bins: binaries.Binaries, target: MemberTarget, namespace: str
) -> None:
    with hanging_repo() as (url, held):
        install = asyncio.create_task(
            helm.install_or_upgrade(target, _chart(url, namespace, "1.0.0"), helm=bins.path("helm"))
        )
        for _ in range(1200):  # helm has checked the release and is now waiting on the repository
            if held and helm_processes(url):
                break
            await asyncio.sleep(0.05)
        running = helm_processes(url)
        assert running, "helm never reached the chart repository"
        assert not install.done()

        install.cancel()
        with pytest.raises(asyncio.CancelledError):
            await install

        # Killed and reaped before the cancellation went on: gone, not even a zombie.
        assert helm_processes(url) == []
        assert not any(os.path.exists(f"/proc/{pid}") for pid in running)  # noqa: ASYNC240 - /proc


async def test_names_helm_must_not_see_are_refused_before_helm_runs(
    bins: binaries.Binaries, repo: chartrepo.ChartRepo, target: MemberTarget, namespace: str
) -> None:
    helm_bin = bins.path("helm")
    for bad, field in (
        ({"releaseName": "--kube-context=other"}, "releaseName"),
        ({"chartName": "local/--post-renderer=/bin/sh"}, "chartName"),
        ({"chartVersion": "--devel"}, "chartVersion"),
        ({"releaseNamespace": "-n"}, "releaseNamespace"),
    ):
        report = await helm.install_or_upgrade(
            target, _chart(repo.url, namespace, "1.0.0", **bad), helm=helm_bin
        )
        assert report.action == "failed"
        assert report.error is not None
        assert field in report.error
    refused = await helm.uninstall(target, helm=helm_bin, release_name="-a", release_namespace=namespace)
    assert refused.action == "failed"
    assert refused.error is not None
    assert "releaseName" in refused.error


async def test_a_release_another_owner_installed_is_kept_unless_a_lower_tier_takes_it_over(
    bins: binaries.Binaries, repo: chartrepo.ChartRepo, target: MemberTarget, namespace: str
) -> None:
    """Two profiles installing the same release (ADR 0063): the owner's release labels decide."""
    helm_bin = bins.path("helm")
    a, b, c = (hp.Ownership("summary-a"), hp.Ownership("summary-b"), hp.Ownership("summary-c", tier=50))

    first = await helm.install_or_upgrade(
        target, _chart(repo.url, namespace, "1.0.0"), helm=helm_bin, ownership=a
    )
    assert first.ok, first.error
    release = await helm.status(target, helm=helm_bin, release_name="greeter", release_namespace=namespace)
    assert release is not None
    assert release.labels == {hp.OWNER_LABEL: "summary-a", hp.TIER_LABEL: "100"}

    same_tier = await helm.install_or_upgrade(
        target, _chart(repo.url, namespace, "1.1.0"), helm=helm_bin, ownership=b
    )
    assert same_tier.action == "failed"
    assert same_tier.error is not None
    assert "deployed by summary-a (tier 100)" in same_tier.error
    kept = await helm.status(target, helm=helm_bin, release_name="greeter", release_namespace=namespace)
    assert kept is not None
    assert (kept.chart_version, kept.revision) == ("1.0.0", 1)

    lower = await helm.install_or_upgrade(
        target, _chart(repo.url, namespace, "1.1.0"), helm=helm_bin, ownership=c
    )
    assert lower.ok, lower.error
    assert lower.action == "upgraded"
    taken = await helm.status(target, helm=helm_bin, release_name="greeter", release_namespace=namespace)
    assert taken is not None
    assert taken.labels[hp.OWNER_LABEL] == "summary-c"
    assert taken.chart_version == "1.1.0"

    # The first owner withdrawing never removes what another owner now keeps.
    left = await helm.uninstall(
        target, helm=helm_bin, release_name="greeter", release_namespace=namespace, owner="summary-a"
    )
    assert left.action == "absent"
    assert await helm.status(target, helm=helm_bin, release_name="greeter", release_namespace=namespace)
    gone = await helm.uninstall(
        target, helm=helm_bin, release_name="greeter", release_namespace=namespace, owner="summary-c"
    )
    assert gone.action == "uninstalled"


def _summary_naming(releases: list[str], namespace: str, where: str) -> dict[str, Any]:
    """A summary being withdrawn whose `status` or whose copy of its profile's `spec` names the
    releases, with no other source beside it."""
    names = [{"releaseName": n, "releaseNamespace": namespace} for n in releases]
    named = (
        {"spec": {}, "status": {"helmReleaseSummaries": names}}
        if where == "status"
        else {"spec": {"clusterProfileSpec": {"helmCharts": names}}}
    )
    labels = {ss.PROFILE_LABEL: "web"}
    return {"metadata": {"name": "web-sveltos-m1", "namespace": "fleet", "labels": labels}, **named}


@pytest.mark.parametrize("where", ["status", "spec"])
async def test_a_summary_withdrawn_after_its_snapshot_is_gone_removes_its_release_and_no_other(
    bins: binaries.Binaries, repo: chartrepo.ChartRepo, target: MemberTarget, namespace: str, where: str
) -> None:
    """Garbage collection deletes a profile's content snapshot together with its summaries, so a
    summary is often finalized with no snapshot to read, and one deleted during its first delivery
    has no status either (then its copy of its profile's spec names its charts): the release so
    named that carries its owner label goes; one nobody labelled (a forged entry) stays."""
    helm_bin = bins.path("helm")
    raw = _summary_naming(["greeter", "bystander"], namespace, where)
    ours = hp.Ownership(dc.inventory_key(summary.owner_of(raw)))
    installed = await helm.install_or_upgrade(
        target, _chart(repo.url, namespace, "1.0.0"), helm=helm_bin, ownership=ours
    )
    assert installed.ok, installed.error
    by_hand = _chart(repo.url, namespace, "1.0.0", releaseName="bystander")
    assert (await helm.install_or_upgrade(target, by_hand, helm=helm_bin)).ok

    assert await summary.withdraw(_withdrawing_context(helm_bin), None, raw, target, body={}) is None

    assert (
        await helm.status(target, helm=helm_bin, release_name="greeter", release_namespace=namespace) is None
    )
    kept = await helm.status(target, helm=helm_bin, release_name="bystander", release_namespace=namespace)
    assert kept is not None


def _withdrawing_context(helm_bin: str) -> Context:
    """A context that can withdraw with no checks: nothing is written to the management cluster."""
    return Context(
        client=None,  # type: ignore[arg-type]
        cache=None,  # type: ignore[arg-type]
        recorder=None,  # type: ignore[arg-type]
        helm=HelmAdapter(helm_bin),
        health=None,  # type: ignore[arg-type]
        namespace="fleetwave-system",
        clock=lambda: datetime.now(UTC),
    )


async def test_helm_fetches_through_the_egress_proxy_which_refuses_forbidden_addresses(
    bins: binaries.Binaries, target: MemberTarget, tmp_path: Path
) -> None:
    """Real helm, given the process's egress proxy (ADR 0125): a chart URL at a metadata address —
    as an index.yaml or a redirect could name it — is refused by the proxy, over https (CONNECT)
    and over http (forwarded), before any connection is made."""
    with helm._session(bins.path("helm"), target) as h:
        for url in (
            "https://169.254.169.254/charts/x-1.0.0.tgz",
            "http://169.254.169.254/charts/x-1.0.0.tgz",
        ):
            pulled = await h.run("pull", "--destination", str(tmp_path), "--", url)
            assert pulled.code != 0
            assert "fleetwave egress: 169.254.169.254 is" in pulled.stderr, pulled.stderr


def _address_off_loopback() -> str | None:
    """This machine's address on its default route (Go sends loopback straight, never to a proxy)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # no packet is sent: this only picks the route
        except OSError:
            return None
        address = str(probe.getsockname()[0])
    return None if address.startswith("127.") else address


async def test_a_chart_from_a_repository_off_loopback_installs_through_the_egress_proxy(
    bins: binaries.Binaries, target: MemberTarget, namespace: str, tmp_path: Path
) -> None:
    address = _address_off_loopback()
    if address is None:
        pytest.skip("this machine has no address off loopback to serve a repository on")
    helm_bin = bins.path("helm")
    before = egress.shared().handled
    with chartrepo.serve(helm_bin, tmp_path, [(CHARTS / "hello", "1.0.0")], address=address) as served:
        installed = await helm.install_or_upgrade(
            target, _chart(served.url, namespace, "1.0.0"), helm=helm_bin
        )
    assert installed.ok, installed.error
    assert (installed.action, installed.chart_version) == ("installed", "1.0.0")
    assert egress.shared().handled >= before + 2  # the index and the chart, each its own connection
