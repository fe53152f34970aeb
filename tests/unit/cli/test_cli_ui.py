"""`fleetwave ui` before it serves: a management cluster it cannot reach, a port it cannot take, and an
address off loopback all get one clear line, never a traceback."""

from __future__ import annotations

import socket
from pathlib import Path

from typer.testing import CliRunner

from fleetwave.cli import app

UNREACHABLE = """apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}
users:
- name: u
  user: {token: not-a-secret}
contexts:
- name: x
  context: {cluster: c, user: u}
current-context: x
"""


def _kubeconfig(tmp_path: Path) -> str:
    path = tmp_path / "kubeconfig"
    path.write_text(UNREACHABLE, encoding="utf-8")
    return str(path)


def test_an_unreachable_management_cluster_is_one_line(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["ui", "--kubeconfig", _kubeconfig(tmp_path), "--port", "0"])
    assert result.exit_code == 1
    said = " ".join(result.output.split())
    assert "cannot read rollouts from https://127.0.0.1:1" in said
    assert "not-a-secret" not in said
    assert "Traceback" not in said


def test_a_taken_port_is_one_line_and_nothing_is_read(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        result = CliRunner().invoke(app, ["ui", "--kubeconfig", _kubeconfig(tmp_path), "--port", str(port)])
    assert result.exit_code == 1
    said = " ".join(result.output.split())
    assert f"cannot listen on 127.0.0.1:{port}" in said
    assert "Traceback" not in said


def test_an_address_off_loopback_is_warned_about(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, ["ui", "--kubeconfig", _kubeconfig(tmp_path), "--address", "0.0.0.0", "--port", "0"]
    )
    said = " ".join(result.output.split())
    assert "anyone who can reach it can approve stages as you" in said
    assert result.exit_code == 1  # then it stops at the unreachable cluster, as above
