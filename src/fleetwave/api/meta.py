"""Shared API building blocks: model bases, ObjectMeta, Condition, LabelSelector, durations, percents."""

from __future__ import annotations

import datetime as _dt
import math
from typing import Annotated, Any, ClassVar, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, PlainValidator, WithJsonSchema
from pydantic.alias_generators import to_camel

from fleetwave.api import groups
from fleetwave.api import validation as v
from fleetwave.core import timestamps

# Re-exported: most of the API package takes the group and version from here.
GROUP, VERSION, API_VERSION = groups.GROUP, groups.VERSION, groups.API_VERSION


def cel(rule: str, message: str, **extra: Any) -> dict[str, Any]:
    """One `x-kubernetes-validations` entry."""
    return {"rule": rule, "message": message, **extra}


class Model(BaseModel):
    """Base of every spec-side type: camelCase aliases, strict about unknown fields, immutable."""

    model_config = ConfigDict(
        frozen=True,
        populate_by_name=True,
        alias_generator=to_camel,
        extra="forbid",
        use_enum_values=True,
        # A field's docstring becomes its CRD description (what `kubectl explain` prints).
        use_attribute_docstrings=True,
    )


class StatusModel(BaseModel):
    """Base of status types: status is written by controllers, so unknown fields are kept, not rejected."""

    model_config = ConfigDict(
        frozen=True,
        populate_by_name=True,
        alias_generator=to_camel,
        extra="allow",
        use_attribute_docstrings=True,
        json_schema_extra={"x-kubernetes-preserve-unknown-fields": True},
    )


# Free-form content (helm values maps, raw manifests, ...): kept verbatim.
FreeForm = Annotated[
    dict[str, Any], WithJsonSchema({"type": "object", "x-kubernetes-preserve-unknown-fields": True})
]

# A controller-written map keyed by cluster (a delivery ledger): one value to the API server. A map
# under `x-kubernetes-preserve-unknown-fields` is otherwise tracked key by key in managedFields, ~100
# bytes per cluster on every object that carries it, recomputed on every status write.
AtomicMap = Annotated[
    dict[str, Any],
    WithJsonSchema(
        {"type": "object", "x-kubernetes-preserve-unknown-fields": True, "x-kubernetes-map-type": "atomic"}
    ),
]

Duration = Annotated[
    str,
    AfterValidator(v.check_duration),
    Field(json_schema_extra={"pattern": v.DURATION_PATTERN, "maxLength": v.DURATION_MAX}),
]
"""A Go/metav1 duration string such as `5m`, `1h30m`, `10s`; see `parse_duration`."""

Cron = Annotated[
    str,
    AfterValidator(v.check_cron),
    Field(
        json_schema_extra={
            "minLength": 1,
            "maxLength": v.CRON_MAX,
            "x-kubernetes-validations": [
                cel(
                    "self.matches('" + v.CRON_PATTERN + "')",
                    "must be a 5-field cron expression or @descriptor",
                )
            ],
        }
    ),
]

DNSLabel = Annotated[
    str,
    AfterValidator(v.check_dns1123_label),
    Field(json_schema_extra={"pattern": v.DNS1123_LABEL_PATTERN, "maxLength": v.DNS1123_LABEL_MAX}),
]


def _int_or_string_schema(pattern: str, rule: str, message: str) -> WithJsonSchema:
    # The string form is checked by `pattern` (applies to strings only, as upstream Sveltos does); the
    # CEL rule only bounds the integer form, so it stays cheap for the apiserver's cost estimator.
    return WithJsonSchema(
        {
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "x-kubernetes-int-or-string": True,
            "pattern": pattern,
            "x-kubernetes-validations": [cel(rule, message)],
        }
    )


MaxUpdate = Annotated[
    int | str,
    PlainValidator(
        lambda x: v.check_int_or_percent(x, minimum=0, pattern=v.MAX_UPDATE_PCT_PATTERN, what="maxUpdate")
    ),
    _int_or_string_schema(
        v.MAX_UPDATE_PCT_PATTERN,
        v.INT_MIN_CEL.format(0),
        "must be a non-negative integer or 'N%' with N in 0..100",
    ),
]
MaxConcurrency = Annotated[
    int | str,
    PlainValidator(
        lambda x: v.check_int_or_percent(
            x, minimum=1, pattern=v.MAX_CONCURRENCY_PCT_PATTERN, what="maxConcurrency"
        )
    ),
    _int_or_string_schema(
        v.MAX_CONCURRENCY_PCT_PATTERN,
        v.INT_MIN_CEL.format(1),
        "must be an integer >= 1 or 'N%' with N in 1..100",
    ),
]
IntOrPercent = Annotated[
    int | str,
    PlainValidator(
        lambda x: v.check_int_or_percent(x, minimum=0, pattern=v.PERCENT_OR_INT_PATTERN, what="value")
    ),
    _int_or_string_schema(
        v.PERCENT_OR_INT_PATTERN,
        v.INT_MIN_CEL.format(0),
        "must be a non-negative integer or 'N%' with N in 0..100",
    ),
]

