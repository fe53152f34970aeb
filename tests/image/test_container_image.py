"""The controller image, built here with buildah from the project's own Containerfile and scripts:
its configuration is what the chart expects (non-root, entrypoint, labels) and it runs fleetwave and
the pinned helm."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fleetwave import __version__

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "tools" / "image" / "build.sh"


def _run(*argv: str, timeout: float = 900) -> str:
    env = {**os.environ, "BUILDAH_ISOLATION": "chroot"}
    proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, check=False, env=env)
    assert proc.returncode == 0, f"{' '.join(argv)}: {proc.stderr[-3000:]}"
    return proc.stdout


@pytest.fixture(scope="module")
def image() -> str:
    reference = _run("bash", str(BUILD)).strip().splitlines()[-1]
    assert reference == f"localhost/fleetwave:{__version__}"
    return reference


@pytest.fixture(scope="module")
def storage() -> list[str]:
    return _run("bash", str(BUILD), "--storage").split()


def _config(image: str, storage: list[str]) -> dict[str, Any]:
    flags = dict(zip(storage[::2], storage[1::2], strict=True))
    where = f"containers-storage:[vfs@{flags['--root']}+{flags['--runroot']}]{image}"
    inspected: dict[str, Any] = json.loads(_run("skopeo", "inspect", "--config", where))
    return dict(inspected["config"])


def test_the_image_runs_as_non_root_with_fleetwave_as_entrypoint(image: str, storage: list[str]) -> None:
    config = _config(image, storage)
    assert config["User"] == "65532:65532"
    assert config["Entrypoint"] == ["fleetwave"]
    assert config["Cmd"] == ["controller", "run"]
    labels = config["Labels"]
    assert labels["org.opencontainers.image.version"] == __version__
    assert labels["org.opencontainers.image.licenses"] == "Apache-2.0"
    assert labels["org.opencontainers.image.title"] == "fleetwave"
    env = dict(e.split("=", 1) for e in config["Env"])
    assert env["HOME"] == "/tmp"  # the chart mounts /tmp; the root filesystem is read-only
    assert env["PATH"].startswith("/opt/fleetwave/bin:")


@pytest.fixture
def container(image: str, storage: list[str]) -> Iterator[str]:
    name = _run("buildah", *storage, "from", "-q", image).strip()
    yield name
    _run("buildah", *storage, "rm", name)


def _pins() -> dict[str, str]:
    text = (ROOT / "tools" / "binaries" / "versions.env").read_text()
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line and not line.startswith("#"))


def test_fleetwave_and_the_pinned_helm_run_inside_as_the_image_user(
    container: str, storage: list[str]
) -> None:
    inside = ("buildah", *storage, "run", container, "--")
    data = json.loads(_run(*inside, "fleetwave", "version", "-o", "json"))
    assert data["version"] == __version__
    assert data["binaries"]["helm"] == _pins()["HELM_VERSION"]
    assert _run(*inside, "helm", "version", "--template", "{{.Version}}").strip() == _pins()["HELM_VERSION"]
    assert _run(*inside, "id", "-u").strip() == "65532"
    # The controller's native dependencies load on the image's own Python (Lua, CEL, TLS).
    imports = (
        "import lupa, celpy, cryptography, fleetwave.controllers.app; print(lupa.LuaRuntime().eval('1+1'))"
    )
    assert _run(*inside, "python3", "-c", imports).strip() == "2"
    # Nothing of the image belongs to its user: it can write only where the chart mounts /tmp.
    refused = subprocess.run(
        [*inside, "touch", "/opt/fleetwave/x"], capture_output=True, text=True, timeout=120, check=False
    )
    assert refused.returncode != 0
