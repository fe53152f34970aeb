"""The built wheel, installed into a fresh virtualenv away from the checkout, is a working fleetwave:
`version` reads the recipe the wheel carries, the controller says what to install when helm is
missing, `kubectl fleetwave` honours kubectl's --kubeconfig and --context, and the demo runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from lightkube import Client

from fleetwave import __version__
from fleetwave.kube import kinds
from fleetwave.local import binaries, fleet
from fleetwave.mgmt import install, manifests

ROOT = Path(__file__).resolve().parents[2]


class Installed:
    def __init__(self, venv: Path, cwd: Path) -> None:
        self.bin, self.cwd = venv / "bin", cwd

    def run(
        self, *argv: str, env: dict[str, str] | None = None, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        base = {
            k: v for k, v in os.environ.items() if k not in ("FLEETWAVE_BIN_DIR", "KUBECONFIG", "VIRTUAL_ENV")
        }
        # Only the fresh venv and the system's own directories: no checkout venv, no Go, no helm.
        base["PATH"] = f"{self.bin}:/usr/bin:/bin"
        return subprocess.run(
            list(argv),
            cwd=self.cwd,
            env={**base, **(env or {})},
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    work = tmp_path_factory.mktemp("wheel")
    built = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--disable-pip-version-check",
            "-w",
            str(work),
            str(ROOT),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = work.glob("fleetwave-*.whl")
    assert wheel.name.startswith(f"fleetwave-{__version__}-")
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    pip = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-m",
            "pip",
            "install",
            "-q",
            "--disable-pip-version-check",
            str(wheel),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert pip.returncode == 0, pip.stderr
    cwd = work / "elsewhere"
    cwd.mkdir()
    return Installed(venv, cwd)


def test_the_installed_package_is_not_the_checkout_and_reads_its_own_recipe(installed: Installed) -> None:
    where = installed.run("python", "-c", "import fleetwave, sys; print(fleetwave.__file__)")
    assert where.returncode == 0, where.stderr
    assert not where.stdout.strip().startswith(str(ROOT))
    result = installed.run("fleetwave", "version", "-o", "json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["version"] == __version__
    pins = dict(
        line.split("=", 1)
        for line in (ROOT / "tools/binaries/versions.env").read_text().splitlines()
        if "=" in line
    )
    assert data["binaries"]["helm"] == pins["HELM_VERSION"]
    assert data["binaries"]["kubernetes"] == pins["KUBERNETES_VERSION"]
    # The web UI's page ships in the package (`fleetwave ui` works offline, from anywhere).
    page = installed.run("python", "-c", "import fleetwave.ux.webapp as w; print(w.page('x'))")
    assert page.returncode == 0, page.stderr
    assert '<meta name="fleetwave-token" content="x">' in page.stdout


def test_without_helm_or_binaries_the_commands_say_what_to_install(
    installed: Installed, local_fleet: fleet.FleetState
) -> None:
    kubeconfig = local_fleet.cluster(fleet.MANAGEMENT).kubeconfig
    controller = installed.run("fleetwave", "controller", "run", "--kubeconfig", kubeconfig)
    assert controller.returncode == 1
    assert "no helm binary on PATH: install helm v3" in controller.stderr
    assert "Traceback" not in controller.stderr
    # A PATH without Go (wherever the machine has it) and a HOME without the binaries' cache.
    no_go = _system_path_without(installed.cwd / "no-go", {"go", "gofmt"})
    local = installed.run(
        "fleetwave",
        "local",
        "up",
        "--members",
        "1",
        env={"HOME": str(installed.cwd), "PATH": f"{installed.bin}:{no_go}"},
    )
    assert local.returncode != 0
    text = local.stdout + local.stderr
    assert "Go is not installed" in text
    assert "FLEETWAVE_BIN_DIR" in text
    assert "Traceback" not in text


def _system_path_without(directory: Path, names: set[str]) -> Path:
    """One directory linking every command of /usr/bin and /bin except `names`."""
    directory.mkdir(exist_ok=True)
    for source in (Path("/usr/bin"), Path("/bin")):
        for entry in source.iterdir():
            link = directory / entry.name
            if entry.name not in names and not link.exists():
                link.symlink_to(entry)
    return directory


def _two_contexts(local_fleet: fleet.FleetState, path: Path) -> Path:
    """The management kubeconfig with a second context, `fleet`, and a current-context that points
    nowhere: only a client that honours --context reaches the cluster."""
    doc: dict[str, Any] = yaml.safe_load(Path(local_fleet.cluster(fleet.MANAGEMENT).kubeconfig).read_text())
    (context,) = doc["contexts"]
    (cluster,) = doc["clusters"]
    dead = {"name": "nowhere", "cluster": {**cluster["cluster"], "server": "https://127.0.0.1:1"}}
    doc["clusters"].append(dead)
    doc["contexts"] = [
        {"name": "fleet", "context": context["context"]},
        {"name": "nowhere", "context": {**context["context"], "cluster": "nowhere"}},
    ]
    doc["current-context"] = "nowhere"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_kubectl_fleetwave_honours_kubectls_kubeconfig_and_context(
    installed: Installed,
    local_fleet: fleet.FleetState,
    management: Client,
    bins: binaries.Binaries,
    tmp_path: Path,
) -> None:
    kubeconfig = str(_two_contexts(local_fleet, tmp_path / "kubeconfig"))
    name = f"plugin-{uuid.uuid4().hex[:6]}"
    promotion = {
        "apiVersion": "fleetwave.io/v1alpha1",
        "kind": "ClusterPromotion",
        "metadata": {"name": name},
        "spec": {
            "profileSpec": {"policyRefs": [{"kind": "ConfigMap", "name": "absent", "namespace": "default"}]},
            "stages": [{"name": "only", "clusterSelector": {"matchLabels": {"env": "none"}}}],
        },
    }
    install.install(management)  # the CRDs, as other modules do at their start (idempotent)
    manifests.apply(management, [promotion])
    # Right away: a just-installed CRD's storage answers 429 for a moment, which status waits out.
    kubectl = bins.path("kubectl")
    try:
        plugins = installed.run(kubectl, "plugin", "list")
        assert f"{installed.bin}/kubectl-fleetwave" in plugins.stdout, plugins.stdout + plugins.stderr
        shown = installed.run(
            kubectl,
            "fleetwave",
            "status",
            "promotion",
            name,
            "--kubeconfig",
            kubeconfig,
            "--context",
            "fleet",
            "-n",
            "default",
            "-o",
            "json",
        )
        assert shown.returncode == 0, shown.stderr
        assert json.loads(shown.stdout)["name"] == name
        # Without --context the kubeconfig's current one is used: it points nowhere.
        unreachable = installed.run(
            kubectl, "fleetwave", "status", "promotion", name, f"--kubeconfig={kubeconfig}"
        )
        assert unreachable.returncode != 0
        missing = installed.run(
            kubectl,
            "fleetwave",
            "status",
            "promotion",
            "no-such",
            "--kubeconfig",
            kubeconfig,
            "--context=fleet",
        )
        assert missing.returncode == 1
        assert "ClusterPromotion no-such not found" in missing.stderr
        helped = installed.run(kubectl, "fleetwave", "--help")
        assert "kubectl fleetwave" in helped.stdout
    finally:
        management.delete(kinds.resource("ClusterPromotion"), name)


def test_the_demo_runs_from_the_installed_package(
    installed: Installed, bins: binaries.Binaries, tmp_path: Path
) -> None:
    state = tmp_path / "demo-fleet"
    result = installed.run(
        "fleetwave",
        "demo",
        "--state-dir",
        str(state),
        env={"FLEETWAVE_BIN_DIR": str(bins.directory), "COLUMNS": "160"},
        timeout=900,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    assert "the rollout went through every stage" in result.stdout
    assert result.stdout.count("1.1.0") >= 3  # every member runs the upgraded chart
    assert "local fleet stopped" in result.stdout
