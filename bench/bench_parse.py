"""CPU the bounded loader spends on large content, and on the same content read again.

Run: .venv/bin/python bench/bench_parse.py
Prints CPU seconds for a ~1.2 MB YAML list (valid YAML, not Kubernetes objects: refused), first
read and second read, and for a ~1 MB list of ConfigMaps (accepted), first and second read.
"""

from __future__ import annotations

import contextlib
import time

from fleetwave.delivery import content


def _cpu(text: str, source: str) -> float:
    start = time.process_time()
    with contextlib.suppress(content.ContentError):
        content._documents(text, source)
    return time.process_time() - start


def main() -> None:
    not_objects = "\n".join(f"- {i}" for i in range(150_000))
    objects = "\n---\n".join(
        f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: c{i}, namespace: default}}\ndata: {{k: v{i}}}"
        for i in range(9_000)
    )
    for label, text in (("non-object list", not_objects), ("ConfigMaps", objects)):
        first, again = _cpu(text, f"ConfigMap ns/{label}"), _cpu(text, f"ConfigMap ns/{label}")
        print(f"{label:>16}: {len(text) / 1e6:.2f} MB  first read {first:.2f} s CPU  again {again:.3f} s CPU")


if __name__ == "__main__":
    main()
