"""Every command that reaches a cluster, against real servers that fail it: a stopped API server, one
without fleetwave's CRDs, a ServiceAccount without rights, credentials the server does not accept.
Each answers in one or two lines, with the documented exit code, and never a traceback (issue 41;
the exit codes are `cli.exit_codes`). The same failures from a scripted server: tests/unit/cli."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from lightkube import Client
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Namespace, ServiceAccount

from fleetwave import cli
from fleetwave.cli import exit_codes
from fleetwave.local import binaries, fleet

COMMANDS = [
    ["status"],
    ["status", "promotion", "p1"],
    ["cluster", "list"],
    ["apply", "-f", "PROMOTION"],
    ["approve", "promotion", "p1", "--stage", "prod"],
    ["pause", "promotion", "p1"],
    ["resume", "promotion", "p1"],
    ["rollback", "promotion", "p1"],
    ["abort", "promotion", "p1"],
    ["history", "promotion", "p1"],
    ["approve", "run", "r1", "--stage", "canary"],
    ["rollback", "run", "r1"],
    ["history", "run", "r1"],
    ["cluster", "register", "m1", "--cluster-kubeconfig", "MEMBER"],
    ["cluster", "register", "m1", "--pull", "--agent-kubeconfig", "AGENT"],
    ["cluster", "unregister", "m1"],
]
PROMOTION = """apiVersion: fleetwave.io/v1alpha1
kind: ClusterPromotion
metadata: {name: p1}
spec:
  profileSpec: {policyRefs: [{kind: ConfigMap, name: c, namespace: default}]}
  stages: [{name: dev, clusterSelector: {matchLabels: {env: dev}}}]
"""
NO_RIGHTS = "fleetwave-no-rights"


def _with_user(source: str, target: Path, *, token: str | None = None, server: str | None = None) -> str:
    """A copy of a local fleet kubeconfig with another bearer token or server."""
    config: dict[str, Any] = yaml.safe_load(Path(source).read_text(encoding="utf-8"))
    if token is not None:
        config["users"][0]["user"] = {"token": token}
    if server is not None:
        config["clusters"][0]["cluster"]["server"] = server
    target.write_text(yaml.safe_dump(config), encoding="utf-8")
    return str(target)


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module")
def kubeconfigs(
    local_fleet: fleet.FleetState,
    management: Client,
    bins: binaries.Binaries,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[dict[str, str]]:
    """failure kind -> a kubeconfig that meets it on a real server."""
    where = tmp_path_factory.mktemp("failing-kubeconfigs")
    source = local_fleet.cluster(fleet.MANAGEMENT).kubeconfig
    management.create(ServiceAccount(metadata=ObjectMeta(name=NO_RIGHTS, namespace="default")))
    argv = [bins.path("kubectl"), "--kubeconfig", source, "create", "token", NO_RIGHTS, "-n", "default"]
    token = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=True).stdout.strip()
    try:
        yield {
            "stopped": _with_user(source, where / "stopped", server=f"https://127.0.0.1:{_closed_port()}"),
            "no-crds": local_fleet.members[0].kubeconfig,  # a member: a real server without fleetwave
            "no-rights": _with_user(source, where / "no-rights", token=token),
            "bad-token": _with_user(source, where / "bad-token", token="not-a-token"),
            "member": local_fleet.members[1].kubeconfig,  # what `cluster register` registers
        }
    finally:
        management.delete(ServiceAccount, NO_RIGHTS, namespace="default")


EXPECTED = {
    "stopped": (exit_codes.EXIT_API, r"cannot be reached"),
    "no-crds": (exit_codes.EXIT_API, r"fleetwave CRDs are not installed .*: run `fleetwave install`"),
    "no-rights": (exit_codes.EXIT_FORBIDDEN, r"\(403\)|not allowed|forbidden"),
    "bad-token": (exit_codes.EXIT_FORBIDDEN, r"did not accept your credentials \(401\)"),
}


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    with pytest.raises(SystemExit) as exited:
        cli.run(argv)
    captured = capsys.readouterr()
    return int(exited.value.code or 0), captured.err + captured.out


# `install` on the server without the CRDs is left out: installing them there is what it is for.
PAIRS = [
    pytest.param(kind, command, id=f"{' '.join(command)}-{kind}")
    for command in [*COMMANDS, ["install"]]
    for kind in sorted(EXPECTED)
    if not (command == ["install"] and kind == "no-crds")
]


@pytest.mark.parametrize(("kind", "command"), PAIRS)
def test_a_failing_real_server_is_one_line_and_the_documented_exit_code(
    kind: str,
    command: list[str],
    kubeconfigs: dict[str, str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    (tmp_path / "p.yaml").write_text(PROMOTION, encoding="utf-8")
    files = {
        "PROMOTION": str(tmp_path / "p.yaml"),
        "MEMBER": kubeconfigs["member"],
        "AGENT": str(tmp_path / "a"),
    }
    argv = [files.get(a, a) for a in command]
    code, text = _run(["--kubeconfig", kubeconfigs[kind], *argv], capsys)
    expected_code, says = EXPECTED[kind]
    assert "Traceback" not in text
    assert code == expected_code, text
    assert re.search(says, " ".join(text.split())), text
    assert len(text.strip().splitlines()) <= 2, text


def test_register_writes_nothing_to_a_cluster_without_fleetwave(
    kubeconfigs: dict[str, str],
    members: dict[str, Client],
    local_fleet: fleet.FleetState,
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["--kubeconfig", kubeconfigs["no-crds"], "cluster", "register", "m2", "-n", "register-nowhere"]
    code, text = _run([*argv, "--cluster-kubeconfig", kubeconfigs["member"]], capsys)
    assert code == exit_codes.EXIT_API, text
    member = members[local_fleet.members[0].name]  # the "no-crds" server
    assert "register-nowhere" not in [ns.metadata.name for ns in member.list(Namespace)]


def test_the_controller_against_a_stopped_server_says_so_in_one_line(kubeconfigs: dict[str, str]) -> None:
    argv = [sys.executable, "-m", "fleetwave", "controller", "run", "--kubeconfig", kubeconfigs["stopped"]]
    done = subprocess.run(
        [*argv, "--metrics-port", "0"], capture_output=True, text=True, timeout=120, check=False
    )
    assert "Traceback" not in done.stderr
    assert done.returncode == exit_codes.EXIT_API, done.stderr
    assert "cannot be reached" in done.stderr
