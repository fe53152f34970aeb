"""Templates, Kustomize and patches on the real fleet, written the way Sveltos' docs show them (ADR 0089):

- a ConfigMap marked `projectsveltos.io/template` whose content uses `.Cluster` and a management
  resource named in `templateResourceRefs`, rendered per cluster by Go's text/template;
- a `kustomizationRefs` ConfigMap holding `kustomize.tar.gz`, built by the pinned kustomize at an
  overlay path, into a target namespace, with `values` filled per cluster;
- `patches` (a templated strategic-merge patch) on what the profile delivers;
- a template that fails on one cluster only: that cluster says why, the others get their content.
"""

from __future__ import annotations

import base64
import io
import tarfile
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from lightkube import ApiError, Client, codecs
from lightkube.resources.core_v1 import ConfigMap
from lightkube.types import PatchType
from promotion_support import ControllerThread, registered_controller, wait_for

from fleetwave.controllers.sveltos import summary_status as ss
from fleetwave.kube import kinds
from fleetwave.local import binaries, fleet

HOME = "fleetwave-system"  # where the members are registered


@pytest.fixture(scope="module")
def controller(
    local_fleet: fleet.FleetState, management: Client, bins: binaries.Binaries
) -> Iterator[ControllerThread]:
    with registered_controller(local_fleet, management, bins.path("helm"), "templates") as thread:
        yield thread


def _configmap(member: Client, namespace: str, name: str) -> dict[str, Any] | None:
    try:
        return member.get(ConfigMap, name, namespace=namespace).to_dict()
    except ApiError as e:
        if e.status.code == 404:
            return None
        raise


def _summary(management: Client, profile: str, cluster: str) -> dict[str, Any]:
    try:
        found = management.get(
            kinds.resource("ClusterSummary"), ss.summary_name(profile, cluster), namespace=HOME
        )
    except ApiError:
        return {}
    return dict(found.status or {})


def _failure(management: Client, profile: str, cluster: str) -> str:
    features = _summary(management, profile, cluster).get("featureSummaries") or []
    return " ".join(str(f.get("failureMessage") or "") for f in features if f.get("status") == "Failed")


def _label(management: Client, cluster: str, tier: str | None) -> None:
    patch = {"metadata": {"labels": {"tier": tier}}}
    management.patch(
        kinds.resource("MemberCluster"), cluster, patch, namespace=HOME, patch_type=PatchType.MERGE
    )


def _data(member: Client, namespace: str) -> dict[str, Any]:
    return dict((_configmap(member, namespace, "app-settings") or {}).get("data") or {})


def _tgz(files: dict[str, str]) -> str:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, text in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(text.encode())
            tar.addfile(info, io.BytesIO(text.encode()))
    return base64.b64encode(buf.getvalue()).decode()


def _docs(namespace: str, profile: str) -> list[dict[str, Any]]:
    app_template = f"""
apiVersion: v1
kind: ConfigMap
metadata:
  name: app-settings
  namespace: {namespace}
data:
  cluster: "{{{{ .Cluster.metadata.name }}}}"
  environment: "{{{{ .Cluster.metadata.labels.env }}}}"
  replicas: "{{{{ (getResource "sizes").data.replicas }}}}"
  tier: "{{{{ index .Cluster.metadata.labels "tier" | default "standard" }}}}"
  {{{{- if eq .Cluster.metadata.labels.env "prod" }}}}
  guard: "{{{{ fail "prod needs a change window first" }}}}"
  {{{{- end }}}}
"""
    overlay = {
        "base/kustomization.yaml": "resources: [settings.yaml]\n",
        "base/settings.yaml": (
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: kz-settings\n"
            "data:\n  region: '{{ .Region }}'\n  level: info\n"
        ),
        "overlays/fleet/kustomization.yaml": "resources: [../../base]\nnamePrefix: fleet-\n",
    }
    return [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "sizes", "namespace": namespace},
            "data": {"replicas": "3"},
        },
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": "app-template",
                "namespace": namespace,
                "annotations": {"projectsveltos.io/template": "ok"},
            },
            "data": {"app.yaml": app_template},
        },
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "kustomize", "namespace": namespace},
            "binaryData": {"kustomize.tar.gz": _tgz(overlay)},
        },
        {
            "apiVersion": "fleetwave.io/v1alpha1",
            "kind": "ClusterProfile",
            "metadata": {"name": profile},
            "spec": {
                "clusterSelector": {"matchExpressions": [{"key": "env", "operator": "Exists"}]},
                "templateResourceRefs": [
                    {
                        "resource": {
                            "apiVersion": "v1",
                            "kind": "ConfigMap",
                            "name": "sizes",
                            "namespace": namespace,
                        },
                        "identifier": "sizes",
                    }
                ],
                "policyRefs": [{"kind": "ConfigMap", "name": "app-template", "namespace": namespace}],
                "kustomizationRefs": [
                    {
                        "kind": "ConfigMap",
                        "name": "kustomize",
                        "namespace": namespace,
                        "path": "./overlays/fleet/",
                        "targetNamespace": namespace,
                        "values": {"Region": "region-of-{{ .Cluster.metadata.name }}"},
                    }
                ],
                "patches": [
                    {
                        "target": {"kind": "ConfigMap", "name": "fleet-kz-settings"},
                        "patch": (
                            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: any\n"
                            "  labels:\n    patched-for: '{{ .Cluster.metadata.name }}'\n"
                        ),
                    }
                ],
            },
        },
    ]


