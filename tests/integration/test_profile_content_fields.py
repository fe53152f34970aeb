"""Profile fields that shape what reaches a member, each seen on a real member (the field test,
tests/unit/api/test_api_no_field_ignored.py, cites these):

- optional sources (a policyRef, a kustomizationRef, a template resource, a chart's valuesFrom)
  that do not exist are left out and the rest is delivered;
- kustomize `components`, `valuesFrom` and `tier` (against another profile's copy); `patchesFrom`;
  `extraLabels` and `extraAnnotations`; `driftExclusions` leaving their paths out of what is applied;
- `stopMatchingBehavior: LeavePolicies` leaving the content on a cluster that stops matching;
- `continueOnError` deciding whether what follows a refused object is applied;
- a chart's `valuesFrom` and `options` reaching helm, and `helmChartAction: Uninstall` removing the
  release while the profile stays.
"""

from __future__ import annotations

import base64
import io
import json
import subprocess
import tarfile
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from lightkube import ApiError, Client, codecs
from lightkube.resources.core_v1 import ConfigMap
from lightkube.types import PatchType
from promotion_support import CHARTS, ControllerThread, registered_controller, wait_for

from fleetwave.controllers.sveltos import summary_status as ss
from fleetwave.kube import kinds
from fleetwave.local import binaries, chartrepo, fleet

HOME = "fleetwave-system"  # where the members are registered


@pytest.fixture(scope="module")
def controller(
    local_fleet: fleet.FleetState, management: Client, bins: binaries.Binaries
) -> Iterator[ControllerThread]:
    with registered_controller(local_fleet, management, bins.path("helm"), "content-fields") as thread:
        yield thread


@pytest.fixture(scope="module")
def repo(bins: binaries.Binaries, tmp_path_factory: pytest.TempPathFactory) -> Iterator[chartrepo.ChartRepo]:
    directory = tmp_path_factory.mktemp("content-fields-charts")
    with chartrepo.serve(bins.path("helm"), directory, [(CHARTS / "hello", "1.0.0")]) as served:
        yield served


def _configmap(member: Client, namespace: str, name: str) -> dict[str, Any] | None:
    try:
        return member.get(ConfigMap, name, namespace=namespace).to_dict()
    except ApiError as e:
        if e.status.code == 404:
            return None
        raise


def _summary_exists(management: Client, profile: str, cluster: str) -> bool:
    try:
        management.get(kinds.resource("ClusterSummary"), ss.summary_name(profile, cluster), namespace=HOME)
    except ApiError as e:
        if e.status.code == 404:
            return False
        raise
    return True


def _label(management: Client, cluster: str, key: str, value: str | None) -> None:
    patch = {"metadata": {"labels": {key: value}}}
    management.patch(
        kinds.resource("MemberCluster"), cluster, patch, namespace=HOME, patch_type=PatchType.MERGE
    )


def _tgz(files: dict[str, str]) -> str:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, text in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(text.encode())
            tar.addfile(info, io.BytesIO(text.encode()))
    return base64.b64encode(buf.getvalue()).decode()


def _cm(namespace: str, name: str, data: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace},
        "data": data,
    }


OVERLAY = {
    "base/kustomization.yaml": "resources: [settings.yaml]\n",
    "base/settings.yaml": (
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: kz-settings\n"
        "data:\n  region: '{{ .Region }}'\n  team: '{{ .Team }}'\n  level: info\n"
    ),
    "overlays/fleet/kustomization.yaml": "resources: [../../base]\nnamePrefix: fields-\n",
    "components/debug/kustomization.yaml": (
        "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\n"
        "patches:\n- patch: |\n    - op: replace\n      path: /data/level\n      value: debug\n"
        "  target: {kind: ConfigMap}\n"
    ),
}


def _sources(namespace: str) -> list[dict[str, Any]]:
    app = (
        f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: fields-app\n  namespace: {namespace}\n"
        "data:\n  keep: kept\n  local: set-on-the-member-only\n"
    )
    patch = (
        "patch: |\n  apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: fields-app\n"
        f"    namespace: {namespace}\n    labels:\n      from-patches: 'yes'\n"
    )
    kustomize = _cm(namespace, "kz", {})
    kustomize["binaryData"] = {"kustomize.tar.gz": _tgz(OVERLAY)}
    return [
        _cm(namespace, "app", {"app.yaml": app}),
        _cm(namespace, "more-patches", {"p": patch}),
        _cm(namespace, "kz-values", {"Team": "core"}),
        kustomize,
    ]


