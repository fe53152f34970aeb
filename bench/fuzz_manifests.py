"""Long fuzz run of the manifest codec: mutate the project's example manifests at random and count
inputs that end in anything but a parsed object or a precise ManifestError.

Run: .venv/bin/python bench/fuzz_manifests.py [--seconds 60] [--seed 1]
Reports inputs tried and each distinct escape (exception type, file, line) with its count.
"""

from __future__ import annotations

import argparse
import collections
import copy
import random
import time
import traceback
from pathlib import Path
from typing import Any

from fleetwave.api import codec, yamlsafe

ROOT = Path(__file__).resolve().parents[1]
SOURCES = [*sorted((ROOT / "examples").glob("*.yaml")), ROOT / "tests/unit/api/seed004_objects.yaml"]
VALUES: list[Any] = [
    *(0, -1, 5, 3, 1.5, True, None, "", "x", "10%", "-5m", "999999999999h", "a" * 300, "é" * 10),
    *([], {}, [1], [None], [{}], {"a": 1}, {"name": 3}, [[[[[]]]]]),
    *(10**50, 10**5000, -(10**4400), float("nan"), float("inf"), "2025-01-01T00:00:00Z", "\x00"),
    *({"configMapRefs": 3}, {"configMapRefs": [3]}, {"auto": 5}, {"manual": {"approved": "yes"}}),
    *({"matchLabels": {"a": 1}}, {"type": "X", "expression": 3}),
]


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(node, dict):
        for key, value in node.items():
            out += _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            out += _paths(value, (*prefix, i))
    return out


def _mutate(rnd: random.Random, doc: Any) -> Any:
    for _ in range(rnd.randint(1, 3)):
        path = rnd.choice(_paths(doc))
        value = copy.deepcopy(rnd.choice(VALUES))
        if not path:
            doc = value
            continue
        parent = doc
        for step in path[:-1]:
            parent = parent[step]
        parent[path[-1]] = value
    return doc


def _escape(doc: Any) -> tuple[str, str, int] | None:
    try:
        codec.parse_object(doc)
    except codec.ManifestError as e:
        return ("last-resort branch", str(e)[-60:], 0) if codec.UNREADABLE in str(e) else None
    except Exception as e:
        frame = traceback.extract_tb(e.__traceback__)[-1]
        return type(e).__name__, Path(frame.filename).name, frame.lineno or 0
    return None


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    docs = [
        d for f in SOURCES for d in yamlsafe.load_all(f.read_text()) if isinstance(d, dict) and "kind" in d
    ]
    rnd = random.Random(args.seed)
    escapes: collections.Counter[tuple[str, str, int]] = collections.Counter()
    tried, stop = 0, time.monotonic() + args.seconds
    while time.monotonic() < stop:
        tried += 1
        found = _escape(_mutate(rnd, copy.deepcopy(rnd.choice(docs))))
        if found is not None:
            escapes[found] += 1
    print(f"inputs tried: {tried}; distinct escapes: {len(escapes)}")
    for (kind, where, line), count in escapes.most_common():
        print(f"  {count:>7}  {kind}  {where}:{line}")


if __name__ == "__main__":
    main()
