"""KubeFleet's per-cluster overrides: ClusterResourceOverride, ResourceOverride and their snapshots.

Field names, defaults and limits follow placement.kubernetes-fleet.io v1beta1. What upstream's
admission webhook refuses is refused here by CEL rules (and the same checks in Python): paths into
kind, apiVersion, status or metadata other than labels and annotations; patches on a Delete rule;
property selectors in an override's cluster selector. A value on remove is refused by Python only
(CEL cannot see an untyped field): the override controller says so in a Warning event. That two
overrides of one kind select the same object cannot be checked on one object: the cluster it would
reach reports it (Overridden=False), see docs/adr/0088-per-cluster-overrides.md.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, WithJsonSchema, model_validator

from fleetwave.api.kubefleet import ClusterSelector
from fleetwave.api.meta import Model, Resource, cel, validations

MAX_SELECTORS = 20  # upstream's limits: selectors, rules, patches per rule
MAX_RULES = 20
MAX_PATCHES = 20
MAX_PATH = 1024

# Any JSON value (upstream's apiextensionsv1.JSON): not forced to be an object.
JSONValue = Annotated[Any, WithJsonSchema({"x-kubernetes-preserve-unknown-fields": True, "x-any-json": True})]

_FORBIDDEN_PATH = re.compile(r"^/(kind|apiVersion|status)(/.*)?$")
_METADATA = re.compile(r"^/metadata(/.*)?$")
_METADATA_ALLOWED = re.compile(r"^/metadata/(labels|annotations)(/.*)?$")
_EMPTY_SEGMENT = re.compile(r"/\s*(/|$)")


def path_problem(path: str) -> str:
    """Why upstream's webhook refuses a patch path ("" when it does not)."""
    if not path.startswith("/"):
        return "path must start with /"
    if _FORBIDDEN_PATH.match(path):
        return "cannot override kind, apiVersion or status"
    if _METADATA.match(path) and not _METADATA_ALLOWED.match(path):
        return "cannot override metadata fields except labels and annotations"
    if _EMPTY_SEGMENT.search(path):
        return "path cannot contain an empty segment"
    return ""


class JSONPatchOverride(Model):
    """One JSON patch operation (RFC 6902) made to a selected object on the clusters a rule reaches:
    `op` at `path`, with `value` (any JSON value, left out with remove)."""

    model_config = validations(
        cel("self.path.startsWith('/')", "path must start with /"),
        cel(
            "!self.path.matches('^/(kind|apiVersion|status)(/.*)?$')",
            "cannot override kind, apiVersion or status",
        ),
        cel(
            "!self.path.matches('^/metadata(/.*)?$')"
            " || self.path.matches('^/metadata/(labels|annotations)(/.*)?$')",
            "cannot override metadata fields except labels and annotations",
        ),
        cel("!self.path.matches('/\\\\s*(/|$)')", "path cannot contain an empty segment"),
        # "remove cannot have a value" is Python's only: CEL cannot see a field without a schema.
    )

    op: Literal["add", "remove", "replace"]
    """The operation: `add`, `remove` or `replace`, as in JSON Patch (RFC 6902)."""
    path: str = Field(max_length=MAX_PATH)
    """JSON pointer (RFC 6901) to the field to change, such as `/spec/replicas`. It cannot point into
    kind, apiVersion, status, or metadata other than labels and annotations."""
    value: JSONValue = None
    """The value to add or replace with: any JSON value. In its strings, `${MEMBER-CLUSTER-NAME}`
    becomes the cluster's name and `${MEMBER-CLUSTER-LABEL-KEY-<key>}` the value of the cluster's label
    `<key>`. Must be left out with remove."""

    @model_validator(mode="after")
    def _check(self) -> JSONPatchOverride:
        problem = path_problem(self.path)
        if problem:
            raise ValueError(f"path: {problem}")
        if self.op == "remove" and self.value is not None:
            raise ValueError("value: remove cannot have a value")
        return self


