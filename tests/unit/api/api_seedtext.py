"""Pull YAML examples out of the seed documents (markdown fences, bare blocks, and seed 004's
indentation-stripped blocks), shared by the seed tests."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

SEEDS = Path(__file__).resolve().parents[4] / "shared" / "seeds"
FENCE = re.compile(r"^\s*```")
# Docs-rendering artefacts that are not YAML: Docusaurus `// highlight-start` markers and the
# `//` comments one Sveltos example puts between keys. Stripped before parsing (ADR 0011).
SLASH_COMMENT = re.compile(r"^\s*//")
YAMLISH = re.compile(r"^(- )?[A-Za-z_][\w.\-/]*:( .*)?$|^- |^\.\.\.$")


def fenced_blocks(text: str) -> list[str]:
    """Contents of ``` fences, dedented, with `//` lines and leading `$ command` lines removed."""
    blocks, cur, inside = [], [], False
    for line in text.splitlines():
        if FENCE.match(line):
            if inside:
                blocks.append(_clean(cur))
                cur = []
            inside = not inside
            continue
        if inside:
            cur.append(line)
    return blocks


def _clean(lines: list[str]) -> str:
    kept = [ln for ln in lines if not SLASH_COMMENT.match(ln)]
    return textwrap.dedent("\n".join(kept)) + "\n"


def bare_blocks(text: str) -> list[list[str]]:
    """Unfenced runs of lines that start at an `apiVersion:` line and continue while lines look like
    YAML (stopping at a blank line, `EOF` or prose). Returned as raw lines (seed 004 is unindented)."""
    out: list[list[str]] = []
    lines = text.splitlines()
    inside_fence = False
    i = 0
    while i < len(lines):
        line = lines[i]
        if FENCE.match(line):
            inside_fence = not inside_fence
        elif not inside_fence and line.startswith("apiVersion:"):
            block = []
            while i < len(lines) and lines[i].strip() and lines[i] != "EOF":
                if not (lines[i].startswith((" ", "\t")) or YAMLISH.match(lines[i])):
                    break
                block.append(lines[i])
                i += 1
            out.append(block)
            continue
        i += 1
    return out


def flatten(yaml_text: str) -> list[str]:
    """Seed 004's rendering of a YAML text: every line stripped, `...` elision lines dropped."""
    return [ln.strip() for ln in yaml_text.splitlines() if ln.strip() and ln.strip() != "..."]