BudgetValue = Annotated[
    int | str,
    PlainValidator(
        lambda x: v.check_int_or_percent(x, minimum=0, pattern=v.BUDGET_PCT_PATTERN, what="value")
    ),
    _int_or_string_schema(
        v.BUDGET_PCT_PATTERN,
        v.INT_MIN_CEL.format(0),
        "must be an integer >= 0 or 'N%' with N in 0..100",
    ),
]
"""A disruption budget's count (an integer) or percentage (`N%`), as KubeFleet's."""


def parse_duration(value: str) -> _dt.timedelta:
    """Parse a Go/metav1 duration (`5m`, `1h30m`, `1.5h`, `250ms`) into a timedelta."""
    return _dt.timedelta(seconds=v.duration_seconds(value))


def format_duration(value: _dt.timedelta) -> str:
    """The Go `Duration.String()`-like form for whole seconds (`1h30m0s`), used in status snapshots."""
    secs = int(value.total_seconds())
    h, rem = divmod(secs, 3600)
    m, s = divmod(rem, 60)
    if h:
        return f"{h}h{m}m{s}s"
    if m:
        return f"{m}m{s}s"
    return f"{s}s"


def resolve_int_or_percent(value: int | str | None, total: int, *, round_up: bool, default: int) -> int:
    """Turn an int-or-percent into a count of `total` (`"10%"` of 25 is 3 rounding up, 2 down)."""
    if value is None:
        return default
    if isinstance(value, int):
        return value
    if value.endswith("%"):
        frac = int(value[:-1]) * total / 100
        return math.ceil(frac) if round_up else math.floor(frac)
    return int(value)


parse_time = timestamps.parse
format_time = timestamps.fmt


# The subset of metav1.ObjectMeta fleetwave reads and writes. The CRDs describe `metadata` as a plain
# object (the API server owns its schema), so these docstrings are for readers of the code.
class ObjectMeta(Model):
    """Standard object metadata."""

    model_config = ConfigDict(extra="allow")  # server-populated fields (managedFields, ...) are kept

    name: str
    """Name of the object, unique within its namespace (or the cluster, for a cluster-scoped kind)."""
    namespace: str | None = None
    """Namespace of the object; omitted for a cluster-scoped kind."""
    labels: dict[str, str] | None = None
    """Labels of the object, used by selectors."""
    annotations: dict[str, str] | None = None
    """Annotations of the object: free-form notes that selectors do not look at."""
    generation: int | None = None
    """Set by the API server: increases on every change of the object's spec."""
    resource_version: str | None = None
    """Set by the API server: changes on every write; used for optimistic concurrency."""
    uid: str | None = None
    """Set by the API server: the object's unique id."""
    creation_timestamp: str | None = None
    """Set by the API server: when the object was created (RFC 3339)."""
    deletion_timestamp: str | None = None
    """Set by the API server once deletion was requested (RFC 3339); the object goes once its
    finalizers are removed."""
    finalizers: list[str] | None = None
    """Work that must finish before the object is removed; each entry is removed by whoever did it."""
    owner_references: list[FreeForm] | None = None
    """Objects this one belongs to; it is garbage-collected once they are all gone."""


# metav1.Condition. Times are RFC3339 strings (see `parse_time`).
class Condition(StatusModel):
    """One aspect of the object's state, set by the controller."""

    type: str
    """What the condition is about, such as `Ready`."""
    status: Literal["True", "False", "Unknown"]
    """Whether the condition holds: `True`, `False` or `Unknown`."""
    observed_generation: int | None = None
    """The object's `metadata.generation` the condition was computed from; an older value than the
    object's means the condition is out of date."""
    last_transition_time: str | None = None
    """When the condition last changed status (an RFC 3339 time)."""
    reason: str | None = None
    """Why the condition last changed, as one CamelCase word such as `Progressing` or `Failed`."""
    message: str | None = None
    """A human-readable explanation of the condition's status."""


class LabelSelectorRequirement(Model):
    """One requirement on a label: a key, an operator and, for `In` and `NotIn`, values."""

    key: str
    """The label key the requirement applies to."""
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    """How the label is compared: `In` (its value is one of `values`), `NotIn` (it is absent or its
    value is none of `values`), `Exists` (it is present) or `DoesNotExist` (it is absent)."""
    values: list[str] | None = None
    """The values to compare with, for `In` and `NotIn`; leave it out for `Exists` and `DoesNotExist`."""


