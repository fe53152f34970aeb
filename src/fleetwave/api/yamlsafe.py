"""The one YAML loading function for every input fleetwave reads: manifests, ConfigMap and Secret
content, Helm values, fleet files, kubeconfigs.

PyYAML's safe loader is safe against code execution, not against cost: aliases share nodes, so a
few hundred bytes can stand for billions of values once anything walks them (a "billion laughs"),
its composer recurses once per nesting level (a 5,000-deep document is a RecursionError), explicit
tags such as `!!int` or `!!timestamp` raise assorted exceptions, and its error messages quote the
offending line (which may be a Secret's). Here:

1. the text must be UTF-8 without NUL bytes and within `max_bytes`;
2. a first pass over the parser's events (iterative, no recursion) bounds nesting depth and the
   number of events and aliases before anything is composed;
3. the composed node graph is measured with aliases expanded (memoised, cycle-checked) against
   `max_nodes`, so a document that would expand beyond it is refused whole;
4. construction uses only the core schema tags (str, int, float, bool, null, map, seq); timestamps,
   implicit or tagged, stay text as the Kubernetes API keeps them; integers past 4,000 digits are
   refused (Python refuses to read them past 4,300);
5. every failure is a `YamlError` naming line and column, never quoting the input.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import yaml

__all__ = ["DEFAULT_BUDGET", "Budget", "YamlError", "load", "load_all"]

_CORE_TAGS = frozenset(
    f"tag:yaml.org,2002:{t}"
    for t in ("str", "int", "float", "bool", "null", "map", "seq", "merge", "timestamp")
)


class YamlError(ValueError):
    """Input that is not acceptable YAML (syntax, encoding, size, depth, aliases, tags)."""


@dataclass(frozen=True, slots=True)
class Budget:
    max_bytes: int = 8 * 1024 * 1024
    max_depth: int = 64
    max_events: int = 2_000_000
    max_aliases: int = 10_000
    max_nodes: int = 1_000_000  # scalars + collections, with every alias expanded


DEFAULT_BUDGET = Budget()


def load(data: str | bytes, *, budget: Budget = DEFAULT_BUDGET, what: str = "input") -> Any:
    """The single document in `data` (None when empty); YamlError if there are several."""
    docs = load_all(data, budget=budget, what=what)
    if len(docs) > 1:
        raise YamlError(f"{what}: expected one YAML document, found {len(docs)}")
    return docs[0] if docs else None


def load_all(data: str | bytes, *, budget: Budget = DEFAULT_BUDGET, what: str = "input") -> list[Any]:
    """Every document in `data`, empty ones included as None."""
    text = _text(data, budget, what)
    try:
        # Without aliases every node is its own and the prescan counted them all: nothing to unfold.
        aliased = _prescan(text, budget, what) > 0
        loader = _Loader(text)
        try:
            docs = []
            while loader.check_node():
                node = loader.get_node()
                if node is not None and aliased:
                    _measure(node, budget, what)
                docs.append(loader.construct_document(node))
            return docs
        finally:
            loader.dispose()
    except YamlError:
        raise
    except _Refused as e:
        raise YamlError(f"{what}: {e}") from None
    except yaml.MarkedYAMLError as e:
        problem = _redacted(e.problem or e.context or "")
        raise YamlError(f"{what}: invalid YAML{_where(e.problem_mark)}: {problem}") from None
    except yaml.YAMLError as e:
        raise YamlError(f"{what}: invalid YAML: {type(e).__name__}") from None
    except (ValueError, TypeError, OverflowError, RecursionError) as e:
        # Raised by constructors on values such as `!!int x`; the message may quote the value.
        raise YamlError(f"{what}: a value cannot be read ({type(e).__name__})") from None


def _text(data: str | bytes, budget: Budget, what: str) -> str:
    size = len(data)
    if size > budget.max_bytes:
        raise YamlError(f"{what}: {size} bytes is more than the limit of {budget.max_bytes}")
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise YamlError(f"{what}: not UTF-8 text (invalid byte at offset {e.start})") from None
    if "\x00" in data:
        raise YamlError(f"{what}: contains NUL bytes (binary data, not YAML)")
    return data.removeprefix("\ufeff")


_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")


def _redacted(problem: str) -> str:
    """PyYAML's problem text without what it quotes from the input (alias names, tags, characters):
    a message may reach status and Events, and the input may be a Secret."""
    return _QUOTED.sub(_keep_syntax, problem)


def _keep_syntax(match: re.Match[str]) -> str:
    # Single characters (`','`) and parser tokens (`'<block end>'`) are hints, not input.
    inner = match.group(0)[1:-1]
    return match.group(0) if len(inner) <= 1 or inner.startswith("<") else "…"


def _where(mark: Any) -> str:
    return "" if mark is None else f" at line {mark.line + 1}, column {mark.column + 1}"


def _prescan(text: str, budget: Budget, what: str) -> int:
    """Bound depth, events, aliases and values; the number of aliases seen."""
    depth = aliases = values = 0
    parser = yaml.CSafeLoader if _HAS_C else yaml.SafeLoader
    for events, event in enumerate(yaml.parse(text, Loader=parser), start=1):
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > budget.max_depth:
                raise YamlError(
                    f"{what}: nested deeper than {budget.max_depth} levels{_where(event.start_mark)}"
                )
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1
        elif isinstance(event, yaml.AliasEvent):
            aliases += 1
            if aliases > budget.max_aliases:
                raise YamlError(f"{what}: more than {budget.max_aliases} aliases")
        if isinstance(event, (yaml.ScalarEvent, yaml.CollectionStartEvent)):
            values += 1  # without aliases unfolded: more than the budget here is more after too
            if values > budget.max_nodes:
                raise YamlError(f"{what}: expands to more than {budget.max_nodes} values (aliases unfolded)")
        if events > budget.max_events:
            raise YamlError(f"{what}: more than {budget.max_events} YAML events")
    return aliases


_HAS_C = hasattr(yaml, "CSafeLoader")
# libyaml's scanner, parser and composer when PyYAML was built with it (roughly ten times faster
# than PyYAML's own, in Python); construction stays in Python either way, with the rules below.
if TYPE_CHECKING or not _HAS_C:  # noqa: SIM108 - mypy takes only a plain assignment as a base class
    _Base = yaml.SafeLoader
else:
    _Base = yaml.CSafeLoader


def _measure(root: yaml.Node, budget: Budget, what: str) -> None:
    """Refuse a node graph whose alias-expanded size exceeds the budget, or that refers to itself."""
    sizes: dict[int, int] = {}
    for node, children in _postorder(root, what):
        size = 1 + sum(sizes[id(c)] for c in children)
        if size > budget.max_nodes:
            raise YamlError(f"{what}: expands to more than {budget.max_nodes} values (aliases unfolded)")
        sizes[id(node)] = size


def _postorder(root: yaml.Node, what: str) -> Iterator[tuple[yaml.Node, list[yaml.Node]]]:
    """Each distinct node once, after its children (iterative: depth is already bounded)."""
    done: set[int] = set()
    on_path: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, expanded = stack.pop()
        children = _children(node)
        if expanded:
            on_path.discard(id(node))
            done.add(id(node))
            yield node, children
            continue
        if id(node) in done:
            continue
        if id(node) in on_path:
            raise YamlError(f"{what}: an alias refers to the collection that contains it")
        on_path.add(id(node))
        stack.append((node, True))
        for child in children:
            if id(child) in on_path:
                raise YamlError(f"{what}: an alias refers to the collection that contains it")
            if id(child) not in done:
                stack.append((child, False))


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return []


class _Refused(Exception):
    """A value the loader will not construct (its message names the line, not the value)."""


class _Loader(_Base):
    """SafeLoader with the core schema only; timestamps are kept as text."""

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        if node.tag not in _CORE_TAGS:
            # The tag is the author's text (it may be secret data): say where it is, not what.
            raise _Refused(f"an unsupported YAML tag (only the core schema's){_where(node.start_mark)}")
        return super().construct_object(node, deep=deep)

    def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
        digits = len(str(node.value))
        if digits > 4000:
            raise _Refused(f"an integer of {digits} digits{_where(node.start_mark)}")
        value: int = super().construct_yaml_int(node)
        return value

    def construct_timestamp_text(self, node: yaml.ScalarNode) -> str:
        return str(self.construct_scalar(node))


# Timestamps resolve to plain strings: drop the implicit resolver, keep the explicit tag refused.
_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Loader.add_constructor("tag:yaml.org,2002:int", _Loader.construct_yaml_int)
_Loader.add_constructor("tag:yaml.org,2002:timestamp", _Loader.construct_timestamp_text)
