"""Private Helm charts and post-render patches on the real fleet (ADR 0105), with real parts only:

- a private OCI registry (CNCF distribution v3: TLS with a CA of its own, htpasswd with bcrypt)
  serving a chart pushed with `helm push`, and an HTTP chart repository behind basic auth;
- ClusterProfiles whose charts name their `registryCredentialsConfig` as Sveltos' docs write it: a
  `kubernetes.io/dockerconfigjson` Secret and a CA Secret for the registry, an annotated
  `kubernetes.io/basic-auth` Secret for the repository. The charts land on the dev member;
- credentials outside the boundary (fleetwave's namespace) are refused in the profile's status, and
  Secrets of the wrong kind (Opaque, basic-auth without its hosts) fail the release naming the rule;
- the passwords appear in no log line (every fleetwave logger at DEBUG), Event or status of the run;
- `patches` (strategic merge, JSON 6902, one templated per cluster) reach a chart through helm's
  post-renderer, and show on the member.

The registry binary comes from `$FLEETWAVE_FLUX_DIR` (tools/flux/build.sh); without it the tests
that need the registry are skipped with that reason (the post-rendering one runs).
"""

from __future__ import annotations

import base64
import json
import logging
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from lightkube import ApiError, Client
from lightkube.resources.apps_v1 import Deployment
from lightkube.resources.core_v1 import ConfigMap, Event
from promotion_support import ControllerThread, registered_controller, wait_for

from fleetwave.controllers.sveltos import summary_status as ss
from fleetwave.delivery import registry
from fleetwave.kube import kinds, sync_ops
from fleetwave.local import binaries, chartrepo, fleet, private_registry
from fleetwave.mgmt import install

CHARTS = Path(__file__).resolve().parents[1] / "charts"
HOME = install.NAMESPACE
OCI_PASSWORD = f"oci-{uuid.uuid4().hex}"
HTTP_PASSWORD = f"http-{uuid.uuid4().hex}"
SECRETS = (
    OCI_PASSWORD,
    HTTP_PASSWORD,
    base64.b64encode(f"robot:{OCI_PASSWORD}".encode()).decode(),
    base64.b64encode(f"reader:{HTTP_PASSWORD}".encode()).decode(),
)


