"""`cluster register` refuses a member kubeconfig the controller would not use, before writing anything."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from fleetwave.cli import app

SECRET = "s3cr3t-token-value"


def _kubeconfig(path: Path, *, cluster: dict[str, object], user: dict[str, object]) -> Path:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": cluster}],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }
    path.write_text(json.dumps(config))
    return path


def _register(tmp_path: Path, member: Path, *extra: str) -> tuple[int, str]:
    # The management API is unreachable on purpose: a refusal must come before any call to it.
    management = _kubeconfig(
        tmp_path / "mgmt", cluster={"server": "https://127.0.0.1:1"}, user={"token": "mgmt"}
    )
    args = ["cluster", "register", "m1", "--cluster-kubeconfig", str(member), "--kubeconfig", str(management)]
    result = CliRunner().invoke(app, [*args, *extra])
    return result.exit_code, result.output


def test_an_exec_plugin_is_refused_with_exit_2_naming_the_field_not_its_value(tmp_path: Path) -> None:
    evil = {"exec": {"command": "/bin/sh", "args": ["-c", f"echo {SECRET}"]}, "token": SECRET}
    member = _kubeconfig(tmp_path / "member", cluster={"server": "https://10.0.0.1"}, user=evil)
    code, output = _register(tmp_path, member)
    assert code == 2
    assert "user.exec runs a program" in output
    assert "nothing was registered" in output
    assert SECRET not in output
    assert "/bin/sh" not in output


def test_an_insecure_server_needs_the_explicit_opt_in(tmp_path: Path) -> None:
    member = _kubeconfig(
        tmp_path / "member",
        cluster={"server": "https://10.0.0.1", "insecure-skip-tls-verify": True},
        user={"token": SECRET},
    )
    code, output = _register(tmp_path, member)
    assert code == 2
    assert "insecure-skip-tls-verify" in output
    code, output = _register(tmp_path, member, "--allow-insecure")
    assert code != 2  # accepted by the policy; it then fails on the unreachable management API
    assert "kubeconfig refused" not in output
