"""Pieces of the local Flux sources that need no Kubernetes: command lines, configuration, the OCI
artifact's bytes, and the Git server (real git, on loopback)."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import subprocess
import tarfile
import threading
import urllib.request
from pathlib import Path

import pytest
import yaml

from fleetwave.local import fleet, gitserver, oci, recipe
from fleetwave.local import flux as local_flux
from fleetwave.local import registry as local_registry
from fleetwave.local.processes import ProcessRecord


def test_source_controller_serves_and_advertises_its_artifacts_on_loopback() -> None:
    argv = local_flux.controller_argv(Path("/b/source-controller"), Path("/s/storage"), 2001, 2002, 2003)
    assert argv[0] == "/b/source-controller"
    assert "--storage-path=/s/storage" in argv
    # The URL in status.artifact is the address it serves: reachable from this machine.
    assert "--storage-addr=127.0.0.1:2001" in argv
    assert "--storage-adv-addr=127.0.0.1:2001" in argv
    assert "--health-addr=127.0.0.1:2002" in argv
    assert "--metrics-addr=127.0.0.1:2003" in argv
    assert "--enable-leader-election=false" in argv
    assert all("0.0.0.0" not in a and "=:" not in a for a in argv)


def test_the_detached_git_server_is_this_python_running_the_module() -> None:
    argv = local_flux.git_server_argv(Path("/state/flux/git"), 4242)
    assert argv[1:] == [
        "-m",
        "fleetwave.local.gitserver",
        "serve",
        "--root",
        "/state/flux/git",
        "--port",
        "4242",
    ]
    assert Path(argv[0]).name.startswith("python")


def test_the_example_source_is_a_namespace_and_a_git_repository_reading_main() -> None:
    namespace, source = yaml.safe_load_all(local_flux.example_source("http://127.0.0.1:1/example.git"))
    assert namespace == {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "flux-system"}}
    assert source["apiVersion"] == "source.toolkit.fluxcd.io/v1"
    assert source["kind"] == "GitRepository"
    assert source["metadata"] == {"name": "example", "namespace": "flux-system"}
    assert source["spec"] == {
        "url": "http://127.0.0.1:1/example.git",
        "interval": local_flux.EXAMPLE_INTERVAL,
        "ref": {"branch": "main"},
    }


def test_an_attached_flux_is_read_back_from_the_fleet_state(tmp_path: Path) -> None:
    state = fleet.FleetState(str(tmp_path), "/bin", "/ca.crt", 1, [], [])
    assert local_flux.attached(state) is None
    record = ProcessRecord("git-server", 12, str(tmp_path / "git.log"), str(tmp_path))
    saved = local_flux.Flux(str(tmp_path / "flux"), "/kc", "http://g", "http://s", "http://h", [record])
    Path(saved.directory).mkdir()
    local_flux._save(saved)
    assert local_flux.attached(state) == saved
    assert saved.repo_url("x") == "http://g/x.git"
    assert saved.git_root == tmp_path / "flux" / "git"


def test_the_build_recipe_is_found_in_a_checkout() -> None:
    script = recipe.flux_builder()
    assert script is not None
    assert script.name == "build.sh"
    assert (script.parent / "versions.env").is_file()


# --- the registry ---------------------------------------------------------------------------------


def test_the_registry_listens_on_loopback_and_stores_under_its_directory() -> None:
    config = local_registry.config(Path("/r"), 5000)
    assert config["http"] == {"addr": "127.0.0.1:5000"}
    assert config["storage"]["filesystem"] == {"rootdirectory": "/r/data"}
    assert config["storage"]["delete"] == {"enabled": True}


def test_registry_overrides_merge_key_by_key_and_leave_the_defaults_alone() -> None:
    tls = {"certificate": "/r/tls.crt", "key": "/r/tls.key"}
    config = local_registry.config(
        Path("/r"), 5000, {"http": {"tls": tls}, "auth": {"htpasswd": {"realm": "r", "path": "/r/htpasswd"}}}
    )
    assert config["http"] == {"addr": "127.0.0.1:5000", "tls": tls}
    assert config["auth"]["htpasswd"]["path"] == "/r/htpasswd"
    assert local_registry.config(Path("/r"), 5000)["http"] == {"addr": "127.0.0.1:5000"}


def test_merge_replaces_what_is_not_a_mapping_and_copies() -> None:
    base = {"a": {"b": [1]}, "c": 1}
    merged = local_registry.merge(base, {"a": {"b": [2], "d": 3}, "c": {"e": 4}})
    assert merged == {"a": {"b": [2], "d": 3}, "c": {"e": 4}}
    assert base == {"a": {"b": [1]}, "c": 1}


# --- the OCI artifact -----------------------------------------------------------------------------


def test_the_artifact_layer_is_a_reproducible_tar_of_the_tree_without_links(tmp_path: Path) -> None:
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / "a.yaml").write_text("a: 1\n")
    (tmp_path / "top.txt").write_text("top\n")
    (tmp_path / "link").symlink_to("/etc/passwd")
    first = oci.tar_gz(tmp_path)
    os.utime(tmp_path / "top.txt", (1, 1))
    assert oci.tar_gz(tmp_path) == first  # times and owners do not reach the bytes
    with tarfile.open(fileobj=io.BytesIO(first), mode="r:gz") as tar:
        members = {m.name: m for m in tar.getmembers()}
        assert sorted(members) == ["dir", "dir/a.yaml", "top.txt"]
        assert members["dir/a.yaml"].mtime == 0
        assert members["dir/a.yaml"].mode == 0o644
        content = tar.extractfile(members["dir/a.yaml"])
        assert content is not None
        assert content.read() == b"a: 1\n"
    assert gzip.decompress(first)  # gzip, as the layer media type says


def test_the_manifest_names_fluxs_media_types_and_the_blobs_digests() -> None:
    config, layer = oci.Blob(oci.CONFIG_TYPE, b"{}"), oci.Blob(oci.CONTENT_TYPE, b"layer")
    document = json.loads(oci.manifest(config, layer, {"org.opencontainers.image.revision": "r1"}))
    assert document["mediaType"] == "application/vnd.oci.image.manifest.v1+json"
    assert document["config"] == {
        "mediaType": "application/vnd.cncf.flux.config.v1+json",
        "digest": f"sha256:{hashlib.sha256(b'{}').hexdigest()}",
        "size": 2,
    }
    assert document["layers"] == [
        {
            "mediaType": "application/vnd.cncf.flux.content.v1.tar+gzip",
            "digest": f"sha256:{hashlib.sha256(b'layer').hexdigest()}",
            "size": 5,
        }
    ]
    assert document["annotations"] == {"org.opencontainers.image.revision": "r1"}


# --- the Git server -------------------------------------------------------------------------------


def _clone(url: str, into: Path) -> dict[str, bytes]:
    env = gitserver.isolated_env(into.parent)
    subprocess.run(["git", "clone", "-q", url, str(into)], env=env, check=True, capture_output=True)
    return {
        p.relative_to(into).as_posix(): p.read_bytes()
        for p in into.rglob("*")
        if p.is_file() and ".git" not in p.relative_to(into).parts
    }


def test_a_pushed_tree_is_exactly_what_a_clone_gets(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    (tree / "m").mkdir(parents=True)
    (tree / "m" / "a.yaml").write_text("a\n")
    (tree / "b.yaml").write_text("b\n")
    with gitserver.GitServer(tmp_path / "root") as server:
        url = server.create_repo("repo")
        assert gitserver.branch_head(url, "main") is None
        first = gitserver.push_tree(url, tree, message="one")
        (tree / "b.yaml").unlink()
        (tree / "m" / "a.yaml").write_text("a2\n")
        second = gitserver.push_tree(url, tree, message="two")
        assert gitserver.branch_head(url, "main") == second != first
        assert _clone(url, tmp_path / "clone") == {"m/a.yaml": b"a2\n"}
        log = subprocess.run(
            ["git", "-C", str(tmp_path / "clone"), "log", "--format=%H %an %s"],
            capture_output=True,
            text=True,
            check=True,
        )
    assert log.stdout.splitlines() == [f"{second} fleetwave two", f"{first} fleetwave one"]
    assert not (tree / ".git").exists()  # the tree was only read


def test_pushes_to_one_branch_from_two_threads_both_land(tmp_path: Path) -> None:
    trees = [tmp_path / "one", tmp_path / "two"]
    for tree in trees:
        tree.mkdir()
        (tree / "name.txt").write_text(tree.name)
    shas: list[str] = []
    with gitserver.GitServer(tmp_path / "root") as server:
        url = server.create_repo("repo")
        threads = [
            threading.Thread(target=lambda t=tree: shas.append(gitserver.push_tree(url, t))) for tree in trees
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert len(shas) == 2
        assert gitserver.branch_head(url, "main") == shas[-1]


def test_a_push_over_a_mebibyte_arrives_chunked_and_intact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """git sends a request body over its 1 MiB post buffer chunked, without a Content-Length."""
    seen: list[str | None] = []
    cgi_env = gitserver._Handler._cgi_env

    def spy(handler: gitserver._Handler) -> dict[str, str]:
        seen.append(handler.headers.get("Transfer-Encoding"))
        return cgi_env(handler)

    monkeypatch.setattr(gitserver._Handler, "_cgi_env", spy)
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "big.bin").write_bytes(os.urandom(2 * 1024 * 1024))
    with gitserver.GitServer(tmp_path / "root") as server:
        url = server.create_repo("repo")
        gitserver.push_tree(url, tree)
        assert "chunked" in seen
        assert _clone(url, tmp_path / "clone") == {"big.bin": (tree / "big.bin").read_bytes()}


def test_a_gzipped_request_body_reaches_http_backend_inflated(tmp_path: Path) -> None:
    """git gzips an upload-pack request over 1 KiB (a fetch's long list of haves); this one is
    gzipped by hand so the test does not depend on when git decides to."""
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "a.txt").write_text("a\n")
    with gitserver.GitServer(tmp_path / "root") as server:
        url = server.create_repo("repo")
        head = gitserver.push_tree(url, tree)
        want = f"want {head}\n"
        body = f"{len(want) + 4:04x}{want}0000" + "0009done\n"
        request = urllib.request.Request(
            f"{url}/git-upload-pack",
            data=gzip.compress(body.encode()),
            headers={
                "Content-Type": "application/x-git-upload-pack-request",
                "Content-Encoding": "gzip",
            },
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            answer = response.read()
    assert answer.startswith(b"0008NAK\n")
    assert b"PACK" in answer


def test_chunked_bodies_are_decoded_and_trailers_dropped() -> None:
    body = io.BytesIO(b"5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nTrailer: x\r\n\r\n")
    assert b"".join(gitserver._chunks(body)) == b"hello world"


def test_git_runs_without_the_users_configuration(tmp_path: Path) -> None:
    env = gitserver.isolated_env(tmp_path)
    assert env["HOME"] == str(tmp_path)
    assert env["GIT_CONFIG_NOSYSTEM"] == "1"
    assert env["GIT_CONFIG_GLOBAL"] == os.devnull
    assert (env["GIT_AUTHOR_NAME"], env["GIT_AUTHOR_EMAIL"]) == gitserver.AUTHOR
