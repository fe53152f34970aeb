"""Flux's real source-controller against a local fleet's management cluster, and a Git server for it.

The binaries and Flux's CRDs come from `tools/flux/build.sh` (built from the Go module proxy, or
`FLEETWAVE_FLUX_DIR`; ADR 0104). `start` installs the CRDs with kubectl's server-side apply, starts the
Git server (`python -m fleetwave.local.gitserver`, Git's own http-backend behind it) and
source-controller as detached processes (`processes.start`: own session, log file, marker in the
command line) and waits until both answer. source-controller watches every namespace, serves its
artifacts on a loopback port, and advertises that same address in `status.artifact.url`, so what
it stores is downloadable from this machine.

Attached to a local fleet (`attach`, for `fleetwave local up --with-flux`), its processes join the
fleet's state, so `fleet.down` stops them; a seeded repository `example` and a GitRepository
`flux-system/example` reading it are there to try; its addresses are kept in `<state>/flux/flux.json`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

from fleetwave.local import fleet, gitserver, processes, recipe
from fleetwave.local.processes import ProcessRecord

SOURCE_CONTROLLER, GIT_SERVER = "source-controller", "git-server"
NAMES = (SOURCE_CONTROLLER, GIT_SERVER)
START_TIMEOUT = 60.0
GROUP = "source.toolkit.fluxcd.io"
FLUX_NAMESPACE = "flux-system"
EXAMPLE = "example"
EXAMPLE_INTERVAL = "10s"
# What the seeded repository holds: a plain manifest under `manifests/`, the path a promotion names.
SEED: Mapping[str, str] = {
    "README.md": "Content that fleetwave delivers from Git: edit, commit, push.\n",
    "manifests/configmap.yaml": (
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: hello-from-git\n  namespace: default\n"
        "data:\n  greeting: hello from Git\n"
    ),
}


class FluxError(RuntimeError):
    """Flux's parts could not be built, installed or started; the message says why and what to do."""


@dataclass(frozen=True, slots=True)
class Flux:
    directory: str
    kubeconfig: str  # the cluster source-controller reconciles
    git_url: str  # http://127.0.0.1:<port>: repository <name> is <git_url>/<name>.git
    storage_url: str  # http://127.0.0.1:<port>: source-controller's artifacts
    health_url: str  # http://127.0.0.1:<port>: source-controller's /readyz and /healthz
    processes: list[ProcessRecord]

    @property
    def git_root(self) -> Path:
        return Path(self.directory) / "git"

    def repo_url(self, name: str) -> str:
        return f"{self.git_url}/{name}.git"

    def create_repo(self, name: str) -> str:
        """A bare repository `name` on the Git server (kept if it exists); returns its URL."""
        gitserver.create_repo(self.git_root, name)
        return self.repo_url(name)

    def push(self, name: str, tree: Path, *, branch: str = "main", message: str = "update") -> str:
        """Commit exactly `tree` on `branch` of repository `name` and push it; returns the sha."""
        return gitserver.push_tree(self.repo_url(name), tree, branch=branch, message=message)


def binaries_dir() -> Path:
    """The directory holding `source-controller`, `registry` and `crds/` (built once, then cached)."""
    override = os.environ.get("FLEETWAVE_FLUX_DIR")
    script = recipe.flux_builder()
    if script is None:
        if override and (Path(override) / SOURCE_CONTROLLER).is_file():
            return Path(override)
        raise FluxError(
            "cannot find tools/flux/build.sh (a checkout) or its packaged copy; set FLEETWAVE_FLUX_DIR "
            "to a directory holding source-controller, registry and crds/"
        )
    proc = subprocess.run(["bash", str(script)], stdout=subprocess.PIPE, stderr=None, text=True, check=False)
    if proc.returncode != 0 or not proc.stdout.strip():
        raise FluxError(
            f"building source-controller and the registry failed (exit {proc.returncode}); see above"
        )
    return Path(proc.stdout.strip().splitlines()[-1])