# metav1.LabelSelector. Callers decide what an empty or absent selector means (each field that takes
# one says so in its own docstring).
class LabelSelector(Model):
    """A label query: an object matches when its labels satisfy every `matchLabels` entry and every
    `matchExpressions` requirement."""

    match_labels: dict[str, str] | None = None
    """Labels the object must carry, each with exactly this value."""
    match_expressions: list[LabelSelectorRequirement] | None = None
    """Requirements on the object's labels; all of them must hold."""

    def matches(self, labels: dict[str, str]) -> bool:
        """True if `labels` satisfy every matchLabels entry and every matchExpressions requirement."""
        for key, val in (self.match_labels or {}).items():
            if labels.get(key) != val:
                return False
        for req in self.match_expressions or []:
            present = req.key in labels
            vals = req.values or []
            ok = {
                "In": present and labels.get(req.key) in vals,
                "NotIn": not present or labels.get(req.key) not in vals,
                "Exists": present,
                "DoesNotExist": not present,
            }[req.operator]
            if not ok:
                return False
        return True


# corev1.ObjectReference (only the fields fleetwave's upstreams use).
class ObjectReference(Model):
    """A reference to a Kubernetes object by kind, namespace and name."""

    api_version: str | None = None
    """API version of the referenced object, such as `v1` or `fleetwave.io/v1alpha1`."""
    kind: str | None = None
    """Kind of the referenced object, such as `ConfigMap` or `MemberCluster`."""
    name: str | None = None
    """Name of the referenced object."""
    namespace: str | None = None
    """Namespace of the referenced object; empty for a cluster-scoped object."""
    uid: str | None = None
    """The referenced object's uid, when the reference names one particular incarnation of it."""


class Resource(Model):
    """Base of every top-level kind. Class variables describe the CRD (see fleetwave.api.crds)."""

    kind_name: ClassVar[str]
    plural: ClassVar[str]
    namespaced: ClassVar[bool]
    short_names: ClassVar[tuple[str, ...]] = ()
    categories: ClassVar[tuple[str, ...]] = ("fleetwave",)
    printer_columns: ClassVar[tuple[dict[str, Any], ...]] = ()
    root_validations: ClassVar[tuple[dict[str, Any], ...]] = ()

    api_version: str = API_VERSION
    """The object's API group and version."""
    kind: str
    """The object's kind."""
    metadata: ObjectMeta
    """Standard object metadata."""


def column(name: str, json_path: str, type_: str = "string", priority: int = 0) -> dict[str, Any]:
    col: dict[str, Any] = {"name": name, "type": type_, "jsonPath": json_path}
    if priority:
        col["priority"] = priority
    return col


def condition_column(
    name: str, cond_type: str, field: str = "status", type_: str = "string"
) -> dict[str, Any]:
    return column(name, f'.status.conditions[?(@.type=="{cond_type}")].{field}', type_)


AGE = column("Age", ".metadata.creationTimestamp", "date")


def validations(*rules: dict[str, Any]) -> ConfigDict:
    """Model config attaching CEL rules to the type's CRD schema (Python checks them in a validator)."""
    return ConfigDict(json_schema_extra={"x-kubernetes-validations": list(rules)})


# What a rollout does once it fails (ADR 0078): stop there, or return its clusters to the last good
# revision. One spelling for promotions and staged update strategies.
OnFailure = Literal["Halt", "Rollback"]


# fleetwave's (issue 13): neither Sveltos nor KubeFleet has a failure budget.
class FailureBudget(Model):
    """A fleetwave extension: how many clusters a rollout (a promotion, or the runs of a staged update
    strategy) may lose and carry on. A cluster whose delivery keeps failing for `gracePeriod` is
    failed; within both limits it is set aside and its stage goes on without it, past either the
    rollout stops (Failed, reason FailureBudgetExceeded, every failed cluster named). A limit left out
    does not apply; with both left out, no cluster may fail. Without a failureBudget a failed cluster
    holds its stage."""

    max_failed_per_stage: IntOrPercent | None = Field(
        None,
        description="Failed clusters tolerated in one stage: a count or a percentage of the stage "
        "(rounded down).",
    )
    max_failed: IntOrPercent | None = Field(
        None,
        description="Failed clusters tolerated in the whole rollout: a count or a percentage of "
        "its clusters (rounded down).",
    )
    grace_period: Duration | None = Field(
        None,
        description="How long a delivery must keep failing before the cluster counts as failed: a "
        "duration such as `2m` or `1h30m`. Defaults to 2m.",
    )
