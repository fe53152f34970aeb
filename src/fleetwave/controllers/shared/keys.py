"""Typed keys of what controllers remember between passes and tell each other (ADR 0102).

A ClusterSummary's work-queue key is the string `namespace/name` (`runtime.watching.object_key`);
what a controller keeps about a summary, or leaves for another controller about one, is keyed by the
pair itself, so two maps never know one summary by two different strings.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple


class SummaryKey(NamedTuple):
    namespace: str
    name: str

    @classmethod
    def parse(cls, key: str) -> SummaryKey:
        """From the summary's work-queue key, `namespace/name`."""
        namespace, _, name = key.partition("/")
        return cls(namespace, name)

    @classmethod
    def of(cls, raw: Mapping[str, Any]) -> SummaryKey:
        """From the summary as a dict."""
        meta = raw["metadata"]
        return cls(str(meta["namespace"]), str(meta["name"]))

    @property
    def key(self) -> str:
        """The summary's work-queue key."""
        return f"{self.namespace}/{self.name}"