def test_templates_kustomize_and_patches_reach_each_cluster_as_that_cluster_needs_them(
    controller: ControllerThread,
    management: Client,
    members: dict[str, Client],
    namespace: str,
    local_fleet: fleet.FleetState,
) -> None:
    profile = f"templated-{uuid.uuid4().hex[:5]}"
    envs = {c.name: c.labels.get("env") for c in local_fleet.members}
    for doc in _docs(namespace, profile):
        management.apply(codecs.from_dict(doc), field_manager="test")
    try:
        for name, env in envs.items():
            if env == "prod":
                continue
            settings = wait_for(
                lambda n=name: _configmap(members[n], namespace, "app-settings"),
                what=f"app-settings on {name}",
            )
            assert settings["data"] == {
                "cluster": name,
                "environment": env,
                "replicas": "3",
                "tier": "standard",
            }
            kz = wait_for(
                lambda n=name: _configmap(members[n], namespace, "fleet-kz-settings"),
                what=f"the kustomize output on {name}",
            )
            assert kz["data"] == {"region": f"region-of-{name}", "level": "info"}
            assert kz["metadata"]["labels"]["patched-for"] == name
            summary = wait_for(
                lambda n=name: _summary(management, profile, n) or None, what=f"the summary of {name}"
            )
            features = {f["featureID"]: f["status"] for f in summary.get("featureSummaries") or []}
            assert features == {"Resources": "Provisioned", "Kustomize": "Provisioned"}, summary
        # Each cluster got its own content: the delivered hashes differ per cluster.
        hashes = {
            next(
                f["hash"]
                for f in _summary(management, profile, n)["featureSummaries"]
                if f["featureID"] == "Resources"
            )
            for n, env in envs.items()
            if env != "prod"
        }
        assert len(hashes) == len([e for e in envs.values() if e != "prod"])

        prod = next(n for n, env in envs.items() if env == "prod")
        message = wait_for(
            lambda: _failure(management, profile, prod) or None, what="prod's template failure"
        )
        assert "prod needs a change window first" in message
        assert f"spec.policyRefs[0][app.yaml] (ConfigMap {namespace}/app-template): line 13:" in message
        assert _configmap(members[prod], namespace, "app-settings") is None
        assert _configmap(members[prod], namespace, "fleet-kz-settings") is None  # nothing half-applied

        # A pinned template resource is part of the revision: editing it redeploys with the new value.
        sizes = _docs(namespace, profile)[0]
        sizes["data"] = {"replicas": "5"}
        management.apply(codecs.from_dict(sizes), field_manager="test")
        dev = next(n for n, env in envs.items() if env == "dev")
        wait_for(
            lambda: (
                (_configmap(members[dev], namespace, "app-settings") or {}).get("data", {}).get("replicas")
                == "5"
            ),
            what="the new replicas on dev",
        )

        # `.Cluster` is the cluster as it is now: a new label renders and delivers again.
        _label(management, dev, "gold")
        try:
            wait_for(
                lambda: _data(members[dev], namespace).get("tier") == "gold",
                what="dev's content rendered again for its new label",
            )
        finally:
            _label(management, dev, None)
    finally:
        management.delete(kinds.resource("ClusterProfile"), profile)
        for name in envs:
            wait_for(
                lambda n=name: _configmap(members[n], namespace, "app-settings") is None or None,
                what=f"withdrawal from {name}",
            )
