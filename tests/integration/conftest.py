"""Session fixtures: one real local fleet (etcd + kube-apiservers + KCM/scheduler/kwok) for all tests.

Starting the fleet costs tens of seconds on 2 cores, so it starts once per session; tests isolate
themselves by namespace and by object names.
"""

from __future__ import annotations

import datetime as dt
import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import capi_support
import httpx2
import pytest
from lightkube import ApiError, Client
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import ConfigMap, Namespace

from fleetwave.delivery.target import MemberTarget
from fleetwave.kube import client as kubeclient
from fleetwave.kube import kinds
from fleetwave.local import binaries, fleet, processes
from fleetwave.local import flux as local_flux
from fleetwave.local import prometheus as local_prometheus
from fleetwave.local import registry as local_registry
from fleetwave.promapi import guards

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session", autouse=True)
def loopback_targets() -> Iterator[None]:
    """The operator's opt-in for loopback targets (ADR 0096), for the whole session: the tests'
    Prometheus, webhook receivers, notification sinks and chart repositories listen on 127.0.0.1,
    and tests call helm, metric sources and the sandbox pool without a controller's settings. Child
    processes (the sandbox workers, `controller run`) inherit it."""
    before = os.environ.get(guards.ALLOW_LOOPBACK_ENV)
    guards.allow_loopback_targets()
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(guards.ALLOW_LOOPBACK_ENV, None)
        else:
            os.environ[guards.ALLOW_LOOPBACK_ENV] = before


@pytest.fixture(scope="session")
def bins() -> binaries.Binaries:
    return binaries.ensure()


@pytest.fixture(scope="session")
def local_fleet(
    tmp_path_factory: pytest.TempPathFactory, bins: binaries.Binaries
) -> Iterator[fleet.FleetState]:
    state_dir = tmp_path_factory.mktemp("fleet")
    members = fleet.default_member_labels(3)
    state = fleet.up(state_dir, members=members, now=dt.datetime.now(dt.UTC), bin_dir=bins.directory)
    try:
        yield state
    finally:
        if os.environ.get("FLEETWAVE_KEEP_TEST_FLEET") != "1":
            fleet.down(state_dir)


@pytest.fixture(scope="session")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[local_prometheus.Prometheus]:
    """A real Prometheus scraping a real Pushgateway every second (Debian's binaries, fetched by
    scripts/test into $FLEETWAVE_PROMETHEUS_DIR, or by tools/prometheus/fetch.sh here)."""
    started = local_prometheus.start(tmp_path_factory.mktemp("prometheus"))
    try:
        yield started
    finally:
        local_prometheus.stop(started)


@pytest.fixture(scope="session")
def flux_dir() -> Path:
    """The directory holding Flux's source-controller, the OCI registry and Flux's CRDs (ADR 0104):
    $FLEETWAVE_FLUX_DIR (scripts/test sets it; refused if broken), else built here by
    tools/flux/build.sh. Skipped only when that variable is unset and the build is impossible."""
    try:
        return local_flux.binaries_dir()
    except local_flux.FluxError as e:
        if os.environ.get("FLEETWAVE_FLUX_DIR"):
            raise
        pytest.skip(f"FLEETWAVE_FLUX_DIR is unset and tools/flux/build.sh could not build Flux's parts: {e}")


@pytest.fixture(scope="session")
def flux(
    tmp_path_factory: pytest.TempPathFactory,
    local_fleet: fleet.FleetState,
    bins: binaries.Binaries,
    flux_dir: Path,
) -> Iterator[local_flux.Flux]:
    """Flux's CRDs on the session fleet's management cluster, the real source-controller
    reconciling every namespace of it, and a Git server on loopback (`flux.create_repo(name)` ->
    clone URL, `flux.push(name, tree)` -> commit sha; artifacts at `flux.storage_url`)."""
    started = local_flux.start(
        tmp_path_factory.mktemp("flux"),
        kubeconfig=local_fleet.cluster(fleet.MANAGEMENT).kubeconfig,
        kubectl_binary=bins.path("kubectl"),
        flux_dir=flux_dir,
    )
    try:
        yield started
    finally:
        local_flux.stop(started)


@pytest.fixture(scope="session")
def oci_registry(
    tmp_path_factory: pytest.TempPathFactory, flux_dir: Path
) -> Iterator[local_registry.Registry]:
    """A real OCI registry (distribution v3) over plain HTTP on loopback, no authentication:
    `oci://{registry.host}/<repo>` for an OCIRepository with `insecure: true`."""
    started = local_registry.start(tmp_path_factory.mktemp("registry"), bin_dir=flux_dir)
    try:
        yield started
    finally:
        local_registry.stop(started)


