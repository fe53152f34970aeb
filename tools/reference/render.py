"""Regenerate the API reference (one page per kind) from the API models:
`.venv/bin/python tools/reference/render.py [DIR]` (default docs/reference)."""

from __future__ import annotations

import sys
from pathlib import Path

from fleetwave.api import reference

if __name__ == "__main__":
    target = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/reference")
    target.mkdir(parents=True, exist_ok=True)
    pages = reference.render_pages()
    for name, text in pages.items():
        (target / name).write_text(text, encoding="utf-8")
    print(f"wrote {len(pages)} pages under {target}", file=sys.stderr)
