"""Resolve and pin the content a profile delivers.

A profile references content (policyRefs to ConfigMaps/Secrets, helm values from valuesFrom). The
controller resolves every reference once, hashes the result, and stores it in an immutable,
content-addressed snapshot. ClusterSummaries point at that snapshot, never at the live ConfigMap, so
editing a referenced ConfigMap yields a *new* revision that walks through the stages again instead
of reaching every cluster at once.

What a profile may read is bounded (ADR 0046), and every refusal names the field, never a value:

- ConfigMaps and Secrets are sources, and Flux's GitRepository, OCIRepository and Bucket when the
  controller reads Flux sources (`--flux-sources`, ADR 0103): the artifact the source announces,
  verified and unpacked by `delivery.artifact_store`, pinned with its revision; remote URLs are
  refused by name;
- a namespaced profile reads only its own namespace; a cluster-scoped one any namespace except
  fleetwave's own (the controller's namespace holds member kubeconfigs and content snapshots);
- a Secret is content only when its type is `addons.projectsveltos.io/cluster-profile` (Sveltos'
  rule), and never when it is a member cluster's kubeconfig (labelled, or referenced by a
  MemberCluster), whatever its type;
- content that came from a Secret is pinned into a Secret, not a ConfigMap; YAML problems in Secret
  data are reported by line and column only.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from fleetwave.api.sveltos import (
    DriftExclusion,
    HelmChart,
    KustomizationRef,
    Patch,
    PolicyRef,
    ProfileSpec,
    TemplateResourceRef,
    ValueFrom,
)
from fleetwave.controllers.fleet import members
from fleetwave.controllers.fleet.boundary import Boundary
from fleetwave.controllers.sveltos import drift_exclusions, extra_metadata, registry_credentials
from fleetwave.delivery import artifact_store, gotemplate, helmoptions
from fleetwave.delivery import content as dc
from fleetwave.delivery.artifacts import FLUX_KINDS, Artifact, Broken, artifact_of, short_revision
from fleetwave.delivery.registry import RegistryError

SNAPSHOT_PREFIX = "fw-content-"
SECRET_SNAPSHOT_PREFIX = "fw-content-s-"  # hex hashes never start with "s-": the kinds cannot collide
SNAPSHOT_KEY = "content.json"
SNAPSHOT_LABEL = "fleetwave.io/content"
SNAPSHOT_SECRET_TYPE = "fleetwave.io/content-snapshot"
ANCHOR_ANNOTATION = "fleetwave.io/anchors"  # on the ConfigMap that owns a Secret snapshot
ADDON_SECRET_TYPE = "addons.projectsveltos.io/cluster-profile"  # libsveltos ClusterProfileSecretType
MEMBER_SECRET_LABEL = members.SECRET_LABEL  # set by `fleetwave cluster register`
SOURCE_KINDS = ("ConfigMap", "Secret")
TEMPLATE_ANNOTATION = "projectsveltos.io/template"  # Sveltos: this source's content is a Go template
KUSTOMIZE_ARCHIVE_KEY = "kustomize.tar.gz"  # Sveltos: the key holding a kustomizationRef's directory tree


class Lookup(Protocol):
    """Read a ConfigMap or Secret of the management cluster (from the informer cache)."""

    def get(self, kind: str, namespace: str, name: str) -> Mapping[str, Any] | None: ...


class ContentError(ValueError):
    """A reference cannot be resolved; the message names the field."""


class ContentPending(Exception):
    """A Flux artifact the content needs is not fetched yet (or its server is down just now): the
    revision cannot be made yet, and nothing is wrong with the spec."""


class Artifacts(Protocol):
    """The fetched Flux artifacts (`delivery.artifact_store.ArtifactStore`)."""

    def texts(self, artifact: Artifact, path: str) -> artifact_store.Texts | None: ...

    def archive(self, artifact: Artifact) -> bytes | None: ...

    def pending(self, artifact: Artifact) -> str: ...


@dataclass(frozen=True, slots=True)
class Resolved:
    hash: str
    body: dict[str, Any]  # {"policies": [...], "helmCharts": [...]}, JSON-serialisable
    from_secret: bool = False  # some of it was read from a Secret: pinned into a Secret

    @property
    def snapshot_name(self) -> str:
        return (SECRET_SNAPSHOT_PREFIX if self.from_secret else SNAPSHOT_PREFIX) + self.hash[:40]

    @property
    def snapshot_kind(self) -> str:
        return "Secret" if self.from_secret else "ConfigMap"

    @property
    def sources(self) -> list[str]:
        """The Flux sources this content came from, each at its revision, as people read them:
        `GitRepository/flux/apps@main@sha1:0123abc` (ADR 0103)."""
        return source_revisions(self.body)


def source_revisions(body: Mapping[str, Any]) -> list[str]:
    """`Resolved.sources` of a content body."""
    return sorted(
        {
            f"{p['source']}@{short_revision(str(p['revision']))}"
            for p in body.get("policies") or []
            if isinstance(p, Mapping) and p.get("revision")
        }
    )


# Fields fleetwave parses (so manifests round-trip) but does not honour yet: refusing them with a
# message beats silently deploying something other than what the user asked for (issue 10).
_UNSUPPORTED = ("reloader",)


def _refuse_unhonoured(spec: ProfileSpec, path: str) -> None:
    for name in _UNSUPPORTED:
        if getattr(spec, name, None):
            raise ContentError(f"{path}.{_alias(spec, name)}: not supported by fleetwave yet")
    for i, chart in enumerate(spec.helm_charts or []):
        _refuse_unhonoured_chart(chart, f"{path}.helmCharts[{i}]")
    for i, ref in enumerate(spec.policy_refs or []):
        _refuse_ref_options(ref, f"{path}.policyRefs[{i}]")
    for i, kref in enumerate(spec.kustomization_refs or []):
        where = f"{path}.kustomizationRefs[{i}]"
        if kref.remote_url is not None:
            raise ContentError(f"{where}.remoteURL: remote URLs are not supported by fleetwave yet")
        if kref.deployment_type == LOCAL:
            raise ContentError(
                f"{where}.deploymentType: Local kustomizations are not supported by fleetwave yet"
            )
        if kref.force is False or kref.skip_namespace_creation is False:
            raise ContentError(
                f"{where}: force/skipNamespaceCreation false are not supported by fleetwave yet"
            )
    for i, tref in enumerate(spec.template_resource_refs or []):
        # Revisions pin what they read: a change to any field makes a new revision, so there is no
        # narrower trigger to choose (ADR 0089).
        if tref.watch_fields or tref.ignore_status_changes:
            field = "watchFields" if tref.watch_fields else "ignoreStatusChanges"
            raise ContentError(f"{path}.templateResourceRefs[{i}].{field}: not supported by fleetwave yet")


LOCAL = "Local"
# fleetwave's own API groups: never Local content, and never selected from envelopes.


def _refuse_local(objects: list[dict[str, Any]], path: str, boundary: Boundary) -> None:
    """Local content runs with the controller's rights in the management cluster: nothing the
    controller itself runs on may be part of it (`local_boundary`)."""
    for obj in objects:
        why = boundary.local_problem(obj)
        if why is not None:
            name = (obj.get("metadata") or {}).get("name")
            raise ContentError(
                f"{path}.deploymentType: Local content may not hold {obj.get('kind')} {name}: {why}"
            )


def _refuse_ref_options(ref: PolicyRef, path: str) -> None:
    """`path` selects inside a Flux source (refused anyway); fleetwave applies with force and never
    creates a missing namespace, so only `force: true` / `skipNamespaceCreation: true` are what it
    does (ADR 0045)."""
    if ref.path and (ref.kind or "ConfigMap") in ("ConfigMap", "Secret"):  # Flux kinds: refused by kind
        raise ContentError(f"{path}.path: only meaningful for Flux sources, which fleetwave does not deliver")
    if ref.force is False:
        raise ContentError(
            f"{path}.force: false is not supported by fleetwave yet (it always takes over fields)"
        )
    if ref.skip_namespace_creation is False:
        raise ContentError(
            f"{path}.skipNamespaceCreation: false is not supported by fleetwave yet "
            "(it never creates namespaces)"
        )


def _refuse_unhonoured_chart(chart: HelmChart, path: str) -> None:
    for name in ("signature_verification", "provenance_verification"):
        if getattr(chart, name):
            raise ContentError(
                f"{path}.{HelmChart.model_fields[name].alias or name}: not supported by fleetwave yet"
            )
    try:
        helmoptions.check(chart.options, path)
    except helmoptions.OptionError as e:
        raise ContentError(str(e)) from None


def _extras(spec: ProfileSpec, path: str) -> tuple[dict[str, str], dict[str, str]]:
    """extraLabels / extraAnnotations (ClusterProfile only), checked (sveltos/extra_metadata.py)."""
    labels = dict(getattr(spec, "extra_labels", None) or {})
    annotations = dict(getattr(spec, "extra_annotations", None) or {})
    if (labels or annotations) and spec.helm_charts:
        field = "extraLabels" if labels else "extraAnnotations"
        raise ContentError(f"{path}.{field}: not supported together with helmCharts by fleetwave yet")
    try:
        extra_metadata.check(labels, annotations, path)
    except extra_metadata.ExtraMetadataError as e:
        raise ContentError(str(e)) from None
    return labels, annotations


def _exclusions(spec: ProfileSpec, path: str) -> list[DriftExclusion]:
    """driftExclusions, checked (controllers/sveltos/drift_exclusions.py)."""
    excluded = list(spec.drift_exclusions or [])
    try:
        drift_exclusions.check(excluded, path)
    except drift_exclusions.DriftExclusionError as e:
        raise ContentError(str(e)) from None
    return excluded


def _alias(spec: ProfileSpec, name: str) -> str:
    return type(spec).model_fields[name].alias or name


def resolve(
    spec: ProfileSpec,
    lookup: Lookup,
    *,
    default_namespace: str,
    path: str,
    boundary: Boundary | None = None,
    artifacts: Artifacts | None = None,
) -> Resolved:
    """The content `spec` names, pinned: ContentError for a spec that cannot run, ContentPending
    while a Flux artifact is being fetched. `artifacts` None: Flux sources are refused."""
    _refuse_unhonoured(spec, path)
    labels, annotations = _extras(spec, path)
    excluded = _exclusions(spec, path)
    reader = _Reader(lookup, boundary or Boundary(), default_namespace, artifacts)
    policies = _policies(spec, reader, path, (labels, annotations), excluded)
    for i, kref in enumerate(spec.kustomization_refs or []):
        kustomization = reader.kustomization(kref, f"{path}.kustomizationRefs[{i}]")
        if kustomization is not None:
            policies.append(kustomization)
    charts = [
        _chart(reader, chart, f"{path}.helmCharts[{i}]") for i, chart in enumerate(spec.helm_charts or [])
    ]
    body: dict[str, Any] = {"policies": policies, "helmCharts": charts}
    templating = reader.template_context(spec.template_resource_refs or [], f"{path}.templateResourceRefs")
    patches = reader.patches(spec, path)
    if patches:
        body["patches"] = patches
    if patches or any("objects" not in p for p in policies) or any("valueLayers" in c for c in charts):
        # Rendered per cluster (ADR 0089): what finishes an object travels with the templates.
        body.update(templating)
        body["finish"] = {
            "extraLabels": labels,
            "extraAnnotations": annotations,
            "driftExclusions": [
                e.model_dump(mode="json", by_alias=True, exclude_none=True) for e in excluded
            ],
        }
    digest = hashlib.sha256(dc.canonical_json(body).encode()).hexdigest()
    return Resolved(hash=digest, body=body, from_secret=reader.secret_read)


def _policies(
    spec: ProfileSpec,
    reader: _Reader,
    path: str,
    extras: tuple[dict[str, str], dict[str, str]],
    excluded: list[DriftExclusion],
) -> list[dict[str, Any]]:
    """The policyRefs' content: objects stamped and excluded now, templates kept for each cluster."""
    policies = []
    for i, ref in enumerate(spec.policy_refs or []):
        where = f"{path}.policyRefs[{i}]"
        if (ref.kind or "ConfigMap") in FLUX_KINDS:
            flux = reader.flux_policy(ref, where)
            if flux is not None:
                policies.append(_finish_flux(flux, ref, where, reader, (extras, excluded)))
            continue
        templates = reader.policy_templates(ref, where)
        if templates is not None:  # Go templates, rendered per cluster when delivered (ADR 0089)
            if ref.deployment_type == LOCAL:
                raise ContentError(f"{where}: Local content cannot be a template in fleetwave yet")
            policies.append({"source": reader.source(ref), "tier": ref.tier, "templates": templates})
            continue
        objects = reader.policy(ref, where)
        if objects is not None:
            objects = drift_exclusions.apply(extra_metadata.stamp(objects, *extras), excluded)
            policy: dict[str, Any] = {"source": reader.source(ref), "tier": ref.tier, "objects": objects}
            if ref.deployment_type == LOCAL:
                _refuse_local(objects, where, reader.boundary)
                policy["deploymentType"] = LOCAL  # for the management cluster (ADR 0064)
            policies.append(policy)
    return policies