def _content_profile(name: str, namespace: str, label: str) -> dict[str, Any]:
    absent = {"kind": "ConfigMap", "name": "absent", "namespace": namespace, "optional": True}
    return {
        "apiVersion": "fleetwave.io/v1alpha1",
        "kind": "ClusterProfile",
        "metadata": {"name": name},
        "spec": {
            "clusterSelector": {"matchLabels": {label: "yes"}},
            "stopMatchingBehavior": "LeavePolicies",
            "templateResourceRefs": [
                {
                    "resource": {
                        "apiVersion": "v1",
                        "kind": "ConfigMap",
                        "name": "absent",
                        "namespace": namespace,
                    },
                    "identifier": "absent",
                    "optional": True,
                }
            ],
            "policyRefs": [{"kind": "ConfigMap", "name": "app", "namespace": namespace}, absent],
            "kustomizationRefs": [
                {
                    "kind": "ConfigMap",
                    "name": "kz",
                    "namespace": namespace,
                    "path": "./overlays/fleet/",
                    "components": ["../../components/debug"],
                    "targetNamespace": namespace,
                    "values": {"Region": "r-{{ .Cluster.metadata.name }}"},
                    "valuesFrom": [{"kind": "ConfigMap", "name": "kz-values", "namespace": namespace}],
                },
                absent,
            ],
            "patchesFrom": [{"kind": "ConfigMap", "name": "more-patches", "namespace": namespace}],
            "extraLabels": {"fields-extra": "label"},
            "extraAnnotations": {"fields-note": "annotation"},
            "driftExclusions": [
                {
                    "paths": ["/data/local"],
                    "target": {
                        "group": "",
                        "version": "v1",
                        "kind": "ConfigMap",
                        "name": "fields-app",
                        "namespace": namespace,
                    },
                }
            ],
        },
    }


def test_optional_sources_kustomize_patches_extra_metadata_and_exclusions_shape_what_a_member_gets(
    controller: ControllerThread,
    management: Client,
    members: dict[str, Client],
    namespace: str,
    local_fleet: fleet.FleetState,
) -> None:
    profile, label = f"fields-{uuid.uuid4().hex[:5]}", f"fields-{uuid.uuid4().hex[:5]}"
    dev = next(c.name for c in local_fleet.members if c.labels.get("env") == "dev")
    for doc in [*_sources(namespace), _content_profile(profile, namespace, label)]:
        management.apply(codecs.from_dict(doc), field_manager="test")
    _label(management, dev, label, "yes")
    try:
        app = wait_for(lambda: _configmap(members[dev], namespace, "fields-app"), what="fields-app on dev")
        # driftExclusions: /data/local is never applied; the rest is.
        assert app["data"] == {"keep": "kept"}
        labels, annotations = app["metadata"]["labels"], app["metadata"].get("annotations") or {}
        assert labels["fields-extra"] == "label"  # extraLabels
        assert labels["from-patches"] == "yes"  # patchesFrom
        assert annotations["fields-note"] == "annotation"  # extraAnnotations
        kz = wait_for(
            lambda: _configmap(members[dev], namespace, "fields-kz-settings"),
            what="the kustomize output on dev",
        )
        # values per cluster, valuesFrom's Team, and the component's level.
        assert kz["data"] == {"region": f"r-{dev}", "team": "core", "level": "debug"}
        others = [n for n in members if n != dev]
        assert all(_configmap(members[n], namespace, "fields-app") is None for n in others)

        # The cluster stops matching: its summary goes, and LeavePolicies leaves the content there.
        _label(management, dev, label, None)
        wait_for(lambda: not _summary_exists(management, profile, dev) or None, what="dev's summary removed")
        assert _configmap(members[dev], namespace, "fields-app") is not None
        assert _configmap(members[dev], namespace, "fields-kz-settings") is not None
    finally:
        _label(management, dev, label, None)
        management.delete(kinds.resource("ClusterProfile"), profile)


