"""A profile's content from Flux sources (ADR 0103): pinned with the artifact's revision, a new
artifact is a new revision, what cannot be delivered fails each cluster, Flux kinds only when read."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

import pytest

from fleetwave.api.sveltos import ProfileSpec
from fleetwave.controllers.fleet.boundary import Boundary
from fleetwave.controllers.sveltos import content, templated_content
from fleetwave.delivery.artifact_store import Texts
from fleetwave.delivery.artifacts import Artifact, Broken

REVISION = "main@sha1:" + "1f" * 20


class Objects:
    def __init__(self, objects: dict[tuple[str, str, str], dict[str, Any]]) -> None:
        self.objects = objects

    def get(self, kind: str, namespace: str, name: str) -> Mapping[str, Any] | None:
        return self.objects.get((kind, namespace, name))


class Fetched:
    """What the artifact store holds, by digest: texts per path, the archive, or why not."""

    def __init__(self, texts: dict[str, Texts] | None = None, broken: str = "", archive: bytes = b"") -> None:
        self.by_path, self.broken, self.bytes = texts, broken, archive

    def texts(self, artifact: Artifact, path: str) -> Texts | None:
        if self.broken:
            raise Broken(self.broken)
        return None if self.by_path is None else self.by_path.get(path)

    def archive(self, artifact: Artifact) -> bytes | None:
        return self.bytes or None

    def pending(self, artifact: Artifact) -> str:
        return f"{artifact.source}: fetching {artifact.short_revision}"


def git(digest: str = "sha256:" + "aa" * 32, revision: str = REVISION, **annotations: str) -> dict[str, Any]:
    return {
        "metadata": {"namespace": "flux", "name": "apps", "annotations": annotations},
        "status": {"artifact": {"url": "http://sc/a.tar.gz", "revision": revision, "digest": digest}},
    }


CONFIG = (
    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: greeting\n  namespace: default\ndata:\n  m: {v}\n"
)


def spec(**ref: Any) -> ProfileSpec:
    return ProfileSpec.model_validate(
        {
            "policyRefs": [
                {"kind": "GitRepository", "namespace": "flux", "name": "apps", "path": "./apps", **ref}
            ]
        }
    )


def resolve(
    source: dict[str, Any], fetched: Fetched | None, profile: ProfileSpec | None = None
) -> content.Resolved:
    return content.resolve(
        profile or spec(),
        Objects({("GitRepository", "flux", "apps"): source}),
        default_namespace="fw",
        path="spec",
        boundary=Boundary(controller_namespace="fw"),
        artifacts=fetched,
    )


def test_the_manifests_under_the_path_are_pinned_with_the_revision() -> None:
    resolved = resolve(git(), Fetched({"apps": (("a.yaml", CONFIG.format(v="one")),)}))
    policy = resolved.body["policies"][0]
    assert policy["source"] == "GitRepository/flux/apps"
    assert policy["revision"] == REVISION
    assert policy["objects"][0]["data"] == {"m": "one"}


def test_a_new_commit_is_a_new_revision_and_the_same_content_the_same() -> None:
    one = resolve(git(), Fetched({"apps": (("a.yaml", CONFIG.format(v="one")),)}))
    two = resolve(
        git("sha256:" + "bb" * 32, "main@sha1:" + "2e" * 20),
        Fetched({"apps": (("a.yaml", CONFIG.format(v="two")),)}),
    )
    again = resolve(git(), Fetched({"apps": (("a.yaml", CONFIG.format(v="one")),)}))
    assert one.hash != two.hash
    assert one.hash == again.hash


def test_a_source_annotated_as_a_template_is_rendered_per_cluster() -> None:
    text = CONFIG.format(v="{{ .Cluster.metadata.name }}")
    resolved = resolve(git(**{content.TEMPLATE_ANNOTATION: "ok"}), Fetched({"apps": (("a.yaml", text),)}))
    policy = resolved.body["policies"][0]
    assert "objects" not in policy
    assert policy["templates"][0]["text"] == text
    assert "GitRepository/flux/apps at main@sha1:1f1f1f1" in policy["templates"][0]["name"]


def test_a_revision_that_cannot_be_delivered_fails_each_cluster_it_reaches() -> None:
    why = "GitRepository/flux/apps at main@sha1:1f1f1f1: the artifact does not match its digest"
    resolved = resolve(git(), Fetched(broken=why))
    policy = resolved.body["policies"][0]
    assert policy["error"] == f"spec.policyRefs[0]: {why}"
    assert templated_content.needs_instantiation(resolved.body)


async def test_instantiating_a_broken_revision_applies_nothing_and_says_why() -> None:
    resolved = resolve(git(), Fetched(broken="GitRepository/flux/apps at main@sha1:1f1f1f1: too large"))
    with pytest.raises(templated_content.InstantiationError, match="too large"):
        await templated_content.instantiate(
            resolved.body,
            cluster={"metadata": {"name": "dev-1"}},
            lookup=Objects({}),
            boundary=Boundary(),
            tools=templated_content.Tools(),
        )


def test_manifests_that_do_not_parse_fail_the_clusters_naming_file_and_revision() -> None:
    resolved = resolve(git(), Fetched({"apps": (("bad.yaml", "a: [\n"),)}))
    error = resolved.body["policies"][0]["error"]
    assert "bad.yaml" in error
    assert "main@sha1:1f1f1f1" in error


def test_a_source_without_an_artifact_fails_the_clusters_naming_why() -> None:
    source = {"metadata": {"namespace": "flux", "name": "apps"}, "status": {}}
    resolved = resolve(source, Fetched({}))
    assert "GitRepository/flux/apps has no artifact yet" in resolved.body["policies"][0]["error"]


def test_an_artifact_not_fetched_yet_makes_no_revision() -> None:
    with pytest.raises(content.ContentPending, match="fetching main@sha1:1f1f1f1"):
        resolve(git(), Fetched(None))


def test_flux_sources_are_refused_unless_the_controller_reads_them() -> None:
    with pytest.raises(content.ContentError, match=r"policyRefs\[0\]\.kind: GitRepository .*--flux-sources"):
        resolve(git(), None)


def test_a_missing_source_names_the_field_and_an_optional_one_is_skipped() -> None:
    fetched = Fetched({})
    with pytest.raises(content.ContentError, match=r"policyRefs\[0\]: GitRepository flux/other not found"):
        resolve(git(), fetched, spec(name="other"))
    assert resolve(git(), fetched, spec(name="other", optional=True)).body["policies"] == []


def test_the_content_boundary_holds_for_flux_sources() -> None:
    with pytest.raises(content.ContentError, match="fw/apps"):
        content.resolve(
            ProfileSpec.model_validate(
                {"policyRefs": [{"kind": "GitRepository", "namespace": "fw", "name": "apps"}]}
            ),
            Objects({}),
            default_namespace="fw",
            path="spec",
            boundary=Boundary(controller_namespace="fw"),
            artifacts=Fetched({}),
        )


def test_a_kustomization_ref_pins_the_whole_artifact_and_its_revision() -> None:
    archive = b"\x1f\x8b fake tar.gz"
    profile = ProfileSpec.model_validate(
        {
            "kustomizationRefs": [
                {"kind": "GitRepository", "namespace": "flux", "name": "apps", "path": "overlays/dev"}
            ]
        }
    )
    policy = resolve(git(), Fetched(archive=archive), profile).body["policies"][0]
    assert policy["revision"] == REVISION
    assert base64.b64decode(policy["kustomize"]["archive"]) == archive
    assert policy["kustomize"]["path"] == "overlays/dev"
