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


class ObjectMeta(Model):
    """The subset of metav1.ObjectMeta fleetwave reads and writes."""

    model_config = ConfigDict(extra="allow")  # server-populated fields (managedFields, ...) are kept

    name: str
    namespace: str | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    generation: int | None = None
    resource_version: str | None = None
    uid: str | None = None
    creation_timestamp: str | None = None
    deletion_timestamp: str | None = None
    finalizers: list[str] | None = None
    owner_references: list[FreeForm] | None = None


class Condition(StatusModel):
    """metav1.Condition. Times are RFC3339 strings (see `parse_time`)."""

    type: str
    status: Literal["True", "False", "Unknown"]
    observed_generation: int | None = None
    last_transition_time: str | None = None
    reason: str | None = None
    message: str | None = None


class LabelSelectorRequirement(Model):
    key: str
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    values: list[str] | None = None


class LabelSelector(Model):
    """metav1.LabelSelector. Note: callers decide what an empty/absent selector means."""

    match_labels: dict[str, str] | None = None
    match_expressions: list[LabelSelectorRequirement] | None = None

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


class ObjectReference(Model):
    """corev1.ObjectReference (only the fields fleetwave's upstreams use)."""

    api_version: str | None = None
    kind: str | None = None
    name: str | None = None
    namespace: str | None = None
    uid: str | None = None


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
    kind: str
    metadata: ObjectMeta


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


class FailureBudget(Model):
    """fleetwave's (issue 13; neither Sveltos nor KubeFleet has one): how many clusters a rollout (a
    promotion, or the runs of a staged update strategy) may lose and carry on. A cluster whose
    delivery keeps failing for `gracePeriod` is failed; within both limits it is set aside and its
    stage goes on without it, past either the rollout stops (Failed, reason FailureBudgetExceeded,
    every failed cluster named). A limit left out does not apply; with both left out, no cluster may
    fail. Without a failureBudget a failed cluster holds its stage."""

    max_failed_per_stage: IntOrPercent | None = Field(
        None,
        description="Failed clusters tolerated in one stage: a count or a percentage of the stage "
        "(rounded down).",
    )
    max_failed: IntOrPercent | None = Field(
        None,
        description="Failed clusters tolerated in the whole rollout: a count or a percentage of "
        "its clusters.",
    )
    grace_period: Duration | None = Field(
        None,
        description="How long a delivery must keep failing before the cluster counts as failed (default 2m).",
    )