def _chart_profile(name: str, namespace: str, repo_url: str, action: str) -> dict[str, Any]:
    chart = {
        "repositoryURL": repo_url,
        "repositoryName": "local",
        "chartName": "local/hello",
        "chartVersion": "1.0.0",
        "releaseName": name,
        "releaseNamespace": namespace,
        "helmChartAction": action,
        "valuesFrom": [
            {"kind": "ConfigMap", "name": "chart-values", "namespace": namespace},
            {"kind": "Secret", "name": "absent", "namespace": namespace, "optional": True},
        ],
        "options": {"description": "installed by the field test"},
    }
    return {
        "apiVersion": "fleetwave.io/v1alpha1",
        "kind": "ClusterProfile",
        "metadata": {"name": name},
        "spec": {"clusterSelector": {"matchLabels": {"env": "dev"}}, "helmCharts": [chart]},
    }


def _helm_description(helm: str, kubeconfig: str, release: str, namespace: str) -> str | None:
    done = subprocess.run(
        [helm, "status", release, "-n", namespace, "--kubeconfig", kubeconfig, "-o", "json"],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        return None
    return str(json.loads(done.stdout)["info"].get("description"))


def test_a_charts_values_from_and_options_reach_helm_and_uninstall_removes_the_release(
    controller: ControllerThread,
    management: Client,
    members: dict[str, Client],
    namespace: str,
    local_fleet: fleet.FleetState,
    repo: chartrepo.ChartRepo,
    bins: binaries.Binaries,
) -> None:
    release = f"fields-{uuid.uuid4().hex[:5]}"
    dev = next(c for c in local_fleet.members if c.labels.get("env") == "dev")
    values = _cm(namespace, "chart-values", {"values.yaml": "message: from valuesFrom\n"})
    management.apply(codecs.from_dict(values), field_manager="test")
    management.apply(
        codecs.from_dict(_chart_profile(release, namespace, repo.url, "Install")), field_manager="test"
    )
    try:
        config = wait_for(
            lambda: _configmap(members[dev.name], namespace, f"{release}-config"), what="the release on dev"
        )
        assert config["data"]["message"] == "from valuesFrom"  # valuesFrom over the chart's default
        described = _helm_description(bins.path("helm"), dev.kubeconfig, release, namespace)
        assert described == "installed by the field test"  # options.description reached helm

        uninstall = _chart_profile(release, namespace, repo.url, "Uninstall")
        management.apply(codecs.from_dict(uninstall), field_manager="test")
        wait_for(
            lambda: _configmap(members[dev.name], namespace, f"{release}-config") is None or None,
            what="the release uninstalled from dev",
        )
        assert _helm_description(bins.path("helm"), dev.kubeconfig, release, namespace) is None
        management.get(kinds.resource("ClusterProfile"), release)  # the profile itself stays
    finally:
        management.delete(kinds.resource("ClusterProfile"), release)


def _failure(management: Client, profile: str, cluster: str) -> str | None:
    try:
        found = management.get(
            kinds.resource("ClusterSummary"), ss.summary_name(profile, cluster), namespace=HOME
        )
    except ApiError:
        return None
    features = (found.status or {}).get("featureSummaries") or []
    failed = [str(f.get("failureMessage") or "") for f in features if f.get("status") == "Failed"]
    return " ".join(failed) or None


def test_continue_on_error_applies_what_follows_a_failed_object(
    controller: ControllerThread,
    management: Client,
    members: dict[str, Client],
    namespace: str,
    local_fleet: fleet.FleetState,
) -> None:
    """A ConfigMap the API server refuses (a number as data) before a good one: without
    `continueOnError` the good one is not applied; with `continueOnError: true` it is."""
    profile = f"errors-{uuid.uuid4().hex[:5]}"
    dev = next(c.name for c in local_fleet.members if c.labels.get("env") == "dev")
    objects = (
        f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a-bad\n  namespace: {namespace}\n"
        "data:\n  n: 1\n---\n"
        f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b-good\n  namespace: {namespace}\n"
        "data:\n  v: '1'\n"
    )
    management.apply(
        codecs.from_dict(_cm(namespace, "errors", {"objects.yaml": objects})), field_manager="test"
    )

    def doc(continue_on_error: bool) -> dict[str, Any]:
        return {
            "apiVersion": "fleetwave.io/v1alpha1",
            "kind": "ClusterProfile",
            "metadata": {"name": profile},
            "spec": {
                "clusterSelector": {"matchLabels": {"env": "dev"}},
                "continueOnError": continue_on_error,
                "policyRefs": [{"kind": "ConfigMap", "name": "errors", "namespace": namespace}],
            },
        }

    management.apply(codecs.from_dict(doc(False)), field_manager="test")
    try:
        wait_for(lambda: _failure(management, profile, dev), what="the refused ConfigMap reported on dev")
        assert _configmap(members[dev], namespace, "b-good") is None  # stopped at the failure
        management.apply(codecs.from_dict(doc(True)), field_manager="test")
        wait_for(
            lambda: _configmap(members[dev], namespace, "b-good"), what="b-good applied past the failure"
        )
        assert _configmap(members[dev], namespace, "a-bad") is None
        assert _failure(management, profile, dev)  # the failure is still reported
    finally:
        management.delete(kinds.resource("ClusterProfile"), profile)


def _messages(management: Client, profile: str, cluster: str) -> str:
    try:
        found = management.get(
            kinds.resource("ClusterSummary"), ss.summary_name(profile, cluster), namespace=HOME
        )
    except ApiError:
        return ""
    features = (found.status or {}).get("featureSummaries") or []
    return " ".join(str(f.get("failureMessage") or "") for f in features)


def test_a_kustomization_refs_tier_decides_who_holds_an_object_two_profiles_deliver(
    controller: ControllerThread,
    management: Client,
    members: dict[str, Client],
    namespace: str,
    local_fleet: fleet.FleetState,
) -> None:
    """A ConfigMap delivered by one profile's policyRefs (tier 100): another profile building the same
    object with kustomize is in conflict at the same tier, and takes it over at `tier: 50`."""
    base, built = f"base-{uuid.uuid4().hex[:5]}", f"built-{uuid.uuid4().hex[:5]}"
    dev = next(c.name for c in local_fleet.members if c.labels.get("env") == "dev")

    def shared(owner: str, namespaced: bool) -> str:
        where = f"\n  namespace: {namespace}" if namespaced else ""
        return f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: shared{where}\ndata:\n  owner: {owner}\n"

    tree = {
        "base/kustomization.yaml": "resources: [shared.yaml]\n",
        "base/shared.yaml": shared("kustomize", False),
    }
    source = _cm(namespace, "kz-shared", {})
    source["binaryData"] = {"kustomize.tar.gz": _tgz(tree)}
    plain = _cm(namespace, "plain-shared", {"shared.yaml": shared("policy", True)})

    def profile(name: str, spec: dict[str, Any]) -> dict[str, Any]:
        selector = {"clusterSelector": {"matchLabels": {"env": "dev"}}}
        return {
            "apiVersion": "fleetwave.io/v1alpha1",
            "kind": "ClusterProfile",
            "metadata": {"name": name},
            "spec": {**selector, **spec},
        }

    def kustomized(tier: int | None) -> dict[str, Any]:
        ref: dict[str, Any] = {
            "kind": "ConfigMap",
            "name": "kz-shared",
            "namespace": namespace,
            "path": "./base/",
            "targetNamespace": namespace,
        }
        if tier is not None:
            ref["tier"] = tier
        return profile(built, {"kustomizationRefs": [ref]})

    def owner() -> str | None:
        found = _configmap(members[dev], namespace, "shared")
        return None if found is None else str(found["data"]["owner"])

    for doc in (
        source,
        plain,
        profile(
            base, {"policyRefs": [{"kind": "ConfigMap", "name": "plain-shared", "namespace": namespace}]}
        ),
    ):
        management.apply(codecs.from_dict(doc), field_manager="test")
    try:
        wait_for(lambda: owner() == "policy" or None, what="the policyRefs copy on dev")
        management.apply(codecs.from_dict(kustomized(None)), field_manager="test")
        wait_for(
            lambda: "already deployed" in _messages(management, built, dev) or None,
            what="the kustomize copy in conflict at the same tier",
        )
        assert owner() == "policy"
        management.apply(codecs.from_dict(kustomized(50)), field_manager="test")
        wait_for(lambda: owner() == "kustomize" or None, what="tier 50 takes the object over")
    finally:
        for name in (built, base):
            management.delete(kinds.resource("ClusterProfile"), name)
