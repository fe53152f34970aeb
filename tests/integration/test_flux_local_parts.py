"""Flux's real source-controller on the local fleet: GitRepository and OCIRepository artifacts served
from a Git server and an OCI registry on loopback, and `fleetwave local up --with-flux` (ADR 0104).
This is the ground the controller's Flux sources stand on: what `status.artifact` says is what the
URL serves, and a push is a new revision within the interval."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from flux_support import GIT, INTERVAL, OCI, artifact, files, served, source_object, write_tree
from lightkube import Client
from typer.testing import CliRunner

from fleetwave.cli import app
from fleetwave.kube import client as kubeclient
from fleetwave.local import binaries, fleet, gitserver, oci, processes
from fleetwave.local import flux as local_flux
from fleetwave.local import registry as local_registry


def test_a_git_repository_serves_the_pushed_tree_and_a_push_is_a_new_revision(
    flux: local_flux.Flux, management: Client, namespace: str, tmp_path: Path
) -> None:
    url = flux.create_repo(f"content-{namespace}")
    write_tree(tmp_path, {"manifests/a.yaml": "kind: A\n", "manifests/b.yaml": "kind: B\n"})
    first = flux.push(f"content-{namespace}", tmp_path, message="v1")
    spec = {"url": url, "interval": INTERVAL, "ref": {"branch": "main"}}
    with source_object(management, GIT, "content", namespace, spec):
        got = artifact(management, GIT, "content", namespace, f"main@sha1:{first}")
        assert got["url"].startswith(f"{flux.storage_url}/gitrepository/{namespace}/content/")
        assert files(served(got)) == {
            "manifests/a.yaml": "kind: A\n",
            "manifests/b.yaml": "kind: B\n",
        }

        (tmp_path / "manifests/b.yaml").unlink()
        write_tree(tmp_path, {"manifests/a.yaml": "kind: A2\n"})
        second = flux.push(f"content-{namespace}", tmp_path, message="v2")
        pushed = time.monotonic()
        got = artifact(management, GIT, "content", namespace, f"main@sha1:{second}", timeout=20)
        # Measured p50 0.5 s, max 1.1 s over 10 pushes at 1s; a loaded machine gets some slack.
        assert time.monotonic() - pushed < 10
        assert files(served(got)) == {"manifests/a.yaml": "kind: A2\n"}


def test_an_oci_repository_serves_an_artifact_pushed_to_the_local_registry(
    flux: local_flux.Flux,
    oci_registry: local_registry.Registry,
    management: Client,
    namespace: str,
    tmp_path: Path,
) -> None:
    write_tree(tmp_path, {"manifests/c.yaml": "kind: C\n"})
    digest = oci.push_oci_artifact(oci_registry.url, f"{namespace}/content", "v1", tmp_path)
    spec = {
        "url": f"oci://{oci_registry.host}/{namespace}/content",
        "ref": {"tag": "v1"},
        "insecure": True,  # the registry speaks plain HTTP on loopback
        "interval": INTERVAL,
    }
    with source_object(management, OCI, "content", namespace, spec):
        got = artifact(management, OCI, "content", namespace, f"v1@{digest}")
        assert files(served(got)) == {"manifests/c.yaml": "kind: C\n"}


def test_local_up_with_flux_seeds_a_git_source_and_down_stops_everything(
    tmp_path: Path, bins: binaries.Binaries, flux_dir: Path
) -> None:
    runner = CliRunner(env={"FLEETWAVE_BIN_DIR": str(bins.directory), "FLEETWAVE_FLUX_DIR": str(flux_dir)})
    state_dir = tmp_path / "fleet"
    where = ["--state-dir", str(state_dir)]
    try:
        up = runner.invoke(
            app, ["local", "up", "--members", "1", "--full-members", "0", "--with-flux", *where]
        )
        assert up.exit_code == 0, up.output
        state = fleet.load(state_dir)
        assert state is not None
        found = local_flux.attached(state)
        assert found is not None
        assert local_flux.is_running(found)
        assert {p.name for p in found.processes} <= {p.name for p in state.processes}
        example = found.repo_url(local_flux.EXAMPLE)
        assert f"git clone {example}" in up.output
        _check_example(state, found, tmp_path / "clone")
        status = runner.invoke(app, ["local", "status", *where])
        assert status.exit_code == 0, status.output
        assert f"flux: git {example}" in status.output
    finally:
        down = runner.invoke(app, ["local", "down", *where])
    assert down.exit_code == 0, down.output
    assert "SIGKILL" not in down.output  # the Git server and source-controller stop on SIGTERM
    assert not any(processes.is_ours(p) for p in state.processes)
    assert not state_dir.exists()


def _check_example(state: fleet.FleetState, found: local_flux.Flux, clone: Path) -> None:
    """The seeded repository clones with plain git, and the example GitRepository serves its head."""
    example = found.repo_url(local_flux.EXAMPLE)
    env = gitserver.isolated_env(clone.parent)
    subprocess.run(["git", "clone", "-q", example, str(clone)], env=env, check=True, capture_output=True)
    assert (clone / "manifests/configmap.yaml").read_text() == local_flux.SEED["manifests/configmap.yaml"]
    head = gitserver.branch_head(example, "main")
    client = kubeclient.client(kubeclient.config_from_file(state.cluster(fleet.MANAGEMENT).kubeconfig))
    try:
        got = artifact(client, GIT, local_flux.EXAMPLE, local_flux.FLUX_NAMESPACE, f"main@sha1:{head}")
    finally:
        client.close()
    assert files(served(got)) == dict(local_flux.SEED)