def _finish_flux(
    policy: dict[str, Any],
    ref: PolicyRef,
    where: str,
    reader: _Reader,
    finish: tuple[tuple[dict[str, str], dict[str, str]], list[DriftExclusion]],
) -> dict[str, Any]:
    """A Flux source's policy: its objects stamped and excluded as any policy's, or kept as template
    text or as the reason it cannot be delivered (which fails each cluster it reaches)."""
    if "objects" not in policy:
        if "templates" in policy and ref.deployment_type == LOCAL:
            raise ContentError(f"{where}: Local content cannot be a template in fleetwave yet")
        return policy
    extras, excluded = finish
    policy["objects"] = drift_exclusions.apply(extra_metadata.stamp(policy["objects"], *extras), excluded)
    if ref.deployment_type == LOCAL:
        _refuse_local(policy["objects"], where, reader.boundary)
        policy["deploymentType"] = LOCAL
    return policy


def _chart(reader: _Reader, chart: HelmChart, where: str) -> dict[str, Any]:
    """A helm chart with its values: merged now, or as layers merged per cluster once rendered. Its
    registry's Secrets are pinned by reference and read at each delivery (ADR 0105)."""
    try:
        registry_credentials.check(chart, reader.boundary, where)
    except RegistryError as e:
        raise ContentError(str(e)) from None
    entry: dict[str, Any] = {"chart": chart.model_dump(mode="json", by_alias=True, exclude_none=True)}
    layers = reader.value_layers(chart, where)
    if any("template" in layer for layer in layers):
        entry["valueLayers"] = layers  # merged per cluster once rendered (ADR 0089)
    else:
        entry["values"] = _merged(layer["values"] for layer in layers)
    return entry