@pytest.fixture(scope="session")
def capi_dir() -> Path:
    """The directory holding Cluster API's `Cluster` CRD (ADR 0109): $FLEETWAVE_CAPI_DIR (scripts/test
    sets it; refused if not the pinned CRD), else fetched here by tools/capi/fetch.sh. Skipped only
    when that variable is unset and the fetch is impossible."""
    try:
        return capi_support.crd_dir()
    except capi_support.Unavailable as e:
        if os.environ.get("FLEETWAVE_CAPI_DIR"):
            raise
        pytest.skip(f"FLEETWAVE_CAPI_DIR is unset and tools/capi/fetch.sh could not fetch the CRD: {e}")


@pytest.fixture(scope="module")
def capi_crd(management: Client, capi_dir: Path) -> Iterator[None]:
    """Cluster API's `Cluster` CRD on the management cluster for a module, and the namespace its
    Clusters live in; removed afterwards (Clusters, their Secrets, the CRD), so that later modules run
    where Cluster API is not installed."""
    capi_support.install_crd(management, capi_dir)
    management.create(Namespace(metadata=ObjectMeta(name=capi_support.NAMESPACE)))
    try:
        yield
    finally:
        capi_support.remove_crd(management)
        management.delete(Namespace, capi_support.NAMESPACE)


@pytest.fixture(scope="module")
def capi_clusters(local_fleet: fleet.FleetState, management: Client, capi_crd: None) -> dict[str, str]:
    """One Cluster API Cluster per member, named after it, in capi_support.NAMESPACE, labelled
    `capi-env: dev|staging|prod` (member-1, -2, -3), with its `<name>-kubeconfig` Secret holding the
    member's own kubeconfig, and marked ready through the status subresource: member -> Cluster key."""
    envs = ("dev", "staging", "prod")
    for member, env in zip(local_fleet.members, envs, strict=False):
        kubeconfig = Path(member.kubeconfig).read_bytes()
        capi_support.create(management, member.name, kubeconfig, {"capi-env": env})
    return {m.name: f"capi:{capi_support.NAMESPACE}/{m.name}" for m in local_fleet.members}


@pytest.fixture(scope="session")
def management(local_fleet: fleet.FleetState) -> Client:
    return kubeclient.client(kubeclient.config_from_file(local_fleet.cluster(fleet.MANAGEMENT).kubeconfig))


@pytest.fixture(scope="session")
def members(local_fleet: fleet.FleetState) -> dict[str, Client]:
    return {c.name: kubeclient.client(kubeclient.config_from_file(c.kubeconfig)) for c in local_fleet.members}


@pytest.fixture
def namespace(members: dict[str, Client], management: Client) -> Iterator[str]:
    """A fresh namespace on the management cluster and on every member, deleted afterwards."""
    name = f"t-{uuid.uuid4().hex[:8]}"
    clients = [management, *members.values()]
    for c in clients:
        c.create(Namespace(metadata=ObjectMeta(name=name)))
    yield name
    _unregister(management, name)
    for c in clients:
        c.delete(Namespace, name)


def _unregister(management: Client, namespace: str) -> None:
    """Delete the member registrations a test made in `namespace` and wait until they are gone: a
    namespace is deleted in the background, and its MemberClusters (labelled env=dev like everyone's)
    would be selected by the next module's rollouts meanwhile."""
    resource = kinds.resource("MemberCluster")
    try:
        names = [m.metadata.name for m in management.list(resource, namespace=namespace)]
    except (ApiError, httpx2.HTTPStatusError):  # fleetwave's CRDs are not installed: none registered
        return
    for member in names:
        management.delete(resource, member, namespace=namespace)
    deadline = time.monotonic() + 60
    while list(management.list(resource, namespace=namespace)):
        assert time.monotonic() < deadline, f"MemberClusters in {namespace} were not deleted within 60s"
        time.sleep(0.2)


@pytest.fixture
def hub_ns(management: Client) -> Iterator[str]:
    """The seed's `kubectl create ns` and `kubectl create cm test-cm --from-literal=key=value1`."""
    name = f"kf-{uuid.uuid4().hex[:6]}"
    management.create(Namespace(metadata=ObjectMeta(name=name)))
    management.create(ConfigMap(metadata=ObjectMeta(name="test-cm", namespace=name), data={"key": "value1"}))
    yield name
    management.delete(Namespace, name)


@pytest.fixture
def dead_target(local_fleet: fleet.FleetState) -> MemberTarget:
    """The first member's kubeconfig, pointed at a loopback port nothing listens on."""
    member = local_fleet.members[0]
    text = Path(member.kubeconfig).read_text(encoding="utf-8")
    assert member.server in text
    return MemberTarget(
        "dead", text.replace(member.server, f"https://127.0.0.1:{processes.free_port()}").encode()
    )
