"""Content from Git through Flux's real source-controller, on the real local fleet (ADR 0103).

A Git server on loopback (Debian's git http-backend) holds the content; source-controller (built
from the Go module proxy) turns each commit into an artifact; the controller, run with
`--flux-sources` under the installed RBAC, pins each artifact's manifests into the promotion's
revision. A push walks the stages like any content change; a rollback redeploys the pinned commit
after Git moved on; a kustomizationRef builds an overlay from Git per cluster; a tampered artifact
fails the cluster and applies nothing."""

from __future__ import annotations

import datetime as dt
import json
import shutil
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import flux_support
import pytest
import yaml
from lightkube import ApiError, Client
from lightkube.resources.core_v1 import ConfigMap
from lightkube.types import PatchType
from promotion_support import (
    ControllerThread,
    deleted_after,
    registered,
    running_controller,
    stage_phases,
    status,
    wait_for,
)
from typer.testing import CliRunner

from fleetwave.cli import app as cli_app
from fleetwave.kube import kinds
from fleetwave.local import binaries, fleet, oci
from fleetwave.local import flux as local_flux
from fleetwave.local import registry as local_registry
from fleetwave.mgmt import install, manifests, rbac

GIT_SOURCE = kinds.served_resource(kinds.FLUX_SOURCE_API_VERSION, "GitRepository", "gitrepositories", True)
PROMOTION = kinds.resource("ClusterPromotion")
RBAC_API = "rbac.authorization.k8s.io/v1"


@pytest.fixture(scope="module")
def controller(
    local_fleet: fleet.FleetState, management: Client, bins: binaries.Binaries, flux: local_flux.Flux
) -> Iterator[ControllerThread]:
    install.install(management, flux_sources=True)  # the read rights on Flux's kinds, before it starts
    try:
        with (
            registered(management, local_fleet),
            running_controller(local_fleet, bins.path("helm"), "flux", flux_sources=True) as thread,
        ):
            yield thread
    finally:
        # The read rights on Flux's kinds are this module's: later modules check that the installed
        # RBAC grants nothing beyond what fleetwave's own install does.
        for kind in ("ClusterRoleBinding", "ClusterRole"):
            management.delete(kinds.builtin_resource(RBAC_API, kind), rbac.FLUX_SOURCES_NAME)


def configmap(namespace: str, value: str, name: str = "greeting") -> str:
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace}}
    return yaml.safe_dump({**body, "data": {"value": value}})


def commit(flux: local_flux.Flux, repo: str, files: dict[str, str], tmp: Path, message: str) -> str:
    tree = tmp / f"tree-{message}"
    shutil.rmtree(tree, ignore_errors=True)
    for name, text in files.items():
        (tree / name).parent.mkdir(parents=True, exist_ok=True)
        (tree / name).write_text(text, encoding="utf-8")
    return flux.push(repo, tree, message=message)


def git_source(management: Client, namespace: str, name: str, url: str) -> None:
    doc = {
        "apiVersion": kinds.FLUX_SOURCE_API_VERSION,
        "kind": "GitRepository",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"url": url, "interval": "10m", "ref": {"branch": "main"}, "timeout": "20s"},
    }
    manifests.apply(management, manifests.documents(yaml.safe_dump(doc)))


def fetch_now(management: Client, namespace: str, name: str) -> None:
    """Flux's documented way to reconcile a source at once (what `flux reconcile source git` does)."""
    stamp = dt.datetime.now(dt.UTC).isoformat()
    patch = {"metadata": {"annotations": {"reconcile.fluxcd.io/requestedAt": stamp}}}
    management.patch(GIT_SOURCE, name, patch, namespace=namespace, patch_type=PatchType.MERGE)


def artifact_at(management: Client, namespace: str, name: str, sha: str) -> dict[str, Any]:
    def ready() -> dict[str, Any] | None:
        artifact = (management.get(GIT_SOURCE, name, namespace=namespace).status or {}).get("artifact") or {}
        return artifact if str(artifact.get("revision", "")).endswith(sha) else None

    return wait_for(ready, what=f"source-controller's artifact of {sha[:7]}", timeout=90)


def value_on(member: Client, namespace: str, name: str = "greeting") -> str | None:
    try:
        return (member.get(ConfigMap, name, namespace=namespace).data or {}).get("value")
    except ApiError as e:
        if e.status.code == 404:
            return None
        raise


def values(members: dict[str, Client], namespace: str, name: str = "greeting") -> dict[str, str | None]:
    return {m: value_on(c, namespace, name) for m, c in sorted(members.items())}


def promotion_doc(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "config.projectsveltos.io/v1beta1",
        "kind": "ClusterPromotion",
        "metadata": {"name": name},
        "spec": {
            "profileSpec": {"syncMode": "Continuous", **spec},
            "stages": [
                {"name": "dev", "clusterSelector": {"matchLabels": {"env": "dev"}}},
                {
                    # Sveltos' trigger says how a stage promotes to the next: production waits on it.
                    "name": "staging",
                    "clusterSelector": {"matchLabels": {"env": "staging"}},
                    "trigger": {"manual": {"approved": False, "automaticReset": True}},
                },
                {"name": "production", "clusterSelector": {"matchLabels": {"env": "prod"}}},
            ],
        },
    }