def read_source(
    lookup: Lookup, boundary: Boundary, kind: str, namespace: str, name: str, *, optional: bool, path: str
) -> Mapping[str, Any] | None:
    """One ConfigMap/Secret read within `boundary` (templateResourceRefs resolved per cluster)."""
    reader = _Reader(lookup, boundary, namespace, None)
    reader.kind_allowed(kind, path)
    if not namespace or not name:
        raise ContentError(
            f"{path}: {kind} {namespace or '-'}/{name or '-'}: namespace and name are required"
        )
    reader.where(kind, namespace, name, path)
    return reader.read(kind, namespace, name, optional, path)


# Content texts at least this large are parsed off the event loop, ahead of the resolve that reads
# them (`large_policy_texts`, `delivery.content.parse_ahead`); smaller ones cost less than a
# thread hand-off.
PARSE_AHEAD_BYTES = 64 * 1024


def large_texts(
    spec: ProfileSpec, lookup: Lookup, *, default_namespace: str, path: str, boundary: Boundary | None = None
) -> list[dc.Ahead]:
    """Each large text `resolve` would parse — policyRef values, Helm values inline and from
    valuesFrom — read within the same boundary and named as `resolve` names them, to be parsed
    ahead (`delivery.content.parse_ahead`); refs `resolve` would refuse are skipped (it says why)."""
    reader = _Reader(lookup, boundary or Boundary(), default_namespace, None)
    out: list[dc.Ahead] = []
    for i, ref in enumerate(spec.policy_refs or []):
        where = f"{path}.policyRefs[{i}]"
        with contextlib.suppress(ContentError):
            obj = reader.read(*reader.check(ref, where), True, where)
            if obj is not None and not is_template_source(obj):
                out += _large_values(obj, ref.kind == "Secret", where, "documents")
    for i, chart in enumerate(spec.helm_charts or []):
        where = f"{path}.helmCharts[{i}]"
        if (
            chart.values
            and len(chart.values) >= PARSE_AHEAD_BYTES
            and not gotemplate.is_template(chart.values)
        ):
            out.append((chart.values, f"{where}.values", False, "values"))
        for j, source in enumerate(chart.values_from or []):
            with contextlib.suppress(ContentError):
                found = reader.value_source(source, f"{where}.valuesFrom[{j}]")
                if found is not None and not is_template_source(found):
                    out += _large_values(found, source.kind == "Secret", f"{where}.valuesFrom[{j}]", "values")
    return out