class OverrideRule(Model):
    """What an override does to the selected objects on the clusters the rule selects."""

    model_config = validations(
        cel(
            "self.overrideType == 'Delete' ? !has(self.jsonPatchOverrides)"
            " : (has(self.jsonPatchOverrides) && size(self.jsonPatchOverrides) > 0)",
            "jsonPatchOverrides: required with JSONPatch, not allowed with Delete",
        ),
        cel(
            "!has(self.clusterSelector) || self.clusterSelector.clusterSelectorTerms.all(t,"
            " has(t.labelSelector) && !has(t.propertySelector) && !has(t.propertySorter))",
            "clusterSelector: only labelSelector is supported",
        ),
    )

    cluster_selector: ClusterSelector | None = None
    """The clusters the rule applies to, by MemberCluster labels (terms may only have a
    labelSelector). Omitted: no cluster; an empty list of terms: every cluster."""
    override_type: Literal["JSONPatch", "Delete"] = "JSONPatch"
    """`JSONPatch` (the default): change the selected objects on those clusters with
    jsonPatchOverrides. `Delete`: leave the selected objects off those clusters."""
    json_patch_overrides: list[JSONPatchOverride] | None = Field(None, max_length=MAX_PATCHES)
    """With JSONPatch (required, and only then): the patches, up to 20, applied in order. In their
    values, `${MEMBER-CLUSTER-NAME}` becomes the cluster's name and `${MEMBER-CLUSTER-LABEL-KEY-<key>}`
    the value of the cluster's label `<key>`."""

    @model_validator(mode="after")
    def _check(self) -> OverrideRule:
        if self.override_type == "Delete" and self.json_patch_overrides is not None:
            raise ValueError("jsonPatchOverrides: not allowed when overrideType is Delete")
        if self.override_type == "JSONPatch" and not self.json_patch_overrides:
            raise ValueError("jsonPatchOverrides: required when overrideType is JSONPatch")
        for term in self.cluster_selector.cluster_selector_terms if self.cluster_selector else ():
            if term.label_selector is None or term.property_selector or term.property_sorter:
                raise ValueError("clusterSelector: only labelSelector is supported")
        return self


class OverridePolicy(Model):
    """The rules of an override: which clusters get which changes."""

    override_rules: list[OverrideRule] = Field(min_length=1, max_length=MAX_RULES)
    """1 to 20 rules, applied in order; each applies on the clusters its selector matches."""


class PlacementRef(Model):
    """The one placement an override applies to."""

    name: str = Field(max_length=253)
    """Name of the placement."""
    scope: Literal["Cluster", "Namespaced"] = "Cluster"
    """`Cluster` (the default): a ClusterResourcePlacement. `Namespaced`: a ResourcePlacement in the
    override's namespace (only for a ResourceOverride)."""


# Upstream selects overrides' objects by name only; fleetwave also takes group, version and kind.
class OverrideSelector(Model):
    """Selects one object by group, version, kind and name."""

    group: str = Field(max_length=253)
    """API group of the object's kind; empty for the core group."""
    version: str = Field(max_length=63)
    """API version of the object's kind, such as `v1`."""
    kind: str = Field(max_length=63)
    """Kind of the object, such as `Deployment` or `Namespace`."""
    name: str = Field(max_length=253)
    """Name of the object."""


_UNIQUE_SELECTORS = cel("self.all(x, self.exists_one(y, x == y))", "selectors must be unique")
_PLACEMENT_IMMUTABLE = cel(
    "(has(oldSelf.placement) && has(self.placement) && oldSelf.placement == self.placement)"
    " || (!has(oldSelf.placement) && !has(self.placement))",
    "The placement field is immutable",
)


def _unique(selectors: list[OverrideSelector], field: str) -> None:
    if len(set(selectors)) != len(selectors):
        raise ValueError(f"{field}: selectors must be unique")


class ClusterResourceOverrideSpec(Model):
    """Which cluster-scoped objects a ClusterResourceOverride changes, on which clusters, and how."""

    model_config = validations(_PLACEMENT_IMMUTABLE)

    placement: PlacementRef | None = None
    """The ClusterResourcePlacement the override is limited to. Omitted: every placement that
    places the selected objects. Cannot be set, changed or removed after creation."""
    cluster_resource_selectors: list[OverrideSelector] = Field(
        min_length=1,
        max_length=MAX_SELECTORS,
        json_schema_extra={"x-kubernetes-validations": [_UNIQUE_SELECTORS]},
    )
    """The cluster-scoped objects to change, 1 to 20, each listed once. Selecting a Namespace also
    selects every object in it."""
    policy: OverridePolicy
    """The rules: which clusters get which changes."""

    @model_validator(mode="after")
    def _check(self) -> ClusterResourceOverrideSpec:
        _unique(self.cluster_resource_selectors, "clusterResourceSelectors")
        if self.placement is not None and self.placement.scope == "Namespaced":
            raise ValueError("placement: a ClusterResourceOverride cannot reference a Namespaced placement")
        return self


class ResourceOverrideSpec(Model):
    """Which objects of its namespace a ResourceOverride changes, on which clusters, and how."""

    model_config = validations(_PLACEMENT_IMMUTABLE)

    placement: PlacementRef | None = None
    """The placement the override is limited to. Omitted: every placement that places the selected
    objects. Cannot be set, changed or removed after creation."""
    resource_selectors: list[OverrideSelector] = Field(
        min_length=1,
        max_length=MAX_SELECTORS,
        json_schema_extra={"x-kubernetes-validations": [_UNIQUE_SELECTORS]},
    )
    """The objects of the override's namespace to change, 1 to 20, each listed once."""
    policy: OverridePolicy
    """The rules: which clusters get which changes."""

    @model_validator(mode="after")
    def _check(self) -> ResourceOverrideSpec:
        _unique(self.resource_selectors, "resourceSelectors")
        return self


