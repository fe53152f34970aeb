"""helm's post-renderer: a profile's `patches` applied to a chart's rendered objects (ADR 0105).

helm runs it as `python -I <this file> PATCHES KUSTOMIZE` (`helm_flags`), with the rendered
manifests on stdin, and installs what it prints. The patching is the one plain content gets:
`Kustomizer.patch_text`, the pinned kustomize under `bounded.run` (no sockets, no environment,
rlimits, a deadline, an output cap). This process first puts itself under the same budgets and
network filter (`bounded.confine_this_process`), reads at most `MAX_INPUT_BYTES`, and parses
nothing of the chart's output itself: kustomize does, in its sandbox.

It is started from this file's path, not with `-m`: `-I` keeps the environment, the working
directory and user site-packages out of its imports, and the package root is put first on its path
so the post-renderer is the controller's own code, whichever install of fleetwave the interpreter
would otherwise find. A failure is one line on stderr (helm puts it in its error) and exit code 2;
its text is kustomize's (as for plain content) or fleetwave's, never the chart's output.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

PATCHES_FILE = "patches.json"
MAX_INPUT_BYTES = 16 * 1024 * 1024  # helm keeps a release in one Secret of at most 1 MiB, compressed
FAILED = 2
_PACKAGE_ROOT = Path(__file__).resolve().parents[2]  # the directory holding `fleetwave`


def helm_flags(patches_file: str, kustomize: str) -> list[str]:
    """`helm upgrade` flags that make helm post-render with `patches_file` (each argument as
    `--post-renderer-args=VALUE`, so none can be read as a flag of helm's)."""
    args = ["-I", str(Path(__file__).resolve()), patches_file, kustomize]
    return ["--post-renderer", sys.executable, *(f"--post-renderer-args={a}" for a in args)]


def patches_file(patches: Sequence[Mapping[str, Any]]) -> bytes:
    """The file `main` reads: the patches ({"patch", "target"}) as the controller resolved them."""
    return json.dumps([{k: p[k] for k in ("patch", "target") if k in p} for p in patches]).encode()


def _read_input() -> str:
    data = sys.stdin.buffer.read(MAX_INPUT_BYTES + 1)
    if len(data) > MAX_INPUT_BYTES:
        raise ValueError(f"the chart's rendered output passed {MAX_INPUT_BYTES} bytes")
    return data.decode("utf-8", errors="replace")


async def _patched(manifests: str, patches: list[dict[str, Any]], kustomize: str) -> str:
    from fleetwave.delivery.kustomize import Kustomizer  # noqa: PLC0415 - after the path is set

    if not manifests.strip():
        return manifests  # nothing but hooks: kustomize has nothing to patch
    return await Kustomizer(binary=kustomize).patch_text(manifests, patches)


def run(argv: Sequence[str]) -> int:
    """Post-render stdin to stdout with the patches file `argv[0]` and kustomize `argv[1]`."""
    from fleetwave.delivery import bounded  # noqa: PLC0415 - after the path is set
    from fleetwave.delivery.kustomize import KustomizeError  # noqa: PLC0415

    limits = bounded.Limits()
    try:
        bounded.confine_this_process(limits, "the post-renderer")
        signal.alarm(int(limits.wall_seconds) + 10)  # its own deadline: SIGALRM ends it
        patches = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
        out = asyncio.run(_patched(_read_input(), patches, argv[1]))
    except (bounded.ToolError, KustomizeError, ValueError, OSError) as e:
        sys.stderr.write(f"post-rendering with patches failed: {' '.join(str(e).split())[:500]}\n")
        return FAILED
    sys.stdout.write(out)
    return 0


def main() -> None:
    if len(sys.argv) != 3:
        sys.stderr.write("usage: postrender.py PATCHES_FILE KUSTOMIZE\n")
        sys.exit(FAILED)
    sys.path.insert(0, str(_PACKAGE_ROOT))
    sys.exit(run(sys.argv[1:]))


if __name__ == "__main__":
    main()