def kubectl(binary: str, kubeconfig: str, *args: str, stdin: str | None = None) -> str:
    proc = subprocess.run(
        [binary, "--kubeconfig", kubeconfig, *args], input=stdin, capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        raise FluxError(f"kubectl {' '.join(args[:2])} failed: {proc.stderr.strip()[-500:]}")
    return proc.stdout


def install_crds(kubectl_binary: str, kubeconfig: str, crd_dir: Path) -> None:
    """Apply Flux's source CRDs (server-side, so a later install by Flux itself takes them over
    cleanly) and wait until the API server serves them."""
    files = ["-f", str(crd_dir)]
    kubectl(kubectl_binary, kubeconfig, "apply", "--server-side", "--force-conflicts", *files)
    kubectl(kubectl_binary, kubeconfig, "wait", "--for=condition=Established", "--timeout=60s", *files)


def controller_argv(
    binary: Path, storage: Path, storage_port: int, health_port: int, metrics_port: int
) -> list[str]:
    """source-controller's command line: one process for the whole cluster, artifacts served and
    advertised on loopback (the URL in `status.artifact.url` is reachable from this machine)."""
    return [
        str(binary),
        f"--storage-path={storage}",
        f"--storage-addr=127.0.0.1:{storage_port}",
        f"--storage-adv-addr=127.0.0.1:{storage_port}",
        f"--health-addr=127.0.0.1:{health_port}",
        f"--metrics-addr=127.0.0.1:{metrics_port}",
        "--watch-all-namespaces=true",
        "--enable-leader-election=false",
        "--log-level=info",
        "--log-encoding=console",
    ]


def git_server_argv(root: Path, port: int) -> list[str]:
    return [
        sys.executable,
        "-m",
        "fleetwave.local.gitserver",
        "serve",
        "--root",
        str(root),
        "--port",
        str(port),
    ]


def start(
    directory: Path,
    *,
    kubeconfig: str,
    kubectl_binary: str,
    flux_dir: Path | None = None,
    marker: str | None = None,
) -> Flux:
    """Install Flux's CRDs on the cluster of `kubeconfig`, then start the Git server and
    source-controller in `directory` (created) and wait until both answer. `marker`: the string
    that identifies their processes as ours (default: the directory)."""
    bins = flux_dir or binaries_dir()
    directory = directory.resolve()
    for sub in ("git", "storage"):  # source-controller refuses a storage path that does not exist
        (directory / sub).mkdir(parents=True, exist_ok=True)
    install_crds(kubectl_binary, kubeconfig, bins / "crds")
    started = _launch(directory, bins, kubeconfig, marker or str(directory))
    try:
        _wait_ready(started)
    except BaseException:
        stop(started)
        raise
    return started


def _launch(directory: Path, bins: Path, kubeconfig: str, marker: str) -> Flux:
    git_port, storage_port, health_port, metrics_port = (processes.free_port() for _ in range(4))
    git = processes.start(
        GIT_SERVER,
        git_server_argv(directory / "git", git_port),
        log=directory / "git-server.log",
        marker=marker,
    )
    argv = controller_argv(
        bins / SOURCE_CONTROLLER, directory / "storage", storage_port, health_port, metrics_port
    )
    controller = processes.start(
        SOURCE_CONTROLLER,
        argv,
        log=directory / "source-controller.log",
        marker=marker,
        env={"KUBECONFIG": kubeconfig, "GOMAXPROCS": "1"},
    )
    return Flux(
        directory=str(directory),
        kubeconfig=kubeconfig,
        git_url=f"http://127.0.0.1:{git_port}",
        storage_url=f"http://127.0.0.1:{storage_port}",
        health_url=f"http://127.0.0.1:{health_port}",
        processes=[git, controller],
    )


def stop(flux: Flux) -> list[str]:
    """Stop the Git server and source-controller; returns the names that needed SIGKILL."""
    return processes.stop(flux.processes)


def is_running(flux: Flux) -> bool:
    return all(processes.is_ours(p) for p in flux.processes) and not _pending(flux)


def _pending(flux: Flux) -> list[str]:
    """What does not answer yet: source-controller's readiness and artifact server, the Git server."""
    checks: dict[str, Callable[[], bool]] = {
        f"{SOURCE_CONTROLLER} /readyz": lambda: _status(f"{flux.health_url}/readyz") == 200,
        # Its artifact server starts after the manager: any HTTP answer means it listens.
        f"{SOURCE_CONTROLLER} artifact server": lambda: _status(f"{flux.storage_url}/") is not None,
        GIT_SERVER: lambda: _status(f"{flux.git_url}/") is not None,
    }
    return [name for name, check in checks.items() if not check()]


def _status(url: str) -> int | None:
    """The HTTP status `url` answers with, or None when nothing answers."""
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return int(response.status)
    except urllib.error.HTTPError as e:
        e.close()
        return int(e.code)
    except OSError:
        return None


def _wait_ready(flux: Flux) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while pending := _pending(flux):
        for record in flux.processes:
            if not processes.is_ours(record):
                raise FluxError(f"{record.name} exited during start-up; see {record.log}")
        if time.monotonic() > deadline:
            raise FluxError(
                f"{' and '.join(pending)} not ready after {START_TIMEOUT:.0f}s; logs in {flux.directory}"
            )
        time.sleep(0.2)


# --- next to a local fleet --------------------------------------------------------------------------


def attached(state: fleet.FleetState) -> Flux | None:
    """The Flux parts started next to this fleet, if their record is there (running or not)."""
    path = Path(state.state_dir) / "flux" / "flux.json"
    try:
        raw = json.loads(path.read_text())
        return Flux(**{**raw, "processes": [ProcessRecord(**p) for p in raw["processes"]]})
    except (OSError, ValueError, KeyError, TypeError):
        return None


def attach(state: fleet.FleetState, *, flux_dir: Path | None = None) -> tuple[fleet.FleetState, Flux]:
    """source-controller on the fleet's management cluster and a Git server holding the seeded
    repository `example`, read by the GitRepository `flux-system/example`: the running ones, or
    fresh ones (a stopped or crashed set is cleaned up first). Their processes join the fleet's
    state, so `fleet.down` stops them."""
    found = attached(state)
    if found is not None and is_running(found):
        return state, found
    processes.stop([p for p in state.processes if p.name in NAMES])  # also those of a lost record
    management = state.cluster(fleet.MANAGEMENT)
    kubectl_binary = str(Path(state.bin_dir) / "kubectl")
    directory = Path(state.state_dir) / "flux"
    started = start(
        directory,
        kubeconfig=management.kubeconfig,
        kubectl_binary=kubectl_binary,
        flux_dir=flux_dir,
        marker=state.state_dir,
    )
    state = fleet.replace_processes(state, NAMES, started.processes)
    _save(started)
    seed(started, kubectl_binary)
    return state, started


def detach(state: fleet.FleetState) -> fleet.FleetState:
    """Stop the fleet's Flux parts, if any, and drop them from the fleet's state."""
    found = attached(state)
    if found is not None:
        stop(found)
        (Path(found.directory) / "flux.json").unlink(missing_ok=True)
    return fleet.replace_processes(state, NAMES, [])


def example_source(repo_url: str) -> str:
    """The GitRepository `flux-system/example` (with its namespace) reading `repo_url`'s main."""
    return (
        f"apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {FLUX_NAMESPACE}\n---\n"
        f"apiVersion: {GROUP}/v1\nkind: GitRepository\n"
        f"metadata:\n  name: {EXAMPLE}\n  namespace: {FLUX_NAMESPACE}\n"
        f"spec:\n  url: {repo_url}\n  interval: {EXAMPLE_INTERVAL}\n  ref:\n    branch: main\n"
    )


def seed(flux: Flux, kubectl_binary: str) -> str:
    """Push the example content (once: a repository that has it keeps its history) and apply the
    GitRepository reading it; wait until source-controller has stored that commit. Returns the
    artifact's revision (`main@sha1:...`)."""
    url = flux.create_repo(EXAMPLE)
    sha = gitserver.branch_head(url, "main") or _push_seed(flux)
    kubectl(kubectl_binary, flux.kubeconfig, "apply", "--server-side", "-f", "-", stdin=example_source(url))
    revision = f"main@sha1:{sha}"
    # The revision, not the Ready condition: a GitRepository left from an earlier fleet is Ready
    # with its old artifact until source-controller has read the new URL.
    kubectl(
        kubectl_binary,
        flux.kubeconfig,
        "wait",
        f"--for=jsonpath={{.status.artifact.revision}}={revision}",
        "--timeout=60s",
        *["-n", FLUX_NAMESPACE, f"gitrepository/{EXAMPLE}"],
    )
    return revision


def _push_seed(flux: Flux) -> str:
    with tempfile.TemporaryDirectory(prefix="fleetwave-seed-") as tmp:
        for name, text in SEED.items():
            (Path(tmp) / name).parent.mkdir(parents=True, exist_ok=True)
            (Path(tmp) / name).write_text(text)
        return flux.push(EXAMPLE, Path(tmp), message="example content")


def _save(flux: Flux) -> None:
    path = Path(flux.directory) / "flux.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(asdict(flux), indent=2))
    tmp.replace(path)