def explained(management: Client, name: str) -> Any:
    """What the promotion says of itself, for a wait that timed out."""

    def explain() -> str:
        seen = status(management, name)
        shown = {k: seen.get(k) for k in ("conditions", "stages", "revisions", "message")}
        return yaml.safe_dump(shown, sort_keys=False)

    return explain


def phase(management: Client, name: str) -> str:
    return str(status(management, name).get("rollout", {}).get("phase"))


def stage_sources(management: Client, name: str) -> dict[str, list[str]]:
    return {s["name"]: s.get("sources") or [] for s in status(management, name).get("stages") or []}


def approve_production(management: Client, name: str) -> None:
    """Grant staging's manual trigger (it resets itself once used): production may start."""
    wait_for(
        lambda: stage_phases(management, name).get("staging") == "WaitingAfter",
        what="staging waiting for its approval",
        explain=explained(management, name),
    )
    patch = [{"op": "replace", "path": "/spec/stages/1/trigger/manual/approved", "value": True}]
    management.patch(PROMOTION, name, patch, patch_type=PatchType.JSON)


def test_a_push_walks_the_stages_and_a_rollback_redeploys_the_pinned_commit(
    controller: ControllerThread,
    flux: local_flux.Flux,
    management: Client,
    members: dict[str, Client],
    namespace: str,
    tmp_path: Path,
    local_fleet: fleet.FleetState,
) -> None:
    repo, name = f"apps-{namespace}", f"git-{namespace}"
    url = flux.create_repo(repo)
    v1 = commit(
        flux, repo, {"apps/greeting.yaml": configmap(namespace, "v1"), "README.md": "x"}, tmp_path, "v1"
    )
    git_source(management, namespace, "apps", url)
    artifact_at(management, namespace, "apps", v1)
    path = {
        "policyRefs": [{"kind": "GitRepository", "namespace": namespace, "name": "apps", "path": "./apps"}]
    }
    manifests.apply(management, manifests.documents(yaml.safe_dump(promotion_doc(name, path))))
    with deleted_after(management, name):
        approve_production(management, name)
        wait_for(
            lambda: phase(management, name) == "Succeeded",
            what="v1 through every stage",
            explain=explained(management, name),
        )
        assert set(values(members, namespace).values()) == {"v1"}
        first = status(management, name)["revisions"][0]
        assert first["sources"] == [f"GitRepository/{namespace}/apps@main@sha1:{v1[:7]}"]

        v2 = commit(flux, repo, {"apps/greeting.yaml": configmap(namespace, "v2")}, tmp_path, "v2")
        fetch_now(management, namespace, "apps")
        wait_for(
            lambda: (
                values(members, namespace)["member-2"] == "v2"
                and stage_phases(management, name).get("production") == "Pending"
            ),
            what="dev and staging on v2, production waiting for its approval",
        )
        assert values(members, namespace) == {"member-1": "v2", "member-2": "v2", "member-3": "v1"}
        running = stage_sources(management, name)
        assert running["dev"] == [f"GitRepository/{namespace}/apps@main@sha1:{v2[:7]}"]
        assert running["production"] == [f"GitRepository/{namespace}/apps@main@sha1:{v1[:7]}"]
        shown = _cli(local_fleet, "status", "promotion", name)
        assert f"main@sha1:{v1[:7]}" in shown
        assert f"main@sha1:{v2[:7]}" in shown

        approve_production(management, name)
        wait_for(lambda: values(members, namespace)["member-3"] == "v2", what="production on v2")
        wait_for(lambda: phase(management, name) == "Succeeded", what="v2 succeeded")
        # Git has moved on (v2 is its head): the rollback redeploys v1's pinned content, not Git's.
        assert "rolling revision 2 back to revision 1" in _cli(local_fleet, "rollback", "promotion", name)
        wait_for(lambda: phase(management, name) == "RolledBack", what="rolled back to v1", timeout=180)
        assert set(values(members, namespace).values()) == {"v1"}
        told = json.loads(_cli(local_fleet, "history", "promotion", name, "-o", "json"))
        assert [(r["outcome"], r["sources"]) for r in told["revisions"]] == [
            ("Succeeded", [f"GitRepository/{namespace}/apps@main@sha1:{v1[:7]}"]),
            ("RolledBack", [f"GitRepository/{namespace}/apps@main@sha1:{v2[:7]}"]),
        ]


