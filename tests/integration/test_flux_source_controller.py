"""Flux's real source-controller on the local fleet: GitRepository and OCIRepository artifacts served
from a Git server and an OCI registry on loopback, and `fleetwave local up --with-flux` (ADR 0104).
This is the ground the controller's Flux sources stand on: what `status.artifact` says is what the
URL serves, and a push is a new revision within the interval."""

from __future__ import annotations

import hashlib
import io
import subprocess
import tarfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from lightkube import ApiError, Client
from typer.testing import CliRunner

from fleetwave.cli import app
from fleetwave.kube import client as kubeclient
from fleetwave.kube import kinds
from fleetwave.local import binaries, fleet, gitserver, oci, processes
from fleetwave.local import flux as local_flux
from fleetwave.local import registry as local_registry

V1 = f"{local_flux.GROUP}/v1"
GIT = kinds.KindInfo(kinds.GVK(V1, "GitRepository"), "gitrepositories", True)
OCI = kinds.KindInfo(kinds.GVK(V1, "OCIRepository"), "ocirepositories", True)
INTERVAL = "1s"  # honoured as given: a push shows up within about a second (ADR 0104)


def _write(tree: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (tree / name).parent.mkdir(parents=True, exist_ok=True)
        (tree / name).write_text(text)


@contextmanager
def _source(
    management: Client, info: kinds.KindInfo, name: str, namespace: str, spec: dict[str, Any]
) -> Iterator[None]:
    """The source object while the block runs; deleted afterwards and waited for (source-controller
    removes its finalizer), so the test's namespace is not left terminating."""
    resource = kinds.resource_class(info)
    body = {
        "apiVersion": V1,
        "kind": info.gvk.kind,
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }
    management.create(resource.from_dict(body))
    try:
        yield
    finally:
        management.delete(resource, name, namespace=namespace)
        deadline = time.monotonic() + 30
        while _get(management, info, name, namespace) is not None:
            assert time.monotonic() < deadline, f"{info.gvk.kind} {name} was not deleted within 30s"
            time.sleep(0.1)


def _get(management: Client, info: kinds.KindInfo, name: str, namespace: str) -> dict[str, Any] | None:
    try:
        return dict(management.get(kinds.resource_class(info), name, namespace=namespace))
    except ApiError as e:
        if e.status.code == 404:
            return None
        raise


def _artifact(
    management: Client, info: kinds.KindInfo, name: str, namespace: str, revision: str, *, timeout: float = 60
) -> dict[str, Any]:
    """The artifact once the source is Ready with `revision`."""
    deadline = time.monotonic() + timeout
    status: dict[str, Any] = {}
    while time.monotonic() < deadline:
        status = (_get(management, info, name, namespace) or {}).get("status") or {}
        ready = any(c["type"] == "Ready" and c["status"] == "True" for c in status.get("conditions") or [])
        artifact = status.get("artifact") or {}
        if ready and artifact.get("revision") == revision:
            return dict(artifact)
        time.sleep(0.1)
    raise AssertionError(f"{info.gvk.kind} {name} not Ready with {revision} after {timeout}s: {status}")


def _download(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=10) as response:
        return bytes(response.read())


def _files(archive: bytes) -> dict[str, str]:
    out: dict[str, str] = {}
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        for member in tar.getmembers():
            content = tar.extractfile(member) if member.isfile() else None
            if content is not None:
                out[member.name] = content.read().decode()
    return out


def _check_served(artifact: dict[str, Any]) -> bytes:
    """What the artifact URL serves is what the status says: digest and size."""
    data = _download(artifact["url"])
    assert artifact["digest"] == f"sha256:{hashlib.sha256(data).hexdigest()}"
    assert artifact["size"] == len(data)
    return data


def test_a_git_repository_serves_the_pushed_tree_and_a_push_is_a_new_revision(
    flux: local_flux.Flux, management: Client, namespace: str, tmp_path: Path
) -> None:
    url = flux.create_repo(f"content-{namespace}")
    _write(tmp_path, {"manifests/a.yaml": "kind: A\n", "manifests/b.yaml": "kind: B\n"})
    first = flux.push(f"content-{namespace}", tmp_path, message="v1")
    spec = {"url": url, "interval": INTERVAL, "ref": {"branch": "main"}}
    with _source(management, GIT, "content", namespace, spec):
        artifact = _artifact(management, GIT, "content", namespace, f"main@sha1:{first}")
        assert artifact["url"].startswith(f"{flux.storage_url}/gitrepository/{namespace}/content/")
        assert _files(_check_served(artifact)) == {
            "manifests/a.yaml": "kind: A\n",
            "manifests/b.yaml": "kind: B\n",
        }

        (tmp_path / "manifests/b.yaml").unlink()
        _write(tmp_path, {"manifests/a.yaml": "kind: A2\n"})
        second = flux.push(f"content-{namespace}", tmp_path, message="v2")
        pushed = time.monotonic()
        artifact = _artifact(management, GIT, "content", namespace, f"main@sha1:{second}", timeout=20)
        # Measured p50 0.5 s, max 1.1 s over 10 pushes at 1s; a loaded machine gets some slack.
        assert time.monotonic() - pushed < 10
        assert _files(_check_served(artifact)) == {"manifests/a.yaml": "kind: A2\n"}


def test_an_oci_repository_serves_an_artifact_pushed_to_the_local_registry(
    flux: local_flux.Flux,
    oci_registry: local_registry.Registry,
    management: Client,
    namespace: str,
    tmp_path: Path,
) -> None:
    _write(tmp_path, {"manifests/c.yaml": "kind: C\n"})
    digest = oci.push_oci_artifact(oci_registry.url, f"{namespace}/content", "v1", tmp_path)
    spec = {
        "url": f"oci://{oci_registry.host}/{namespace}/content",
        "ref": {"tag": "v1"},
        "insecure": True,  # the registry speaks plain HTTP on loopback
        "interval": INTERVAL,
    }
    with _source(management, OCI, "content", namespace, spec):
        artifact = _artifact(management, OCI, "content", namespace, f"v1@{digest}")
        assert _files(_check_served(artifact)) == {"manifests/c.yaml": "kind: C\n"}


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
        artifact = _artifact(client, GIT, local_flux.EXAMPLE, local_flux.FLUX_NAMESPACE, f"main@sha1:{head}")
    finally:
        client.close()
    assert _files(_check_served(artifact)) == dict(local_flux.SEED)
