"""A ClusterProfile's `extraLabels` / `extraAnnotations`: checked, then stamped on every object the
profile's policyRefs deliver (Sveltos' behaviour for YAML content).

Keys and label values must be what Kubernetes accepts, or every apply on every member would fail
with the same error: they are refused here, naming the key, before anything is delivered. An extra
label replaces a label of the same key in the content (the profile says what its objects carry).
Helm charts are not relabelled yet (Sveltos does it with a post-renderer), so extras together with
helmCharts are refused rather than applied to half of the content.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from typing import Any

_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_PREFIX = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
LABEL_VALUE_MAX = 63


class ExtraMetadataError(ValueError):
    pass


def check_key(key: str, path: str) -> None:
    """A qualified name: optional DNS-subdomain prefix (<= 253) and `/`, then a name (<= 63)."""
    prefix, slash, name = key.rpartition("/")
    ok = bool(name) and len(name) <= 63 and _NAME.match(name) is not None
    if slash:
        ok = ok and 0 < len(prefix) <= 253 and _PREFIX.match(prefix) is not None
    if not ok:
        raise ExtraMetadataError(f"{path}: key {key[:80]!r} is not a valid Kubernetes label/annotation key")


def check_label_value(key: str, value: str, path: str) -> None:
    if value and (len(value) > LABEL_VALUE_MAX or _NAME.match(value) is None):
        raise ExtraMetadataError(
            f"{path}[{key[:80]}]: not a valid label value (at most {LABEL_VALUE_MAX} characters: "
            "alphanumerics, '-', '_' or '.', starting and ending alphanumeric)"
        )


def check(labels: Mapping[str, str], annotations: Mapping[str, str], path: str) -> None:
    for key, value in sorted(labels.items()):
        check_key(key, f"{path}.extraLabels")
        check_label_value(key, value, f"{path}.extraLabels")
    for key in sorted(annotations):
        check_key(key, f"{path}.extraAnnotations")


def stamp(
    objects: list[dict[str, Any]], labels: Mapping[str, str], annotations: Mapping[str, str]
) -> list[dict[str, Any]]:
    """Copies of `objects` carrying the extra labels and annotations."""
    out = []
    for obj in objects:
        stamped = copy.deepcopy(obj)
        meta = stamped.setdefault("metadata", {})
        if labels:
            meta["labels"] = {**(meta.get("labels") or {}), **labels}
        if annotations:
            meta["annotations"] = {**(meta.get("annotations") or {}), **annotations}
        out.append(stamped)
    return out
