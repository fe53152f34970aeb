"""Does a cited test set a field? Read from the test's source, never taken on its name.

The source of a citation `path::function` is, all parsed with `ast`:

1. the function itself (decorators, parameters, body);
2. every module-level definition of the same file it names (constants, helper functions, fixtures
   of that file taken as parameters), and what those name in turn; the shared fixtures of conftest.py
   start servers and clusters and set no field, so they are not read;
3. every name it imports from another test module (`tests.*`, or a sibling helper such as
   `promotion_support`), followed the same way into that module;
4. the text of a data file under tests/ whose file name appears as a string in 1-3 (seed objects
   kept as YAML beside the tests).

Following stops after MAX_DEPTH hops, so a citation cannot borrow a whole support module.

A field is set by that source when its YAML/JSON name (the alias) is a key of a mapping whose
keys are all fields of the field's model (a dict literal, a YAML or JSON document inside a string
or data file, the keyword arguments of a call), a key assigned by subscript, an attribute assigned
to, or a key in a string YAML cannot read (`name:` at a line start or after `{`, `,` or `- `). The
Python attribute name counts as the alias does. Reading a field (`x.field`, `x["field"]` in an
assert) is not setting it.

A field of a nested model is set only under a field that leads to that model (`kind` of a PolicyRef
in a mapping under `policyRefs`); where the source does not show the enclosing field (a literal
built on its own, keywords), it must set such a field elsewhere or name the model's class (a unit
test building a ValidateHealth itself). So a common word such as `name` or `kind` does not pass
because it appears anywhere. The limits: a mapping whose keys fit two models reached under one
field name is counted for both, and setting a field is not asserting its effect (that stays the
cited test's job, read by a person).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[3]
TESTS = ROOT / "tests"
MAX_DEPTH = 4
MAX_NODES = 20_000
MAX_NESTING = 64
MAX_TEXT = 200_000
DATA_SUFFIXES = (".yaml", ".yml", ".json")


UNKNOWN = ""  # the parent of a key whose enclosing field the source does not show


Mapping = tuple[str, frozenset[str]]  # (parent, its keys)


@dataclass
class Source:
    """What a citation's source sets: mappings as (parent, keys), the parent being the key of the
    nearest enclosing mapping (UNKNOWN for keywords, assignments and a literal built on its own), and
    the strings that are not YAML or JSON, searched for keys with an UNKNOWN parent."""

    mappings: set[Mapping] = field(default_factory=set)
    texts: list[str] = field(default_factory=list)
    unparsed: list[str] = field(default_factory=list)
    names: set[str] = field(default_factory=set)
    attributes: set[str] = field(default_factory=set)

    def mentions(self, words: tuple[str, ...]) -> bool:
        """Every word is a name, attribute or whole string of the source (a command or function
        that sets a field for it: ("pause", "promotion") for `_cli(..., "pause", "promotion", name)`)."""
        return all(w in self.names or w in self.attributes or w in self.texts for w in words)

    def parents_of(self, alias: str, attribute: str, fields: frozenset[str] | None = None) -> set[str]:
        """The parents under which the source sets the field (UNKNOWN among them if unsure), in a
        mapping whose keys are all `fields` (the model's: a `labelSelector` beside `maxConcurrency`
        is a stage's, not a resource selector's)."""
        found = {
            parent
            for parent, keys in self.mappings
            if (alias in keys or attribute in keys) and (fields is None or keys <= fields)
        }
        key = re.compile(rf'(^|[{{,]|- )\s*"?{re.escape(alias)}"?\s*:', re.MULTILINE)
        if any(key.search(text) for text in self.unparsed):
            found.add(UNKNOWN)
        return found

    def sets(self, alias: str, attribute: str, fields: frozenset[str] | None = None) -> bool:
        return bool(self.parents_of(alias, attribute, fields))

    def add(self, parent: str, keys: set[str]) -> None:
        if keys:
            self.mappings.add((parent, frozenset(keys)))


def _record_literal(node: ast.AST, parent: str, source: Source) -> None:
    """(parent, key) of every string key of the literals in `node`, nested literals under their key."""
    if isinstance(node, ast.Dict):
        source.add(
            parent, {k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}
        )
        for k, v in zip(node.keys, node.values, strict=True):
            if isinstance(k, ast.Constant) and isinstance(k.value, str):
                _record_literal(v, k.value, source)
            else:  # **spread or a computed key: its values stay under this parent
                _record_literal(v, parent, source)
    elif isinstance(node, ast.List | ast.Tuple | ast.Set):
        for element in node.elts:
            _record_literal(element, parent, source)
    elif isinstance(node, ast.Assign) and _assigned_key(node.targets):
        _record_literal(node.value, _assigned_key(node.targets), source)  # doc["spec"]["policy"] = {...}
    else:
        for child in ast.iter_child_nodes(node):
            _record_literal(child, UNKNOWN, source)


def _assigned_key(targets: list[ast.expr]) -> str:
    last = targets[-1]
    if isinstance(last, ast.Subscript) and isinstance(last.slice, ast.Constant):
        return str(last.slice.value)
    return ""


def _record_data(value: object, parent: str, source: Source, budget: list[int], depth: int = 0) -> None:
    """Keys of parsed YAML/JSON under their parent; `budget` and MAX_NESTING bound the walk (a
    hostile test document's aliases, of themselves or of aliases, would otherwise never end)."""
    budget[0] -= 1
    if budget[0] < 0 or depth > MAX_NESTING:
        return
    if isinstance(value, dict):
        source.add(parent, {k for k in value if isinstance(k, str)})
        for k, v in value.items():
            if isinstance(k, str):
                _record_data(v, k, source, budget, depth + 1)
    elif isinstance(value, list):
        for element in value:
            _record_data(element, parent, source, budget, depth + 1)


def _record_text(text: str, source: Source) -> None:
    """A string holding YAML or JSON mappings is read as data; any other string is kept as text."""
    source.texts.append(text)
    if ":" not in text or len(text) > MAX_TEXT:
        return
    try:
        documents = list(yaml.safe_load_all(text))
    except (yaml.YAMLError, ValueError, RecursionError):  # tests hold malformed and hostile YAML
        source.unparsed.append(text)
        return
    if not any(isinstance(d, dict | list) for d in documents):
        source.unparsed.append(text)  # a sentence with a colon, or a template yaml cannot read
    budget = [MAX_NODES]
    for document in documents:
        _record_data(document, UNKNOWN, source, budget)


@cache
def _parsed(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"))


def _module_file(module: str, importer: Path) -> Path | None:
    parts = module.split(".")
    candidates = [
        ROOT.joinpath(*parts).with_suffix(".py"),
        importer.parent.joinpath(*parts).with_suffix(".py"),
    ]
    return next((c for c in candidates if c.is_file() and TESTS in c.parents), None)


@cache
def _definitions(path: Path, importing: frozenset[Path] = frozenset()) -> dict[str, tuple[Path, ast.AST]]:
    """Top-level names of a test module: its own definitions and what it imports from test modules."""
    found: dict[str, tuple[Path, ast.AST]] = {}
    for node in _parsed(path).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            found[node.name] = (path, node)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                for n in ast.walk(t):
                    if isinstance(n, ast.Name):
                        found[n.id] = (path, node)
        elif isinstance(node, ast.ImportFrom) and node.module:
            other = _module_file(node.module, path)
            if other is not None and other not in importing:
                theirs = _definitions(other, importing | {path})
                for alias in node.names:
                    if alias.name in theirs:
                        found[alias.asname or alias.name] = theirs[alias.name]
    return found


def _function(path: Path, name: str) -> ast.AST | None:
    return next(
        (
            n
            for n in ast.walk(_parsed(path))
            if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name == name
        ),
        None,
    )


def _collect(node: ast.AST, source: Source) -> set[str]:
    """Record what `node` sets into `source`; return the names it mentions (to follow)."""
    names: set[str] = set()
    _record_literal(node, UNKNOWN, source)
    for n in ast.walk(node):
        if isinstance(n, ast.Name):
            names.add(n.id)
        elif isinstance(n, ast.arg):
            names.add(n.arg)
        elif isinstance(n, ast.Attribute):
            source.attributes.add(n.attr)
        elif isinstance(n, ast.Call):
            source.add(UNKNOWN, {k.arg for k in n.keywords if k.arg})
        elif isinstance(n, ast.Constant) and isinstance(n.value, str):
            _record_text(n.value, source)
        elif isinstance(n, ast.Assign | ast.AugAssign | ast.AnnAssign):
            targets = n.targets if isinstance(n, ast.Assign) else [n.target]
            for t in targets:
                if isinstance(t, ast.Attribute):
                    source.add(UNKNOWN, {t.attr})
                elif isinstance(t, ast.Subscript) and isinstance(t.slice, ast.Constant):
                    source.add(UNKNOWN, {str(t.slice.value)})
    source.names.update(names)
    return names


def _data_files(texts: list[str]) -> list[str]:
    wanted = {t for t in texts if t.endswith(DATA_SUFFIXES) and "/" not in t and len(t) < 100}
    return [
        p.read_text(encoding="utf-8") for p in sorted(TESTS.rglob("*")) if p.name in wanted and p.is_file()
    ]


@cache
def source_of(reference: str) -> Source | None:
    """The source of a citation `path::function`, or None if the function is not there."""
    path_text, _, name = reference.partition("::")
    path = ROOT / path_text
    if not name or not path.is_file() or (start := _function(path, name)) is None:
        return None
    source, seen = Source(), {id(start)}
    frontier: list[tuple[Path, ast.AST]] = [(path, start)]
    for _ in range(MAX_DEPTH + 1):
        following: list[tuple[Path, ast.AST]] = []
        for where, node in frontier:
            scope = _definitions(where)
            for mentioned in _collect(node, source):
                target = scope.get(mentioned)
                if target is not None and id(target[1]) not in seen:
                    seen.add(id(target[1]))
                    following.append(target)
        frontier = following
    for text in _data_files(source.texts):
        _record_text(text, source)
    return source
