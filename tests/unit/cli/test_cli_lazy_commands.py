"""The CLI imports a command's module only when that command runs (`cli.lazy`): the top-level help and
`version` never load the API models, the Kubernetes client or the controllers; every command's line
in the top-level help is the command's own help."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from fleetwave import cli
from fleetwave.api import families

# (typer itself imports pydantic to run a command; the models' schemas are what cost.)
HEAVY = ("fleetwave.api.models", "fleetwave.api.meta", "fleetwave.kube", "fleetwave.controllers", "aiohttp")
PROBE = """
import json, sys
from fleetwave.cli import run
try:
    run(sys.argv[1:])
except SystemExit:
    pass
print(json.dumps(sorted(m for m in sys.modules if m.startswith(("fleetwave", "pydantic", "aiohttp")))))
"""


def _modules_after(*argv: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, timeout=60, check=True
    )
    loaded: list[str] = json.loads(done.stdout.strip().splitlines()[-1])
    return loaded


@pytest.mark.parametrize("argv", [["--help"], ["-h"], [], ["version"], ["version", "-o", "json"]])
def test_help_and_version_load_no_heavy_module(argv: list[str]) -> None:
    loaded = _modules_after(*argv)
    assert "fleetwave.cli" in loaded
    assert not [m for m in loaded if m.startswith(HEAVY)]


def test_a_command_loads_its_module_when_it_runs() -> None:
    assert "fleetwave.cli.plan" in _modules_after("plan", "--help")
    assert "fleetwave.cli.plan" not in _modules_after("--help")


@pytest.mark.parametrize("entry", cli.COMMANDS, ids=lambda e: e.name)
def test_each_commands_line_in_the_help_is_its_own(entry: cli.lazy.Entry) -> None:
    command = entry.load()
    own = (command.help or "").strip().splitlines()[0]
    assert own == entry.help


def test_every_command_is_listed_and_runs_its_own_help() -> None:
    runner = CliRunner()
    listing = runner.invoke(cli.app, ["--help"], env={"COLUMNS": "200"})
    assert listing.exit_code == 0
    for entry in cli.COMMANDS:
        assert entry.name in listing.output
        own = runner.invoke(cli.app, [entry.name, "--help"], env={"COLUMNS": "200"})
        assert own.exit_code == 0, own.output
        assert f"fleetwave {entry.name}" in own.output


def test_an_unknown_command_is_a_usage_error() -> None:
    result = CliRunner().invoke(cli.app, ["stauts"])
    assert result.exit_code == 2


def test_version_names_what_the_families_serve() -> None:
    from fleetwave.cli import version  # noqa: PLC0415

    data = version.report()
    upstream = {s.api_version for f in families.UPSTREAM for s in f.kinds.values()}
    placement_group = families.FLEET_PLACEMENT.rpartition("/")[0]
    upstream |= {f"{placement_group}/{v}" for v in families.FLEET_PLACEMENT_ALSO}
    assert data["apis"]["upstream"] == sorted(upstream)
    assert data["apis"]["native"] == sorted({s.api_version for s in families.NATIVE.kinds.values()})
