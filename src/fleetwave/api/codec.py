"""Manifest codec: YAML/dicts (native, upstream or docs forms) <-> native models.

Public contract (other packages code against it): `parse_object`, `load_manifests`, `to_manifest`,
`ManifestError`, `Resource`.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

from pydantic import ValidationError

from fleetwave.api import yamlsafe
from fleetwave.api.meta import API_VERSION, Resource
from fleetwave.api.models import KINDS
from fleetwave.api.upstream import ConversionError, to_native
from fleetwave.core import timestamps

__all__ = ["ManifestError", "Resource", "load_manifests", "parse_object", "to_manifest"]

_NATIVE_KINDS = frozenset(KINDS)
UNREADABLE = "the manifest has a shape fleetwave cannot read"
# A validator may prefix its message with a relative field path ("stages[1].name: ...");
# it is folded into the reported location so every error names the exact field.
_REL_PATH = re.compile(r"^([A-Za-z_][\w]*(?:\[\d+\])?(?:\.[A-Za-z_][\w]*(?:\[\d+\])?)*): (.*)$", re.S)
_FRIENDLY = {
    "extra_forbidden": "unknown field",
    "missing": "required field is missing",
}


class ManifestError(ValueError):
    """An unusable manifest. `str()` is `Kind/name: path: problem` (several problems joined by `; `)."""

    def __init__(self, kind: str, name: str, problems: list[tuple[str, str]]) -> None:
        self.kind = kind
        self.name = name
        self.problems = problems
        text = "; ".join(f"{path}: {msg}" if path else msg for path, msg in problems)
        super().__init__(f"{kind}/{name}: {text}")


def _format_loc(loc: tuple[str | int, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else part
    return out


def _problems(err: ValidationError) -> list[tuple[str, str]]:
    problems = []
    for e in err.errors(include_url=False):
        path = _format_loc(tuple(e["loc"]))
        msg = _FRIENDLY.get(e["type"], e["msg"])
        if e["type"] in ("value_error", "assertion_error"):
            msg = msg.removeprefix("Value error, ").removeprefix("Assertion failed, ")
            m = _REL_PATH.match(msg)
            if m:
                path = f"{path}.{m.group(1)}" if path else m.group(1)
                msg = m.group(2)
        problems.append((path, msg))
    return problems


def _times_to_text(node: Any) -> Any:
    """YAML turns unquoted timestamps into datetimes; the API keeps RFC3339 text (ADR 0010)."""
    if isinstance(node, dict):
        return {k: _times_to_text(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_times_to_text(v) for v in node]
    if isinstance(node, dt.datetime):
        return timestamps.fmt(node)
    if isinstance(node, dt.date):
        return node.isoformat()
    return node


def _label(value: Any) -> str:
    """A kind or name for error messages: only short text is echoed back."""
    return value[:253] if isinstance(value, str) and value else "?"


def parse_object(doc: dict[str, Any]) -> Resource:
    """Parse one manifest (native, upstream apiVersion or docs spelling) into its native model."""
    if not isinstance(doc, dict):
        raise ManifestError("?", "?", [("", f"expected a mapping, got {type(doc).__name__}")])
    kind = _label(doc.get("kind"))
    meta = doc.get("metadata")
    name = _label(meta.get("name")) if isinstance(meta, dict) else "?"
    try:
        native = to_native(_times_to_text(doc), _NATIVE_KINDS)
        return KINDS[native["kind"]].model_validate(native)
    except ConversionError as e:
        raise ManifestError(kind, name, [(e.path, e.message)]) from None
    except ValidationError as e:
        raise ManifestError(kind, name, _problems(e)) from None
    except (TypeError, ValueError, KeyError, AttributeError, RecursionError) as e:
        # A shape no rule above anticipated: still the user's input, still refused by name. The
        # fuzz test asserts this branch is never reached, so each such shape gets a precise message.
        raise ManifestError(kind, name, [("", f"{UNREADABLE} ({type(e).__name__})")]) from None


def load_manifests(text: str | bytes, *, source: str = "input") -> list[Resource]:
    """Parse multi-document YAML (bounded: see `yamlsafe`); empty documents are skipped."""
    try:
        docs = yamlsafe.load_all(text, what=source)
    except yamlsafe.YamlError as e:
        raise ManifestError("?", "?", [("", str(e))]) from None
    return [parse_object(d) for d in docs if d is not None]


def to_manifest(obj: Resource) -> dict[str, Any]:
    """Native manifest: apiVersion fleetwave.io/v1alpha1, camelCase keys, unset and None fields dropped."""
    body = obj.model_dump(mode="json", by_alias=True, exclude_unset=True, exclude_none=True)
    body.pop("apiVersion", None)
    body.pop("kind", None)
    return {"apiVersion": API_VERSION, "kind": obj.kind_name, **body}
