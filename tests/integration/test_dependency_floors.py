"""The dependency floors in pyproject.toml work: a virtualenv holding exactly the lowest version that
every runtime dependency allows runs the CLI and the unit tests that exercise those dependencies.

The floor venv is built once (pip from the package index, under a minute) and cached outside the
repository under ~/.cache/fleetwave/floors/<hash of the pins and the Python version>/, so a warm run
costs only the commands and the unit tests. fleetwave itself comes from this checkout's src on
PYTHONPATH rather than an install, so one cached venv serves every checkout on the machine."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from fleetwave.promapi import guards

ROOT = Path(__file__).resolve().parents[2]
CACHE = Path.home() / ".cache" / "fleetwave" / "floors"
# The test tools: current versions, they are not fleetwave's dependencies.
TEST_TOOLS = ("pytest", "pytest-asyncio", "hypothesis")
# Written last, holding `pip freeze`: a venv without it is a build that was interrupted.
COMPLETE = "fleetwave-floors-complete"
# The unit tests that exercise the dependencies: pydantic (api), croniter (core), typer and rich (cli),
# lupa and cel-python (health), aiohttp, prometheus-client and uvloop (runtime), lightkube, httpx2 and
# httpcore2 (kube). test_core_properties is left out: three minutes of hypothesis over pure core logic,
# whose croniter use test_core_planning covers.
UNIT_TESTS = ("api", "core", "cli", "health", "runtime", "kube")
SKIPPED = "tests/unit/core/test_core_properties.py"
# docs/plan.md's example, on the repository's example promotion and fleet.
PLAN = "plan -f examples/promotion-kyverno.yaml --fleet examples/fleet.yaml --approve-at staging=+10m"
INSTALL_SECONDS = 900
RUN_SECONDS = 600


def floor_pins() -> list[str]:
    """`name==floor` for every runtime dependency in pyproject.toml, with its environment marker."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    pins = []
    for text in project["dependencies"]:
        req = Requirement(text)
        floors = [s.version for s in req.specifier if s.operator == ">="]
        assert len(floors) == 1, f"{text!r}: a dependency needs exactly one >= floor"
        extras = f"[{','.join(sorted(req.extras))}]" if req.extras else ""
        marker = f"; {req.marker}" if req.marker else ""
        pins.append(f"{req.name}{extras}=={floors[0]}{marker}")
    return pins


def base_python() -> Path:
    """The interpreter this test's venv was made from: the floor venv gets the same Python."""
    v = sys.version_info
    return Path(sys.base_prefix) / "bin" / f"python{v.major}.{v.minor}"


def venv_path(pins: list[str]) -> Path:
    key = {"python": list(sys.version_info[:3]), "pins": pins, "tools": TEST_TOOLS}
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    return CACHE / digest


def run(argv: list[str], timeout: float, env: dict[str, str] | None = None) -> str:
    """Run `argv` in the checkout; on failure the assertion carries what it printed."""
    done = subprocess.run(
        argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    output = f"$ {' '.join(argv)}\n{done.stdout}\n{done.stderr}"
    # The end of a long pytest or pip report is where the failures are summed up.
    assert done.returncode == 0, f"exit {done.returncode}:\n{output[-20000:]}"
    return done.stdout


def build(venv: Path, pins: list[str]) -> None:
    """Make the venv unless a complete one is cached; the marker is written last, atomically."""
    if (venv / COMPLETE).is_file():
        return
    shutil.rmtree(venv, ignore_errors=True)  # an interrupted build is started afresh
    run([str(base_python()), "-m", "venv", str(venv)], timeout=120)
    python = str(venv / "bin" / "python")
    install = [python, "-m", "pip", "install", "-q", "--disable-pip-version-check", *pins, *TEST_TOOLS]
    run(install, INSTALL_SECONDS)
    frozen = run([python, "-m", "pip", "freeze"], timeout=120)
    partial = venv / f"{COMPLETE}.partial"
    partial.write_text(frozen, encoding="utf-8")
    partial.replace(venv / COMPLETE)


def floor_env(venv: Path) -> dict[str, str]:
    """The floor venv first on PATH and this checkout's src on PYTHONPATH; without the integration
    session's loopback opt-in, which unit tests run without."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", guards.ALLOW_LOOPBACK_ENV)
    }
    env["PATH"] = f"{venv / 'bin'}:{env.get('PATH', '/usr/bin:/bin')}"
    env["PYTHONPATH"] = str(ROOT / "src")
    return env


@pytest.fixture(scope="module")
def floor_venv() -> Path:
    pins = floor_pins()
    venv = venv_path(pins)
    venv.parent.mkdir(parents=True, exist_ok=True)
    # Checkouts on one machine share the cache: a second run waits for the first one's build.
    with open(venv.with_suffix(".lock"), "w", encoding="utf-8") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        build(venv, pins)
    return venv


def test_every_runtime_dependency_has_one_floor() -> None:
    assert floor_pins()


def test_the_venv_holds_exactly_the_floors(floor_venv: Path) -> None:
    """The cached venv is what its name says: every floor installed, none resolved to another version."""
    installed = {}
    for line in (floor_venv / COMPLETE).read_text(encoding="utf-8").splitlines():
        name, version = line.split("==", 1)
        installed[canonicalize_name(name)] = Version(version)
    for pin in floor_pins():
        req = Requirement(pin)
        if req.marker is None or req.marker.evaluate():
            (floor,) = (Version(s.version) for s in req.specifier)
            assert installed.get(canonicalize_name(req.name)) == floor, pin


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--help"], "Exit codes"),
        (["version"], "fleetwave.io/v1alpha1"),
        (PLAN.split(), "Succeeded at"),
    ],
    ids=["help", "version", "plan"],
)
def test_the_cli_runs_on_the_floors(floor_venv: Path, argv: list[str], says: str) -> None:
    # `python -m fleetwave` is the console script's main() without installing this checkout.
    out = run([str(floor_venv / "bin" / "python"), "-m", "fleetwave", *argv], 60, floor_env(floor_venv))
    assert says in out, out


def test_the_unit_tests_of_the_dependencies_pass_on_the_floors(floor_venv: Path) -> None:
    argv = [str(floor_venv / "bin" / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    argv += [f"tests/unit/{d}" for d in UNIT_TESTS] + ["--ignore", SKIPPED]
    run(argv, RUN_SECONDS, floor_env(floor_venv))