def _large_values(obj: Mapping[str, Any], secret: bool, where: str, what: str) -> list[dc.Ahead]:
    out: list[dc.Ahead] = []
    for key, value in _data(obj).items():
        text = dc.decoded_or_none(value, secret, at_least=PARSE_AHEAD_BYTES)
        if text is not None and len(text) >= PARSE_AHEAD_BYTES:
            out.append((text, f"{where}[{key}]", secret, what))
    return out


def check_refs(
    refs: Iterable[PolicyRef],
    *,
    default_namespace: str,
    path: str,
    boundary: Boundary | None = None,
    flux: bool = False,
) -> None:
    """What can be refused without reading anything (kind, namespace): for references that another
    object will resolve later (a promotion's preHealthCheckDeployment), so the promotion says it."""
    reader = _Reader(None, boundary or Boundary(), default_namespace, None, flux=flux)
    for i, ref in enumerate(refs):
        reader.check(ref, f"{path}[{i}]")


class _Reader:
    """Reads references within a boundary; remembers whether any Secret was read."""

    def __init__(
        self,
        lookup: Lookup | None,
        boundary: Boundary,
        default_namespace: str,
        artifacts: Artifacts | None,
        *,
        flux: bool = False,
    ) -> None:
        self.lookup = lookup
        self.boundary = boundary
        self.artifacts = artifacts
        self.flux = flux or artifacts is not None
        # A namespaced profile's empty namespace is its own (Sveltos: "the Profile namespace will be used").
        self.default_namespace = boundary.own_namespace or default_namespace
        self.secret_read = False

    def source(self, ref: PolicyRef) -> str:
        return f"{ref.kind or 'ConfigMap'}/{ref.namespace or self.default_namespace}/{ref.name}"

    def check(self, ref: PolicyRef, path: str) -> tuple[str, str, str]:
        if ref.remote_url is not None:
            raise ContentError(f"{path}.remoteURL: remote URLs are not supported by fleetwave yet")
        kind = ref.kind or "ConfigMap"
        self._content_kind(kind, path)
        if ref.name is None:
            raise ContentError(f"{path}.name: required")
        namespace = ref.namespace or self.default_namespace
        self._where(kind, namespace, ref.name, defaulted=ref.namespace is None, path=path)
        return kind, namespace, ref.name

    def _content_kind(self, kind: str, path: str) -> None:
        """policyRefs and kustomizationRefs may also name Flux sources, when they are read."""
        if kind in FLUX_KINDS and self.flux:
            return
        if kind in FLUX_KINDS:
            raise ContentError(
                f"{path}.kind: {kind} is a Flux source, read only when the controller runs with "
                "--flux-sources (chart: controller.fluxSources=true)"
            )
        self._kind(kind, path)

    def flux_policy(self, ref: PolicyRef, path: str) -> dict[str, Any] | None:
        """A policyRef to a Flux source: the manifests under `path` of the artifact it announces, as
        objects, as templates (the source is annotated `projectsveltos.io/template`), or as the
        reason this revision cannot be delivered."""
        kind, namespace, name = self.check(ref, path)
        obj = self._read(kind, namespace, name, ref.optional, path)
        if obj is None:
            return None
        policy: dict[str, Any] = {"source": f"{kind}/{namespace}/{name}", "tier": ref.tier}
        try:
            artifact = artifact_of(kind, obj)
            policy["revision"] = artifact.revision
            texts = self._artifact_texts(artifact, ref.path)
            policy.update(_flux_content(texts, is_template_source(obj), artifact, path))
        except Broken as e:
            policy["error"] = f"{path}: {e}"
        return policy

    def _artifact_texts(self, artifact: Artifact, path: str | None) -> artifact_store.Texts:
        assert self.artifacts is not None
        texts = self.artifacts.texts(artifact, artifact_store.normal_path(path))
        if texts is None:
            raise ContentPending(self.artifacts.pending(artifact))
        return texts

    def _artifact_archive(self, artifact: Artifact) -> bytes:
        assert self.artifacts is not None
        archive = self.artifacts.archive(artifact)
        if archive is None:
            raise ContentPending(self.artifacts.pending(artifact))
        return archive

    def policy(self, ref: PolicyRef, path: str) -> list[dict[str, Any]] | None:
        kind, namespace, name = self.check(ref, path)
        obj = self._read(kind, namespace, name, ref.optional, path)
        if obj is None:
            return None
        try:
            return dc.parse_policy_data(_data(obj), base64_encoded=kind == "Secret", source=path)
        except dc.ContentError as e:
            raise ContentError(str(e)) from None

    def policy_templates(self, ref: PolicyRef, path: str) -> list[dict[str, str]] | None:
        """The raw texts of a source annotated `projectsveltos.io/template`, by key; None otherwise."""
        kind, namespace, name = self.check(ref, path)
        obj = self._read(kind, namespace, name, ref.optional, path)
        if obj is None or not is_template_source(obj):
            return None
        return self._texts(obj, kind, path)

    def _texts(self, obj: Mapping[str, Any], kind: str, path: str) -> list[dict[str, str]]:
        data = _data(obj)
        meta = obj.get("metadata") or {}
        where = f"({kind} {meta.get('namespace')}/{meta.get('name')})"
        try:
            return [
                {
                    "key": key,
                    "name": f"{path}[{key}] {where}",
                    "where": f"{path}[{key}]",
                    "text": dc.decode(data[key], f"{path}[{key}]", kind == "Secret"),
                }
                for key in sorted(data)
            ]
        except dc.ContentError as e:
            raise ContentError(str(e)) from None

    def kustomization(self, ref: KustomizationRef, path: str) -> dict[str, Any] | None:
        """A kustomizationRef pinned as its archive, built per cluster when delivered (ADR 0089)."""
        kind = ref.kind or "ConfigMap"
        self._content_kind(kind, path)
        if ref.name is None:
            raise ContentError(f"{path}.name: required")
        namespace = ref.namespace or self.default_namespace
        self._where(kind, namespace, ref.name, defaulted=ref.namespace is None, path=path)
        obj = self._read(kind, namespace, ref.name, ref.optional, path)
        if obj is None:
            return None
        pinned: dict[str, Any] = {"source": f"{kind}/{namespace}/{ref.name}", "tier": ref.tier}
        if kind in FLUX_KINDS:
            try:
                pinned["revision"], archive = self._flux_archive(kind, obj)
            except Broken as e:
                return {**pinned, "error": f"{path}: {e}"}
        else:
            archive = self._archive_of(obj, kind, namespace, ref.name, path)
        values: dict[str, str] = dict(ref.values or {})
        for j, source in enumerate(ref.values_from or []):
            where = f"{path}.valuesFrom[{j}]"
            found = self.value_source(source, where)
            for item in self._texts(found, source.kind, where) if found is not None else []:
                values[item["key"]] = item["text"]
        return {
            **pinned,
            "kustomize": {
                "archive": archive,
                "path": ref.path or ".",
                "components": list(ref.components or []),
                "targetNamespace": ref.target_namespace or "",
            },
            "values": values,
        }

    @staticmethod
    def _archive_of(obj: Mapping[str, Any], kind: str, namespace: str, name: str, path: str) -> str:
        holder = "data" if kind == "Secret" else "binaryData"
        archive = (obj.get(holder) or {}).get(KUSTOMIZE_ARCHIVE_KEY)
        if not isinstance(archive, str):
            raise ContentError(f"{path}: {kind} {namespace}/{name} has no {holder}[{KUSTOMIZE_ARCHIVE_KEY}]")
        return archive

    def _flux_archive(self, kind: str, obj: Mapping[str, Any]) -> tuple[str, str]:
        """A Flux source's revision and its whole artifact (an overlay may reach `../base`), base64 as
        a ConfigMap's archive; Broken when it is larger than any archive a snapshot may pin."""
        artifact = artifact_of(kind, obj)
        archive = self._artifact_archive(artifact)
        if len(archive) > dc.MAX_ARCHIVE_BYTES:
            raise Broken(
                f"{artifact.source} at {artifact.short_revision}: the artifact is larger than "
                f"{dc.MAX_ARCHIVE_BYTES} bytes, the most a kustomizationRef may pin"
            )
        return artifact.revision, base64.b64encode(archive).decode()

    def value_layers(self, chart: HelmChart, path: str) -> list[dict[str, Any]]:
        """Helm values in merge order (inline, then each valuesFrom): parsed maps, or raw template
        text where Sveltos renders it (inline values with an action; sources marked as templates)."""
        layers: list[dict[str, Any]] = []
        if chart.values:
            layers.append(self._layer(chart.values, f"{path}.values", redact=False))
        for j, source in enumerate(chart.values_from or []):
            where = f"{path}.valuesFrom[{j}]"
            found = self.value_source(source, where)
            if found is None:
                continue
            secret = source.kind == "Secret"
            for item in self._texts(found, source.kind, where):
                if is_template_source(found):
                    layers.append({"template": item["text"], "name": item["name"], "secret": secret})
                else:
                    layers.append({"values": _yaml_map(item["text"], item["where"], redact=secret)})
        return layers

    @staticmethod
    def _layer(text: str, path: str, *, redact: bool) -> dict[str, Any]:
        if gotemplate.is_template(text):
            return {"template": text, "name": path, "secret": redact}
        return {"values": _yaml_map(text, path, redact=redact)}

    def value_source(self, source: ValueFrom, path: str) -> Mapping[str, Any] | None:
        self._kind(source.kind, path)
        namespace = source.namespace or self.default_namespace
        self._where(source.kind, namespace, source.name, defaulted=source.namespace is None, path=path)
        return self._read(source.kind, namespace, source.name, source.optional, path)

    def template_context(self, refs: list[TemplateResourceRef], path: str) -> dict[str, Any]:
        """templateResourceRefs: those naming one object are read now and pinned with the revision;
        those whose name is a template or whose namespace is the cluster's are read per cluster."""
        pinned: dict[str, Any] = {}
        deferred: list[dict[str, Any]] = []
        for i, ref in enumerate(refs):
            where = f"{path}[{i}]"
            res = ref.resource
            kind, name = res.kind or "", res.name or ""
            self._kind(kind, f"{where}.resource")
            if not name:
                raise ContentError(f"{where}.resource.name: required")
            if ref.identifier in pinned or any(d["identifier"] == ref.identifier for d in deferred):
                raise ContentError(f"{where}.identifier: {ref.identifier} is used twice")
            if not res.namespace or gotemplate.is_template(name) or gotemplate.is_template(res.namespace):
                deferred.append(
                    {
                        "identifier": ref.identifier,
                        "kind": kind,
                        "namespace": res.namespace or "",
                        "name": name,
                        "optional": ref.optional,
                        "path": where,
                    }
                )
                continue
            self._where(kind, res.namespace, name, defaulted=False, path=where)
            obj = self._read(kind, res.namespace, name, ref.optional, where)
            if obj is not None:
                pinned[ref.identifier] = clean_resource(obj)
        return {"mgmtResources": pinned, "templateResourceRefs": deferred}

    def patches(self, spec: ProfileSpec, path: str) -> list[dict[str, Any]]:
        """patches then patchesFrom, in order; template text stays raw until it is rendered per cluster."""
        out: list[dict[str, Any]] = []
        for i, patch in enumerate(spec.patches or []):
            entry = patch.model_dump(mode="json", by_alias=True, exclude_none=True)
            if gotemplate.is_template(patch.patch):
                entry["name"] = f"{path}.patches[{i}]"
            out.append(entry)
        for j, source in enumerate(spec.patches_from or []):
            where = f"{path}.patchesFrom[{j}]"
            found = self.value_source(source, where)
            for item in self._texts(found, source.kind, where) if found is not None else []:
                if gotemplate.is_template(item["text"]):
                    out.append(
                        {"template": item["text"], "name": item["name"], "secret": source.kind == "Secret"}
                    )
                else:
                    out.append(parse_patch(item["text"], item["where"], redact=source.kind == "Secret"))
        return out

    def kind_allowed(self, kind: str, path: str) -> None:
        self._kind(kind, path)

    def where(self, kind: str, namespace: str, name: str, path: str) -> None:
        self._where(kind, namespace, name, defaulted=False, path=path)

    def read(
        self, kind: str, namespace: str, name: str, optional: bool, path: str
    ) -> Mapping[str, Any] | None:
        return self._read(kind, namespace, name, optional, path)

    @staticmethod
    def _kind(kind: str, path: str) -> None:
        if kind not in SOURCE_KINDS:
            raise ContentError(
                f"{path}.kind: {kind} is not supported: fleetwave reads content from ConfigMaps and Secrets"
            )

    def _where(self, kind: str, namespace: str, name: str, *, defaulted: bool, path: str) -> None:
        problem = self.boundary.namespace_problem(namespace)
        if problem and defaulted:
            raise ContentError(
                f"{path}.namespace: required (empty means fleetwave's own namespace, "
                "which is never a content source)"
            )
        if problem:
            raise ContentError(f"{path}: {kind} {namespace}/{name}: {problem}")
        if kind == "Secret" and (namespace, name) in self.boundary.kubeconfig_secrets:
            raise ContentError(
                f"{path}: Secret {namespace}/{name} is a member cluster's kubeconfig, never content"
            )

    def _read(
        self, kind: str, namespace: str, name: str, optional: bool, path: str
    ) -> Mapping[str, Any] | None:
        assert self.lookup is not None
        obj = self.lookup.get(kind, namespace, name)
        if obj is None:
            if optional:
                return None
            raise ContentError(f"{path}: {kind} {namespace}/{name} not found")
        labels = (obj.get("metadata") or {}).get("labels") or {}
        if labels.get(SNAPSHOT_LABEL) == "snapshot":
            raise ContentError(
                f"{path}: {kind} {namespace}/{name} is a fleetwave content snapshot, not a source"
            )
        if kind == "Secret":
            if MEMBER_SECRET_LABEL in labels:
                raise ContentError(
                    f"{path}: Secret {namespace}/{name} is a member cluster's kubeconfig, never content"
                )
            secret_type = str(obj.get("type") or "Opaque")
            if secret_type != ADDON_SECRET_TYPE:
                raise ContentError(
                    f"{path}: Secret {namespace}/{name} has type {secret_type[:100]}; only Secrets of type "
                    f"{ADDON_SECRET_TYPE} are content"
                )
            self.secret_read = True
        return obj


