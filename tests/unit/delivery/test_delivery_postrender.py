"""helm's post-renderer (ADR 0105), run as helm runs it: `python -I postrender.py PATCHES KUSTOMIZE`
with a chart's rendered manifests on stdin, patching with the real pinned kustomize."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from fleetwave.delivery import bounded, postrender
from fleetwave.local import binaries

RENDERED = """---
# Source: hello/templates/deployment.yaml
apiVersion: apps/v1
kind: Deployment
metadata:
  name: greeter
  labels: {app: greeter}
spec:
  replicas: 1
  template:
    spec:
      containers:
      - {name: hello, image: hello:1.0}
---
# Source: hello/templates/configmap.yaml
apiVersion: v1
kind: ConfigMap
metadata:
  name: greeter-config
data:
  message: hello
"""


@pytest.fixture(scope="module")
def kustomize() -> str:
    return binaries.ensure().path("kustomize")


def _run(
    tmp_path: Path, patches: list[dict[str, object]], kustomize: str, stdin: str
) -> subprocess.CompletedProcess[str]:
    patches_file = tmp_path / postrender.PATCHES_FILE
    patches_file.write_bytes(postrender.patches_file(patches))
    flags = postrender.helm_flags(str(patches_file), kustomize)
    assert flags[:2] == ["--post-renderer", sys.executable]
    args = [f.removeprefix("--post-renderer-args=") for f in flags[2:]]
    # helm's environment (built from scratch), not ours: the post-renderer must not need ours.
    return subprocess.run(
        [sys.executable, *args],
        input=stdin,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin"},
        check=False,
    )


def test_strategic_merge_and_json6902_patches_apply_to_the_rendered_chart(
    tmp_path: Path, kustomize: str
) -> None:
    patches: list[dict[str, object]] = [
        {
            "patch": "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: greeter\n"
            "  labels: {patched-by: fleetwave}\nspec:\n  replicas: 3\n",
        },
        {
            "patch": "- op: add\n  path: /data/cluster\n  value: dev-7\n",
            "target": {"kind": "ConfigMap", "name": "greeter-.*"},
        },
    ]
    done = _run(tmp_path, patches, kustomize, RENDERED)
    assert done.returncode == 0, done.stderr
    objects = {o["kind"]: o for o in yaml.safe_load_all(done.stdout)}
    assert objects["Deployment"]["spec"]["replicas"] == 3
    assert objects["Deployment"]["metadata"]["labels"] == {"app": "greeter", "patched-by": "fleetwave"}
    assert objects["Deployment"]["spec"]["template"]["spec"]["containers"][0]["image"] == "hello:1.0"
    assert objects["ConfigMap"]["data"] == {"message": "hello", "cluster": "dev-7"}


def test_a_patch_that_fails_is_one_line_and_exit_code_2(tmp_path: Path, kustomize: str) -> None:
    patches: list[dict[str, object]] = [
        {"patch": "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: nothere}\nspec: {replicas: 2}\n"}
    ]
    done = _run(tmp_path, patches, kustomize, RENDERED)
    assert done.returncode == postrender.FAILED
    assert done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert line.startswith("post-rendering with patches failed: kustomize build failed:")
    assert "no matches for Id Deployment.v1.apps/nothere" in line
    assert "hello:1.0" not in line  # the chart's output is not quoted


def test_nothing_rendered_is_passed_through_and_too_much_is_refused(tmp_path: Path, kustomize: str) -> None:
    done = _run(tmp_path, [{"patch": "x"}], kustomize, "")
    assert (done.returncode, done.stdout) == (0, "")
    huge = "# " + "x" * postrender.MAX_INPUT_BYTES
    done = _run(tmp_path, [{"patch": "x"}], kustomize, huge)
    assert done.returncode == postrender.FAILED
    assert "passed 16777216 bytes" in done.stderr


def test_the_post_renderer_itself_has_no_network() -> None:
    """`confine_this_process` is what the post-renderer does first: afterwards not even a unix
    socket can be opened, in it or in anything it starts."""
    code = (
        "import socket, subprocess, sys\n"
        "from fleetwave.delivery import bounded\n"
        "bounded.confine_this_process(bounded.Limits(), 't')\n"
        "try:\n    socket.socket(socket.AF_UNIX)\nexcept PermissionError:\n    print('refused')\n"
        "r = subprocess.run([sys.executable, '-c', 'import socket; socket.socket()'], capture_output=True)\n"
        "print('child', r.returncode)\n"
    )
    src = str(Path(postrender.__file__).resolve().parents[2])
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env={"PYTHONPATH": src}, check=False
    )
    assert done.stdout.split() == ["refused", "child", "1"], done.stderr
    assert bounded.network_filter() is not None


def test_the_patches_file_keeps_only_patch_and_target() -> None:
    written = json.loads(
        postrender.patches_file([{"patch": "p", "target": {"kind": "X"}, "name": "spec.patches[0]"}])
    )
    assert written == [{"patch": "p", "target": {"kind": "X"}}]