def test_a_kustomization_from_git_builds_a_templated_overlay_per_cluster(
    controller: ControllerThread,
    flux: local_flux.Flux,
    management: Client,
    members: dict[str, Client],
    namespace: str,
    tmp_path: Path,
) -> None:
    repo, name = f"kust-{namespace}", f"kust-{namespace}"
    url = flux.create_repo(repo)
    files = {
        "base/kustomization.yaml": "resources:\n- greeting.yaml\n",
        "base/greeting.yaml": configmap(namespace, "from-base"),
        "overlays/fleet/kustomization.yaml": (
            "resources:\n- ../../base\npatches:\n- patch: |-\n    apiVersion: v1\n    kind: ConfigMap\n"
            f"    metadata:\n      name: greeting\n      namespace: {namespace}\n"
            '    data:\n      value: "{{ .Region }}"\n'
        ),
    }
    sha = commit(flux, repo, files, tmp_path, "overlay")
    git_source(management, namespace, "kust", url)
    artifact_at(management, namespace, "kust", sha)
    spec = {
        "kustomizationRefs": [
            {
                "kind": "GitRepository",
                "namespace": namespace,
                "name": "kust",
                "path": "./overlays/fleet",
                "values": {"Region": '{{ index .Cluster.metadata.labels "env" }}-region'},
            }
        ]
    }
    manifests.apply(management, manifests.documents(yaml.safe_dump(promotion_doc(name, spec))))
    with deleted_after(management, name):
        approve_production(management, name)
        wait_for(
            lambda: phase(management, name) == "Succeeded",
            what="the overlay everywhere",
            explain=explained(management, name),
        )
        assert values(members, namespace) == {
            "member-1": "dev-region",
            "member-2": "staging-region",
            "member-3": "prod-region",
        }


def test_a_tampered_artifact_fails_the_cluster_and_applies_nothing(
    controller: ControllerThread,
    flux: local_flux.Flux,
    management: Client,
    members: dict[str, Client],
    namespace: str,
    tmp_path: Path,
) -> None:
    repo, name = f"tamper-{namespace}", f"tamper-{namespace}"
    url = flux.create_repo(repo)
    files = {
        "apps/a.yaml": configmap(namespace, "one", "first"),
        "apps/b.yaml": configmap(namespace, "two", "second"),
    }
    sha = commit(flux, repo, files, tmp_path, "tampered")
    git_source(management, namespace, "tamper", url)
    artifact = artifact_at(management, namespace, "tamper", sha)
    served = Path(flux.directory) / "storage" / urllib.parse.urlsplit(artifact["url"]).path.lstrip("/")
    served.write_bytes(served.read_bytes() + b"\0")  # the bytes served no longer match the digest
    path = {
        "policyRefs": [{"kind": "GitRepository", "namespace": namespace, "name": "tamper", "path": "apps"}]
    }
    manifests.apply(management, manifests.documents(yaml.safe_dump(promotion_doc(name, path))))
    with deleted_after(management, name):

        def dev_failed() -> str | None:
            stage = next((s for s in status(management, name).get("stages") or [] if s["name"] == "dev"), {})
            message = str(stage.get("failureMessage") or "")
            return message if "does not match its digest" in message else None

        message = wait_for(
            dev_failed, what="dev failed on the digest mismatch", explain=explained(management, name)
        )
        assert f"GitRepository/{namespace}/tamper at main@sha1:{sha[:7]}" in message
        assert values(members, namespace, "first") == dict.fromkeys(sorted(members), None)
        assert values(members, namespace, "second") == dict.fromkeys(sorted(members), None)


def _cli(state: fleet.FleetState, *args: str) -> str:
    result = CliRunner().invoke(cli_app, [*args, "--kubeconfig", state.cluster(fleet.MANAGEMENT).kubeconfig])
    assert result.exit_code == 0, result.output
    return result.output


def test_a_profile_delivers_an_oci_repository_artifact_from_a_real_registry(
    controller: ControllerThread,
    flux: local_flux.Flux,
    oci_registry: local_registry.Registry,
    management: Client,
    members: dict[str, Client],
    namespace: str,
    tmp_path: Path,
) -> None:
    """An OCIRepository (Flux's OCI artifact, pushed to distribution over the registry API) as a
    ClusterProfile's policyRef: every member gets what is under its path."""
    flux_support.write_tree(tmp_path / "oci", {"deploy/greeting.yaml": configmap(namespace, "from-oci")})
    digest = oci.push_oci_artifact(oci_registry.url, f"{namespace}/content", "v1", tmp_path / "oci")
    spec = {
        "url": f"oci://{oci_registry.host}/{namespace}/content",
        "ref": {"tag": "v1"},
        "insecure": True,  # the registry speaks plain HTTP on loopback
        "interval": "10m",
    }
    with flux_support.source_object(management, flux_support.OCI, "content", namespace, spec):
        flux_support.artifact(management, flux_support.OCI, "content", namespace, f"v1@{digest}")
        name = f"oci-{namespace}"
        profile = {
            "apiVersion": "config.projectsveltos.io/v1beta1",
            "kind": "ClusterProfile",
            "metadata": {"name": name},
            "spec": {
                "clusterSelector": {"matchExpressions": [{"key": "env", "operator": "Exists"}]},
                "policyRefs": [
                    {"kind": "OCIRepository", "namespace": namespace, "name": "content", "path": "deploy"}
                ],
            },
        }
        manifests.apply(management, manifests.documents(yaml.safe_dump(profile)))
        try:
            wait_for(
                lambda: set(values(members, namespace).values()) == {"from-oci"},
                what="every member holding the OCI artifact's ConfigMap",
            )
        finally:
            management.delete(kinds.resource("ClusterProfile"), name)