def _flux_content(
    texts: artifact_store.Texts, template: bool, artifact: Artifact, path: str
) -> dict[str, Any]:
    """The files of a Flux path as a policy's templates or objects; Broken when they do not parse."""
    at = f"({artifact.source} at {artifact.short_revision})"
    if template:
        return {
            "templates": [
                {"key": name, "name": f"{path}[{name}] {at}", "where": f"{path}[{name}]", "text": text}
                for name, text in texts
            ]
        }
    try:
        return {"objects": dc.parse_policy_data(dict(texts), base64_encoded=False, source=f"{path} {at}")}
    except dc.ContentError as e:
        raise Broken(str(e).removeprefix(f"{path}: ")) from None


def is_template_source(obj: Mapping[str, Any]) -> bool:
    return TEMPLATE_ANNOTATION in ((obj.get("metadata") or {}).get("annotations") or {})


def clean_resource(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A management-cluster object as a template sees it: without what only the API server writes."""
    out = dict(obj)
    meta = dict(out.get("metadata") or {})
    for key in ("managedFields", "resourceVersion", "uid", "generation", "creationTimestamp"):
        meta.pop(key, None)
    out["metadata"] = meta
    return out


def parse_patch(text: str, path: str, *, redact: bool) -> dict[str, Any]:
    """One patchesFrom entry: YAML of a Sveltos Patch ({patch, target})."""
    raw = _yaml_map(text, path, redact=redact)
    try:
        patch = Patch.model_validate(raw)
    except ValueError:
        raise ContentError(f"{path}: not a patch (a map with patch and an optional target)") from None
    return patch.model_dump(mode="json", by_alias=True, exclude_none=True)


def _merged(layers: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for layer in layers:
        merged = _deep_merge(merged, layer)
    return merged


def _data(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    data = obj.get("data") or {}
    return data if isinstance(data, Mapping) else {}


def _yaml_map(text: str, path: str, *, redact: bool) -> dict[str, Any]:
    try:
        return dc.load_yaml_map(text, path, redact=redact)
    except dc.ContentError as e:
        raise ContentError(str(e)) from None


def deep_merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """Helm's merge of values layers: maps merge key by key, anything else is replaced."""
    return _deep_merge(base, over)


def _deep_merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = value
    return out


# ---- snapshots ----


def is_snapshot_name(name: str) -> bool:
    return name.startswith(SNAPSHOT_PREFIX)


def snapshot_kind(name: str) -> str:
    """The kind a snapshot of this name is kept as (content read from a Secret stays in a Secret)."""
    return "Secret" if name.startswith(SECRET_SNAPSHOT_PREFIX) else "ConfigMap"


def _snapshot_metadata(resolved: Resolved, namespace: str) -> dict[str, Any]:
    return {
        "name": resolved.snapshot_name,
        "namespace": namespace,
        "labels": {"app.kubernetes.io/managed-by": "fleetwave", SNAPSHOT_LABEL: "snapshot"},
    }


def _payload(resolved: Resolved) -> str:
    return json.dumps(resolved.body, sort_keys=True, separators=(",", ":"))


def snapshot_configmap(resolved: Resolved, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _snapshot_metadata(resolved, namespace),
        "immutable": True,
        "data": {SNAPSHOT_KEY: _payload(resolved)},
    }


def snapshot_anchor(resolved: Resolved, namespace: str) -> dict[str, Any]:
    """An empty ConfigMap of the Secret snapshot's name that owns it (ADR 0084): the controller may
    delete ConfigMaps of its namespace but no Secret, so collecting a Secret snapshot is deleting its
    anchor and leaving the Secret to Kubernetes' garbage collector."""
    metadata = _snapshot_metadata(resolved, namespace)
    metadata["annotations"] = {ANCHOR_ANNOTATION: "Secret"}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "immutable": True, "data": {}}


