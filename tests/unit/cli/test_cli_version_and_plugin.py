"""`fleetwave version` says what it is and pins; `kubectl fleetwave` maps kubectl's connection flags."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from fleetwave import __version__
from fleetwave.cli import app, common, kubectl_plugin
from fleetwave.cli.common import Globals
from fleetwave.local import recipe

ROOT = Path(__file__).resolve().parents[3]


def _pins() -> dict[str, str]:
    text = (ROOT / "tools" / "binaries" / "versions.env").read_text()
    pairs = (line.split("=", 1) for line in text.splitlines() if "=" in line and not line.startswith("#"))
    return {k.removesuffix("_VERSION").lower(): v for k, v in pairs}


def test_version_as_json_names_the_package_the_api_versions_and_the_pinned_binaries() -> None:
    result = CliRunner().invoke(app, ["version", "-o", "json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["version"] == __version__
    assert data["apis"]["native"] == ["fleetwave.io/v1alpha1"]
    assert "config.projectsveltos.io/v1beta1" in data["apis"]["upstream"]
    assert "placement.kubernetes-fleet.io/v1beta1" in data["apis"]["upstream"]
    assert data["binaries"] == _pins()
    assert set(data["binaries"]) == {"kubernetes", "etcd", "helm", "kwok", "kustomize"}


def test_version_as_text_is_short_and_refuses_an_unknown_output() -> None:
    result = CliRunner().invoke(app, ["version"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith(f"fleetwave {__version__} ")
    assert f"helm {_pins()['helm']}" in result.output
    assert len(lines) == 4
    refused = CliRunner().invoke(app, ["version", "-o", "xml"])
    assert refused.exit_code == 2
    assert "unknown output 'xml'" in refused.output
    as_yaml = CliRunner().invoke(app, ["version", "-o", "yaml"])
    assert as_yaml.exit_code == 0, as_yaml.output
    assert yaml.safe_load(as_yaml.output)["version"] == __version__


def test_the_recipe_found_is_the_checkouts() -> None:
    assert recipe.in_checkout()
    assert recipe.directory() == ROOT / "tools" / "binaries"


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (
            ["status", "promotion", "p", "--context", "prod", "-n", "ns"],
            ["--context", "prod", "status", "promotion", "p", "-n", "ns"],
        ),
        (
            ["--kubeconfig=/k", "approve", "run", "r", "--context=c", "--namespace", "x"],
            ["--kubeconfig=/k", "--context=c", "approve", "run", "r", "--namespace", "x"],
        ),
        (["plan", "-f", "x.yaml"], ["plan", "-f", "x.yaml"]),
        (["status", "--context"], ["status", "--context"]),  # no value: left for the parser to refuse
    ],
)
def test_the_plugin_moves_kubectls_connection_flags_in_front(argv: list[str], expected: list[str]) -> None:
    assert kubectl_plugin.arguments(argv) == expected


def _kubeconfig(tmp_path: Path) -> Path:
    def entry(name: str, port: int) -> tuple[dict[str, object], dict[str, object], dict[str, object]]:
        return (
            {"name": name, "cluster": {"server": f"https://127.0.0.1:{port}"}},
            {"name": name, "user": {"token": "t"}},
            {"name": name, "context": {"cluster": name, "user": name}},
        )

    a, b = entry("dev", 1), entry("prod", 2)
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [a[0], b[0]],
        "users": [a[1], b[1]],
        "contexts": [a[2], b[2]],
        "current-context": "dev",
    }
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_global_flags_pick_the_kubeconfig_and_context_every_command_uses(tmp_path: Path) -> None:
    path = _kubeconfig(tmp_path)
    try:
        Globals.kubeconfig, Globals.context = path, "prod"
        assert common.management_config(None).get().cluster.server == "https://127.0.0.1:2"
        Globals.context = None
        assert common.management_config(None).get().cluster.server == "https://127.0.0.1:1"
        Globals.context = "staging"
        refused = CliRunner().invoke(
            app, ["--kubeconfig", str(path), "--context", "staging", "status", "promotion", "p"]
        )
        assert refused.exit_code == 2  # a context the kubeconfig lacks is bad input (cli.errors)
        assert "context 'staging' is not in" in refused.output
    finally:
        Globals.kubeconfig, Globals.context = None, None
