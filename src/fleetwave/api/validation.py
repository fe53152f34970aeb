"""Format checks shared by the Python validators and the CRD schemas (one place for each rule).

Every rule exists twice: as a Python check (so `fleetwave plan` catches it offline) and as a CRD
pattern or CEL expression (so the apiserver rejects it at admission). Both live here, side by side,
so they cannot drift apart silently.
"""

from __future__ import annotations

import re
from typing import Any

from croniter import croniter

# DNS-1123 label: stage names end up inside generated object names (`<promotion>-<stage>`,
# `<run>-after-<stage>`), so anything else would fail later, at apply time.
DNS1123_LABEL_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
DNS1123_LABEL_MAX = 63

# Go time.ParseDuration / metav1.Duration, without a sign (negative waits make no sense here).
DURATION_PATTERN = r"^(0|([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+)$"
DURATION_MAX = 64
_DURATION_UNIT_RE = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ns|us|µs|ms|s|m|h)")
_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}

# robfig/cron ParseStandard: five fields, or a descriptor. The regex is only an approximation
# (it accepts e.g. minute 99); croniter does the real check in Python.
# No backslashes: the pattern is embedded in a CEL string literal, where `\*` is not a valid escape.
_CRON_ATOM = r"([*]|[?]|[0-9A-Za-z]+(-[0-9A-Za-z]+)?)(/[0-9]+)?"
_CRON_FIELD = rf"{_CRON_ATOM}(,{_CRON_ATOM})*"
_CRON_DESCRIPTOR = r"@(yearly|annually|monthly|weekly|daily|midnight|hourly)|@every [0-9a-zµ.]+"
CRON_PATTERN = rf"^({_CRON_DESCRIPTOR}|{_CRON_FIELD}( {_CRON_FIELD}){{4}})$"
CRON_MAX = 128
CRON_DESCRIPTORS = frozenset(
    {"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"}
)

# maxUpdate: a non-negative int, or "N%" with N in 0..100 (upstream also accepts a bare digit string).
MAX_UPDATE_PCT_PATTERN = r"^((100|[0-9]{1,2})%|[0-9]+)$"
# maxConcurrency: an int >= 1, or "N%" with N in 1..100 (a bare "50" is rejected, as upstream).
MAX_CONCURRENCY_PCT_PATTERN = r"^(100|[1-9][0-9]?)%$"
# maxUnavailable / maxSurge: a non-negative int or "N%" with N in 0..100.
PERCENT_OR_INT_PATTERN = r"^((100|[0-9]{1,2})%|[0-9]+)$"
# A disruption budget's percentage (KubeFleet's): "N%" with N in 0..100; a count is an integer.
BUDGET_PCT_PATTERN = r"^(100|[0-9]{1,2})%$"
# CEL half of an int-or-percent check: `type(self) == int` values must be >= the bound.
INT_MIN_CEL = "type(self) != int || self >= {0}"

# A KubeFleet cluster property name: label-name segments (alphanumerics, '-', '_', '.'; starting and
# ending alphanumeric) joined by '/', as upstream's webhook checks (`kubernetes-fleet.io/node-count`,
# `kubernetes.azure.com/skus/Standard_B4ms/count`).
_PROPERTY_SEGMENT = r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?"
PROPERTY_NAME_PATTERN = rf"^{_PROPERTY_SEGMENT}(/{_PROPERTY_SEGMENT})*$"
PROPERTY_NAME_MAX = 512
# A Kubernetes quantity (resource.Quantity's grammar), what upstream accepts as a property value.
# fleetwave reads plain decimals only (DECIMAL_PATTERN): a suffixed value is refused by name in status.
QUANTITY_PATTERN = r"^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([KMGTPE]i|[numkMGTPE]|[eE][+-]?[0-9]+)?$"
DECIMAL_PATTERN = r"^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?$"
QUANTITY_MAX = 64


def check_dns1123_label(value: str) -> str:
    if len(value) > DNS1123_LABEL_MAX or not re.fullmatch(DNS1123_LABEL_PATTERN, value):
        raise ValueError(
            f"{value!r} is not a DNS-1123 label (lower-case alphanumerics and '-', "
            f"starting and ending alphanumeric, at most {DNS1123_LABEL_MAX} characters)"
        )
    return value


MAX_DURATION_SECONDS = (2**63 - 1) / 1e9


def duration_seconds(value: str) -> float:
    """Seconds in a Go duration string (`5m`, `1h30m`, `1.5h`, `0`); ValueError if unparsable."""
    if value == "0":
        return 0.0
    pos = 0
    total = 0.0
    for m in _DURATION_UNIT_RE.finditer(value):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _UNIT_SECONDS[m.group(2)]
        pos = m.end()
    if pos != len(value) or not value:
        raise ValueError(f"{value!r} is not a duration (use Go form such as 30s, 5m, 1h30m)")
    if total > MAX_DURATION_SECONDS:  # Go's time.ParseDuration refuses these too (int64 nanoseconds)
        raise ValueError(f"{value!r} is out of range (at most 2562047h)")
    return total


def check_property_name(value: str) -> str:
    if len(value) > PROPERTY_NAME_MAX or not re.fullmatch(PROPERTY_NAME_PATTERN, value):
        raise ValueError(
            f"{value!r} is not a property name ('/'-separated segments of alphanumerics, '-', '_' "
            "and '.', each starting and ending alphanumeric)"
        )
    return value


def check_quantity(value: str) -> str:
    if len(value) > QUANTITY_MAX or not re.fullmatch(QUANTITY_PATTERN, value):
        raise ValueError(f"{value!r} is not a Kubernetes quantity (a number such as 5, 0.5 or 1e3)")
    return value


def check_duration(value: str) -> str:
    if len(value) > DURATION_MAX:
        raise ValueError(f"duration longer than {DURATION_MAX} characters")
    duration_seconds(value)
    return value


def check_cron(value: str) -> str:
    """A robfig `ParseStandard` expression: 5 fields (no seconds, no TZ prefix) or a descriptor."""
    text = value.strip()
    if text in CRON_DESCRIPTORS:
        return value
    if text.startswith("@every "):
        check_duration(text.removeprefix("@every ").strip())
        return value
    fields = text.split()
    if len(fields) != 5 or len(value) > CRON_MAX or not croniter.is_valid(text):
        raise ValueError(f"{value!r} is not a 5-field cron expression or @descriptor")
    return value


def check_int_or_percent(value: Any, *, minimum: int, pattern: str, what: str) -> int | str:
    """Validate an int-or-string field; strings must match `pattern` (upstream forms)."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError(f"{what} must be an integer or a percentage string such as '10%'")
    if isinstance(value, int):
        if value < minimum:
            raise ValueError(f"{what} must be >= {minimum}")
        return value
    if not re.fullmatch(pattern, value):
        raise ValueError(f"{what} {value!r} must be an integer or 'N%' with N in {minimum}..100")
    return value


def check_unique_names(names: list[str], what: str) -> None:
    """Raise with a `<what>[i].name: ...` path prefix, which the codec folds into the error location."""
    seen: set[str] = set()
    for i, name in enumerate(names):
        if name in seen:
            raise ValueError(f"{what}[{i}].name: duplicate stage name {name!r}")
        seen.add(name)