_CATEGORIES = ("fleet", "fleet-placement")


class ClusterResourceOverride(Resource):
    """Changes cluster-scoped resources a placement carries, per member cluster: JSON patches applied on
    the clusters its rules select (KubeFleet's ClusterResourceOverride)."""

    kind_name: ClassVar[str] = "ClusterResourceOverride"
    short_names: ClassVar[tuple[str, ...]] = ("cro",)  # fleetwave.io only: upstream has none
    plural: ClassVar[str] = "clusterresourceoverrides"
    namespaced: ClassVar[bool] = False
    categories: ClassVar[tuple[str, ...]] = _CATEGORIES
    root_validations = (
        cel(
            "!has(self.spec.placement) || self.spec.placement.scope != 'Namespaced'",
            "clusterResourceOverride placement reference cannot be Namespaced scope",
        ),
    )

    kind: Literal["ClusterResourceOverride"] = "ClusterResourceOverride"
    spec: ClusterResourceOverrideSpec
    """Which cluster-scoped objects the override changes, on which clusters, and how."""


class ResourceOverride(Resource):
    """Changes namespaced resources of its namespace that a placement carries, per member cluster: JSON
    patches applied on the clusters its rules select (KubeFleet's ResourceOverride)."""

    kind_name: ClassVar[str] = "ResourceOverride"
    short_names: ClassVar[tuple[str, ...]] = ("ro",)  # fleetwave.io only: upstream has none
    plural: ClassVar[str] = "resourceoverrides"
    namespaced: ClassVar[bool] = True
    categories: ClassVar[tuple[str, ...]] = _CATEGORIES

    kind: Literal["ResourceOverride"] = "ResourceOverride"
    spec: ResourceOverrideSpec
    """Which objects of this namespace the override changes, on which clusters, and how."""


# ---- snapshots (written by the override controller; immutable, `<override>-<index>`) ----

_HASH = Field(max_length=128, json_schema_extra={"format": "byte"})


class ClusterResourceOverrideSnapshotSpec(Model):
    """A copy of a ClusterResourceOverride's spec, made by the controller; it never changes."""

    override_spec: ClusterResourceOverrideSpec
    """Set by the controller: the override's spec when the snapshot was made."""
    override_hash: str = _HASH
    """Set by the controller: a hash of overrideSpec, which tells whether the override changed."""


class ResourceOverrideSnapshotSpec(Model):
    """A copy of a ResourceOverride's spec, made by the controller; it never changes."""

    override_spec: ResourceOverrideSpec
    """Set by the controller: the override's spec when the snapshot was made."""
    override_hash: str = _HASH
    """Set by the controller: a hash of overrideSpec, which tells whether the override changed."""


class ClusterResourceOverrideSnapshot(Resource):
    """Set by the controller: an immutable copy of a ClusterResourceOverride at one revision, so a run
    applies the overrides it started with."""

    kind_name: ClassVar[str] = "ClusterResourceOverrideSnapshot"
    short_names: ClassVar[tuple[str, ...]] = ("cros",)  # fleetwave.io only: upstream has none
    plural: ClassVar[str] = "clusterresourceoverridesnapshots"
    namespaced: ClassVar[bool] = False
    categories: ClassVar[tuple[str, ...]] = _CATEGORIES

    kind: Literal["ClusterResourceOverrideSnapshot"] = "ClusterResourceOverrideSnapshot"
    spec: ClusterResourceOverrideSnapshotSpec
    """Set by the controller: a copy of a ClusterResourceOverride's spec, made each time it changes and named
    `<override>-<index>`. A RollingUpdate placement uses the newest; a staged update run keeps the
    ones it started with."""


class ResourceOverrideSnapshot(Resource):
    """Set by the controller: an immutable copy of a ResourceOverride at one revision, so a run applies
    the overrides it started with."""

    kind_name: ClassVar[str] = "ResourceOverrideSnapshot"
    short_names: ClassVar[tuple[str, ...]] = ("ros",)  # fleetwave.io only: upstream has none
    plural: ClassVar[str] = "resourceoverridesnapshots"
    namespaced: ClassVar[bool] = True
    categories: ClassVar[tuple[str, ...]] = _CATEGORIES

    kind: Literal["ResourceOverrideSnapshot"] = "ResourceOverrideSnapshot"
    spec: ResourceOverrideSnapshotSpec
    """Set by the controller: a copy of a ResourceOverride's spec, made each time it changes and named
    `<override>-<index>`. A RollingUpdate placement uses the newest; a staged update run keeps the
    ones it started with."""
