"""Hostile manifests: every mutation of a known-good manifest parses or is refused with ManifestError.

The codec keeps a last-resort branch that turns an unanticipated shape into a ManifestError; this test
also asserts that branch is never needed, so every refusal names the field that is wrong. A longer run
of the same mutation (200,000+ inputs) is `bench/fuzz_manifests.py`.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleetwave.api import codec, yamlsafe

ROOT = Path(__file__).resolve().parents[3]
SOURCES = [*sorted((ROOT / "examples").glob("*.yaml")), ROOT / "tests/unit/api/seed004_objects.yaml"]
# The examples' own Namespaces and ConfigMaps (apiVersion v1) are the API server's to parse, not fleetwave's.
DOCS = [
    d
    for f in SOURCES
    for d in yamlsafe.load_all(f.read_text())
    if isinstance(d, dict) and "kind" in d and d.get("apiVersion") != "v1"
]

HOSTILE = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**6), max_value=10**6),
    st.sampled_from([10**5000, -(10**4400), float("nan"), float("inf"), 1.5]),
    st.text(max_size=40),
    st.sampled_from(["10%", "-5m", "99999999999h", "2025-01-01T00:00:00Z", "", "a" * 300]),
    st.recursive(
        st.none() | st.integers(-5, 5) | st.text(max_size=5),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
        max_leaves=8,
    ),
)


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(node, dict):
        for key, value in node.items():
            out += _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            out += _paths(value, (*prefix, i))
    return out


def _replace(doc: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    parent = doc
    for step in path[:-1]:
        parent = parent[step]
    parent[path[-1]] = value
    return doc


@st.composite
def mutated(draw: st.DrawFn) -> Any:
    doc = copy.deepcopy(draw(st.sampled_from(DOCS)))
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(_paths(doc)))
        doc = _replace(doc, path, draw(HOSTILE))
    return doc


def test_the_fuzz_corpus_is_the_projects_own_examples() -> None:
    assert len(DOCS) >= 8
    for doc in DOCS:
        codec.parse_object(doc)  # the unmutated corpus is valid


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_a_mutated_manifest_parses_or_is_refused_by_name(doc: Any) -> None:
    refusal = _refusal(lambda: codec.parse_object(doc))
    assert codec.UNREADABLE not in refusal, refusal[:300]


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300) | st.text(max_size=300))
def test_arbitrary_bytes_load_or_are_refused(data: bytes | str) -> None:
    refusal = _refusal(lambda: codec.load_manifests(data, source="fuzz.yaml"))
    assert codec.UNREADABLE not in refusal, refusal[:300]


def _refusal(parse: Callable[[], object]) -> str:
    """The ManifestError's text, or "" when parsing succeeded; anything else propagates and fails."""
    try:
        parse()
    except codec.ManifestError as e:
        return str(e)
    return ""