@pytest.fixture(scope="module")
def oci(bins: binaries.Binaries, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    if not os.environ.get(private_registry.FLUX_DIR_ENV):
        pytest.skip(f"${private_registry.FLUX_DIR_ENV} is not set: no distribution registry to serve charts")
    where = tmp_path_factory.mktemp("private-registry")
    with private_registry.serve(where / "registry", username="robot", password=OCI_PASSWORD) as served:
        chart = chartrepo.package(bins.path("helm"), CHARTS / "hello", where / "packaged", version="2.0.0")
        yield served, private_registry.push_chart(bins.path("helm"), served, chart)


@pytest.fixture(scope="module")
def http_repo(
    bins: binaries.Binaries, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[chartrepo.ChartRepo]:
    charts = [(CHARTS / "hello", "1.0.0")]
    where = tmp_path_factory.mktemp("private-repo")
    with chartrepo.serve(bins.path("helm"), where, charts, basic_auth=("reader", HTTP_PASSWORD)) as served:
        yield served


@pytest.fixture(scope="module")
def controller(
    local_fleet: fleet.FleetState, management: Client, bins: binaries.Binaries
) -> Iterator[ControllerThread]:
    with registered_controller(local_fleet, management, bins.path("helm"), "private-charts") as thread:
        yield thread


@pytest.fixture
def logs(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.DEBUG, logger="fleetwave")
    return caplog


def _b64(text: str | bytes) -> str:
    return base64.b64encode(text.encode() if isinstance(text, str) else text).decode()


def _secret(
    name: str, namespace: str, type_: str, data: dict[str, str | bytes], **meta: Any
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace, **meta},
        "type": type_,
        "data": {k: _b64(v) for k, v in data.items()},
    }


def _credentials(
    management: Client, namespace: str, repo_url: str, served: private_registry.PrivateRegistry | None = None
) -> None:
    """The Secrets a platform team keeps: a basic-auth Secret annotated with the one host it is for,
    and for the registry an image-pull style docker config and the registry's CA."""
    secrets = [
        _secret(
            "repo-reader",
            namespace,
            registry.BASIC_AUTH_TYPE,
            {"username": "reader", "password": HTTP_PASSWORD},
            annotations={registry.HOSTS_ANNOTATION: registry.host_of(repo_url)},
        )
    ]
    if served is not None:
        docker = {"auths": {served.host: {"username": served.username, "password": served.password}}}
        secrets += [
            _secret(
                "pull", namespace, registry.DOCKER_CONFIG_TYPE, {".dockerconfigjson": json.dumps(docker)}
            ),
            _secret("registry-ca", namespace, "Opaque", {"ca.crt": served.ca_cert.read_bytes()}),
        ]
    for secret in secrets:
        sync_ops.apply(management, secret)


def _oci_chart(url: str, namespace: str, release: str, credentials: dict[str, str]) -> dict[str, Any]:
    return {
        "repositoryURL": url,
        "repositoryName": "private",
        "chartName": "hello",
        "chartVersion": "2.0.0",
        "releaseName": release,
        "releaseNamespace": namespace,
        "registryCredentialsConfig": {
            "credentials": credentials,
            "ca": {"name": "registry-ca", "namespace": namespace},
        },
    }


def _http_chart(url: str, namespace: str, release: str, credentials: dict[str, str]) -> dict[str, Any]:
    return {
        "repositoryURL": url,
        "repositoryName": "private",
        "chartName": "private/hello",
        "chartVersion": "1.0.0",
        "releaseName": release,
        "releaseNamespace": namespace,
        "registryCredentialsConfig": {"credentials": credentials},
    }


def _profile(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "fleetwave.io/v1alpha1",
        "kind": "ClusterProfile",
        "metadata": {"name": name},
        "spec": {"clusterSelector": {"matchLabels": {"env": "dev"}}, **spec},
    }


def _configmap(member: Client, name: str, namespace: str) -> dict[str, str] | None:
    try:
        return dict(member.get(ConfigMap, name, namespace=namespace).data or {})
    except ApiError as e:
        if e.status.code == 404:
            return None
        raise


def _summary(management: Client, profile: str) -> dict[str, Any]:
    try:
        found = management.get(
            kinds.resource("ClusterSummary"), ss.summary_name(profile, "member-1"), namespace=HOME
        )
    except ApiError:
        return {}
    return found.to_dict()


def _events(management: Client, *names: str) -> list[str]:
    return [
        str(e.message or "")
        for name in names
        for e in management.list(Event, namespace="*", fields={"involvedObject.name": name})
    ]


def _shown_nowhere(management: Client, profiles: list[str], logs: pytest.LogCaptureFixture) -> None:
    """No password (nor its base64 form) in any log line, Event or status of the run."""
    shown = [logs.text]
    for name in profiles:
        profile = management.get(kinds.resource("ClusterProfile"), name)
        shown += [json.dumps(profile.status), json.dumps(_summary(management, name))]
        shown += _events(management, name, ss.summary_name(name, "member-1"))
    for text in shown:
        for secret in SECRETS:
            assert secret not in text


def _delete(management: Client, names: list[str]) -> None:
    for name in names:
        management.delete(kinds.resource("ClusterProfile"), name)
    wait_for(
        lambda: (
            not any(
                (s.metadata.labels or {}).get(ss.PROFILE_LABEL) in names
                for s in management.list(kinds.resource("ClusterSummary"), namespace="*")
            )
        ),
        timeout=120,
        what="the profiles' summaries withdrawn",
    )


def test_private_oci_and_http_charts_install_with_allowed_credentials_and_never_show_them(
    controller: ControllerThread,
    management: Client,
    members: dict[str, Client],
    namespace: str,
    oci: Any,
    http_repo: chartrepo.ChartRepo,
    logs: pytest.LogCaptureFixture,
) -> None:
    served, oci_url = oci
    _credentials(management, namespace, http_repo.url, served)
    name = f"private-{namespace}"
    charts = [
        _oci_chart(oci_url, namespace, "from-oci", {"name": "pull", "namespace": namespace}),
        _http_chart(http_repo.url, namespace, "from-http", {"name": "repo-reader", "namespace": namespace}),
    ]
    sync_ops.apply(management, _profile(name, {"helmCharts": charts}))
    member = members["member-1"]
    try:
        oci_cm = wait_for(
            lambda: _configmap(member, "from-oci-config", namespace), timeout=120, what="OCI chart"
        )
        http_cm = wait_for(
            lambda: _configmap(member, "from-http-config", namespace), timeout=120, what="HTTP chart"
        )
        assert oci_cm["chartVersion"] == "2.0.0"
        assert http_cm["chartVersion"] == "1.0.0"
        releases = wait_for(
            lambda: (
                (s := _summary(management, name).get("status") or {}).get("helmReleaseSummaries")
                and all(r.get("status") == "Managing" for r in s["helmReleaseSummaries"])
                and s["helmReleaseSummaries"]
            ),
            what="both releases managed",
        )
        assert {r["releaseName"] for r in releases} == {"from-oci", "from-http"}
        # The snapshot pins the references, never the Secrets' values.
        snapshot = management.get(
            ConfigMap,
            _summary(management, name)["metadata"]["annotations"][ss.CONTENT_ANNOTATION],
            namespace=HOME,
        )
        assert "repo-reader" in json.dumps(snapshot.data)
        for secret in SECRETS:
            assert secret not in json.dumps(snapshot.data)
        _shown_nowhere(management, [name], logs)
        assert controller.error is None
    finally:
        _delete(management, [name])
    assert _configmap(member, "from-oci-config", namespace) is None  # uninstalled with the profile


def test_credentials_outside_the_boundary_are_refused_naming_the_rule(
    controller: ControllerThread,
    management: Client,
    members: dict[str, Client],
    namespace: str,
    oci: Any,
    http_repo: chartrepo.ChartRepo,
    logs: pytest.LogCaptureFixture,
) -> None:
    served, oci_url = oci
    _credentials(management, namespace, http_repo.url, served)
    # A copy of the pull Secret in fleetwave's own namespace, an Opaque one, a basic-auth one that
    # does not say where it may go.
    docker = {"auths": {served.host: {"username": served.username, "password": served.password}}}
    own = _secret("stolen-pull", HOME, registry.DOCKER_CONFIG_TYPE, {".dockerconfigjson": json.dumps(docker)})
    opaque = _secret("opaque", namespace, "Opaque", {"username": "robot", "password": OCI_PASSWORD})
    unbound = _secret(
        "unbound", namespace, registry.BASIC_AUTH_TYPE, {"username": "reader", "password": HTTP_PASSWORD}
    )
    for secret in (own, opaque, unbound):
        sync_ops.apply(management, secret)
    inside = f"inside-{namespace}"
    wrong = f"wrong-kind-{namespace}"
    sync_ops.apply(
        management,
        _profile(
            inside,
            {
                "helmCharts": [
                    _oci_chart(oci_url, namespace, "own", {"name": "stolen-pull", "namespace": HOME})
                ]
            },
        ),
    )
    sync_ops.apply(
        management,
        _profile(
            wrong,
            {
                "continueOnError": True,
                "helmCharts": [
                    _oci_chart(oci_url, namespace, "opaque", {"name": "opaque", "namespace": namespace}),
                    _http_chart(
                        http_repo.url, namespace, "unbound", {"name": "unbound", "namespace": namespace}
                    ),
                ],
            },
        ),
    )
    member = members["member-1"]
    try:
        condition = wait_for(
            lambda: next(
                (
                    c
                    for c in (management.get(kinds.resource("ClusterProfile"), inside).status or {}).get(
                        "conditions"
                    )
                    or []
                    if c.get("type") == "Ready" and c.get("reason") == "InvalidSpec"
                ),
                None,
            ),
            what="the profile reading fleetwave's namespace refused",
        )
        assert (
            "spec.helmCharts[0].registryCredentialsConfig.credentials: Secret fleetwave-system/stolen-pull: "
            "fleetwave's own namespace is never a content source"
        ) in condition["message"]
        failed = wait_for(
            lambda: (
                {
                    r["releaseName"]: r.get("failureMessage", "")
                    for r in (_summary(management, wrong).get("status") or {}).get("helmReleaseSummaries")
                    or []
                    if r.get("status") == "Failed"
                }
                if len((_summary(management, wrong).get("status") or {}).get("helmReleaseSummaries") or [])
                == 2
                else None
            ),
            timeout=90,
            what="both releases failed",
        )
        assert failed["opaque"] == (
            f"registryCredentialsConfig.credentials: Secret {namespace}/opaque has type Opaque; registry "
            "credentials are read only from Secrets of type kubernetes.io/dockerconfigjson or "
            "kubernetes.io/basic-auth"
        )
        assert f"Secret {namespace}/unbound does not name the hosts it may be sent to" in failed["unbound"]
        for release in ("own", "opaque", "unbound"):
            assert _configmap(member, f"{release}-config", namespace) is None
        _shown_nowhere(management, [inside, wrong], logs)
    finally:
        _delete(management, [inside, wrong])
        management.delete(kinds.builtin_resource("v1", "Secret"), "stolen-pull", namespace=HOME)


def test_a_chart_is_patched_by_post_rendering_on_the_member(
    controller: ControllerThread,
    management: Client,
    members: dict[str, Client],
    namespace: str,
    http_repo: chartrepo.ChartRepo,
) -> None:
    _credentials(management, namespace, http_repo.url)
    name = f"patched-{namespace}"
    chart = _http_chart(http_repo.url, namespace, "patched", {"name": "repo-reader", "namespace": namespace})
    patches = [
        {  # strategic merge, rendered for each cluster
            "patch": "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: patched\n"
            "  labels: {patched-for: '{{ .Cluster.metadata.name }}'}\nspec:\n  replicas: 3\n",
            "target": {"kind": "Deployment"},
        },
        {  # JSON 6902
            "patch": "- op: add\n  path: /data/patchedBy\n  value: post-renderer\n",
            "target": {"kind": "ConfigMap", "name": "patched-config"},
        },
    ]
    sync_ops.apply(management, _profile(name, {"helmCharts": [chart], "patches": patches}))
    member = members["member-1"]
    try:
        data = wait_for(
            lambda: (d := _configmap(member, "patched-config", namespace)) and "patchedBy" in d and d,
            timeout=120,
            what="the patched ConfigMap",
        )
        assert data == {
            "message": "hello from fleetwave",
            "chartVersion": "1.0.0",
            "patchedBy": "post-renderer",
        }
        deployment = member.get(Deployment, "patched", namespace=namespace)
        assert deployment.spec.replicas == 3
        assert deployment.metadata.labels["patched-for"] == "member-1"
        assert deployment.metadata.labels["app.kubernetes.io/name"] == "patched"  # the chart's own stay
        # The status follows the install: wait for it rather than race it.
        wait_for(
            lambda: (
                [
                    f.get("status")
                    for f in (_summary(management, name).get("status") or {}).get("featureSummaries") or []
                ]
                == ["Provisioned"]
            ),
            what="the Helm feature provisioned",
        )
    finally:
        _delete(management, [name])
