"""Find (building once if needed) the control-plane binaries the local fleet runs.

The build itself is `tools/binaries/build.sh` (wrapper Go modules pinned in the repository and copied
into the wheel, a cache outside both keyed by version). `FLEETWAVE_BIN_DIR` points at pre-built
binaries instead.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from fleetwave.local import recipe

NAMES = (
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kubectl",
    "etcd",
    "helm",
    "kwok",
    "kustomize",
    "fleetwave-render",
)


class BinariesError(RuntimeError):
    """The binaries could not be found or built; the message says what to do."""


@dataclass(frozen=True, slots=True)
class Binaries:
    directory: Path

    def path(self, name: str) -> str:
        return str(self.directory / name)


def _build_script() -> Path | None:
    where = recipe.directory()
    return None if where is None else where / "build.sh"


def ensure() -> Binaries:
    """Return working binaries, building them on first use (minutes cold, seconds warm)."""
    override = os.environ.get("FLEETWAVE_BIN_DIR")
    script = _build_script()
    if script is None:
        if override and all((Path(override) / n).is_file() for n in NAMES):
            return Binaries(Path(override))
        raise BinariesError(
            "cannot find the binaries' build recipe (tools/binaries/build.sh in a checkout, or "
            "fleetwave/_recipe in the package); set FLEETWAVE_BIN_DIR to a directory holding "
            f"{', '.join(NAMES)}"
        )
    proc = subprocess.run(["bash", str(script)], stdout=subprocess.PIPE, stderr=None, text=True, check=False)
    if proc.returncode != 0:
        raise BinariesError(
            f"building the control-plane binaries failed (exit {proc.returncode}); see the messages above"
        )
    return Binaries(Path(proc.stdout.strip().splitlines()[-1]))
