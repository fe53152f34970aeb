"""Label-selector strings: built from Sveltos LabelFilters, parsed, matched, and handed to lightkube.

The same parsed form drives in-memory matching (DictResourceReader) and the server-side LIST
(KubeResourceReader), so both readers select exactly the same objects.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from fleetwave.api.sveltos import LabelFilter

Op = Literal["=", "!=", "exists", "!exists", "in", "notin"]

_KEY = r"[A-Za-z0-9][-A-Za-z0-9_./]*"
_VALUE = r"[-A-Za-z0-9_.]*"
_TERM = re.compile(
    rf"\s*(?:(?P<not>!)\s*(?P<nkey>{_KEY})"
    rf"|(?P<skey>{_KEY})\s+(?P<sop>in|notin)\s*\((?P<vals>[^)]*)\)"
    rf"|(?P<key>{_KEY})\s*(?:(?P<op>==|=|!=)\s*(?P<val>{_VALUE}))?)\s*(?:,|$)"
)


@dataclass(frozen=True, slots=True)
class Requirement:
    key: str
    op: Op
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        if self.op == "exists":
            return present
        if self.op == "!exists":
            return not present
        if self.op in ("=", "in"):
            return present and value in self.values
        # `!=` and `notin` also match objects without the label, as in Kubernetes.
        return value not in self.values


def from_label_filters(filters: Iterable[LabelFilter] | None) -> str | None:
    """Sveltos LabelFilter list -> selector string (AND of all filters); None when there are none."""
    terms = []
    for f in filters or ():
        if f.operation == "Equal":
            terms.append(f"{f.key}={f.value or ''}")
        elif f.operation == "Different":
            terms.append(f"{f.key}!={f.value or ''}")
        elif f.operation == "Has":
            terms.append(f.key)
        else:
            terms.append(f"!{f.key}")
    return ",".join(terms) or None


def parse(selector: str | None) -> tuple[Requirement, ...]:
    """Parse equality-, set- and existence-based terms; raises ValueError on anything else."""
    text = (selector or "").strip()
    reqs: list[Requirement] = []
    pos = 0
    while pos < len(text):
        m = _TERM.match(text, pos)
        if m is None or m.end() == pos:
            raise ValueError(f"invalid label selector {selector!r} at offset {pos}")
        reqs.append(_requirement(m))
        pos = m.end()
    return tuple(reqs)


def _requirement(m: re.Match[str]) -> Requirement:
    if m["nkey"]:
        return Requirement(m["nkey"], "!exists")
    if m["skey"]:
        values = tuple(v.strip() for v in m["vals"].split(",") if v.strip())
        return Requirement(m["skey"], "in" if m["sop"] == "in" else "notin", values)
    if m["op"] is None:
        return Requirement(m["key"], "exists")
    return Requirement(m["key"], "!=" if m["op"] == "!=" else "=", (m["val"],))


def matches(requirements: Iterable[Requirement], labels: Mapping[str, str] | None) -> bool:
    found = labels or {}
    return all(r.matches(found) for r in requirements)