def snapshot_object(resolved: Resolved, namespace: str, *, anchor_uid: str | None = None) -> dict[str, Any]:
    """The immutable snapshot of `resolved`: a Secret when any of it came from a Secret (owned by its
    anchor ConfigMap, whose uid is `anchor_uid`)."""
    if not resolved.from_secret:
        return snapshot_configmap(resolved, namespace)
    metadata = _snapshot_metadata(resolved, namespace)
    if anchor_uid:
        owner = {"apiVersion": "v1", "kind": "ConfigMap", "name": resolved.snapshot_name, "uid": anchor_uid}
        metadata["ownerReferences"] = [owner]
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": metadata,
        "type": SNAPSHOT_SECRET_TYPE,
        "immutable": True,
        "data": {SNAPSHOT_KEY: base64.b64encode(_payload(resolved).encode()).decode()},
    }


def load_snapshot(obj: Mapping[str, Any], kind: str = "ConfigMap") -> dict[str, Any]:
    name = (obj.get("metadata") or {}).get("name")
    raw = _data(obj).get(SNAPSHOT_KEY)
    if raw is None:
        raise ContentError(f"content snapshot {name} has no {SNAPSHOT_KEY}")
    try:
        text = base64.b64decode(raw, validate=True).decode() if kind == "Secret" else raw
        body: dict[str, Any] = json.loads(text)
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise ContentError(f"content snapshot {name}: {SNAPSHOT_KEY} is damaged") from None
    return body


def read_snapshot(lookup: Lookup, namespace: str, name: str) -> dict[str, Any] | None:
    """The body of the snapshot `name` in `namespace` (None when it is not there, yet)."""
    if not is_snapshot_name(name):
        raise ContentError(f"{name} is not a fleetwave content snapshot")
    kind = snapshot_kind(name)
    obj = lookup.get(kind, namespace, name)
    return None if obj is None else load_snapshot(obj, kind)
