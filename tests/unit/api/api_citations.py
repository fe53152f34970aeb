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

A field is set by that source when its YAML/JSON name (the alias) appears as a dict key, a key
assigned by subscript, a YAML or JSON key inside a string (`name:` at a line start or after `{`,
`,` or `- `; `"name":`), or when its alias or Python attribute name is a keyword argument or an
attribute assigned to. Reading a field (`x.field`, `x["field"]` in an assert) is not setting it.

A field of a nested model is only set where the source also sets a field that leads to that model
(`kind` of a PolicyRef counts only beside `policyRefs`) or names the model's class (a unit test
building a ValidateHealth itself), so a common word such as `name` or `kind` does not pass because it
appears anywhere.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
TESTS = ROOT / "tests"
MAX_DEPTH = 4
DATA_SUFFIXES = (".yaml", ".yml", ".json")


@dataclass
class Source:
    """What a citation's source sets: keys (dict keys, keywords, assigned names) and text (strings
    and data files, searched for YAML/JSON keys)."""

    keys: set[str] = field(default_factory=set)
    texts: list[str] = field(default_factory=list)
    names: set[str] = field(default_factory=set)
    attributes: set[str] = field(default_factory=set)

    def mentions(self, words: tuple[str, ...]) -> bool:
        """Every word is a name, attribute or whole string of the source (a command or function
        that sets a field for it: ("pause", "promotion") for `_cli(..., "pause", "promotion", name)`)."""
        return all(w in self.names or w in self.attributes or w in self.texts for w in words)

    def sets(self, alias: str, attribute: str) -> bool:
        if alias in self.keys or attribute in self.keys:
            return True
        key = re.compile(rf'(^|[{{,]|- )\s*"?{re.escape(alias)}"?\s*:', re.MULTILINE)
        return any(key.search(text) for text in self.texts)


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
    for n in ast.walk(node):
        if isinstance(n, ast.Name):
            names.add(n.id)
        elif isinstance(n, ast.arg):
            names.add(n.arg)
        elif isinstance(n, ast.Dict):
            source.keys.update(
                k.value for k in n.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)
            )
        elif isinstance(n, ast.Attribute):
            source.attributes.add(n.attr)
        elif isinstance(n, ast.keyword) and n.arg:
            source.keys.add(n.arg)
        elif isinstance(n, ast.Constant) and isinstance(n.value, str):
            source.texts.append(n.value)
        elif isinstance(n, ast.Assign | ast.AugAssign | ast.AnnAssign):
            targets = n.targets if isinstance(n, ast.Assign) else [n.target]
            for t in targets:
                if isinstance(t, ast.Attribute):
                    source.keys.add(t.attr)
                elif isinstance(t, ast.Subscript) and isinstance(t.slice, ast.Constant):
                    source.keys.add(str(t.slice.value))
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
    source.texts.extend(_data_files(source.texts))
    return source
