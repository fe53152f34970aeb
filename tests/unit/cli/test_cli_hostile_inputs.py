"""Malformed and hostile files given to `plan`, `apply` and `cluster register`: one line naming the
file and what is wrong, exit code 2, no traceback, nothing hangs and nothing is applied."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fleetwave.cli import app

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
PROMOTION = EXAMPLES / "promotion-kyverno.yaml"
FLEET = str(EXAMPLES / "fleet.yaml")
ALIAS_BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, "
    f"*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n"
    for i in range(9)
)


def _run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.output


def _one_clean_line(output: str) -> str:
    lines = [line for line in output.splitlines() if line.strip()]
    assert len(lines) == 1, output
    assert "Traceback" not in output
    return lines[0]


def _with_delay(tmp_path: Path, delay: str) -> str:
    text = PROMOTION.read_text()
    assert "delay: 2m" in text
    path = tmp_path / "promotion.yaml"
    path.write_text(text.replace("delay: 2m", f"delay: {delay}"))
    return str(path)


@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [
        ("binary.yaml", b"\xff\xfe\x00\x01binary", "binary file"),
        ("latin1.yaml", "name: caf\xe9\n".encode("latin-1"), "not UTF-8"),
        ("bomb.yaml", ALIAS_BOMB.encode(), "alias"),
        ("deep.yaml", b"[" * 5000 + b"]" * 5000, "nest"),
    ],
)
def test_plan_refuses_unreadable_files(tmp_path: Path, name: str, content: bytes, expected: str) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    code, output = _run("plan", "-f", str(path), "--fleet", FLEET)
    assert code == 2
    assert expected in _one_clean_line(output)
    assert name in output


def test_plan_refuses_special_files_instead_of_hanging(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    for path in ("/dev/zero", str(fifo)):
        code, output = _run("plan", "-f", path, "--fleet", FLEET)
        assert code == 2
        assert "not a regular file" in _one_clean_line(output)


def test_plan_refuses_out_of_range_durations_and_times(tmp_path: Path) -> None:
    code, output = _run("plan", "-f", _with_delay(tmp_path, "99999999999h"), "--fleet", FLEET)
    assert code == 2
    assert "out of range" in _one_clean_line(output)
    late = ["--start", "9999-12-31T23:59:59Z"]
    code, output = _run("plan", "-f", _with_delay(tmp_path, "2562047h"), "--fleet", FLEET, *late)
    assert code == 2
    assert "past the year 9999" in _one_clean_line(output)


def test_plan_refuses_a_file_that_is_not_a_kubeconfig(tmp_path: Path) -> None:
    code, output = _run("plan", "-f", str(PROMOTION), "--kubeconfig", FLEET)
    assert code == 2
    assert "not a usable kubeconfig" in _one_clean_line(output)


def test_apply_refuses_before_connecting(tmp_path: Path) -> None:
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(ALIAS_BOMB)
    unreachable = tmp_path / "mgmt"
    unreachable.write_text(
        '{"apiVersion": "v1", "kind": "Config", "current-context": "x",'
        ' "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],'
        ' "users": [{"name": "u", "user": {"token": "t"}}],'
        ' "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}]}'
    )
    code, output = _run("apply", "-f", str(bomb), "--kubeconfig", str(unreachable))
    assert code == 2
    line = _one_clean_line(output)
    assert "alias" in line
    assert "nothing was applied" in line
    code, output = _run("apply", "-f", "/dev/zero", "--kubeconfig", str(unreachable))
    assert code == 2
    assert "not a regular file" in _one_clean_line(output)


def test_apply_reads_stdin_with_the_same_checks(tmp_path: Path) -> None:
    unreachable = tmp_path / "mgmt"
    unreachable.write_text(
        '{"apiVersion": "v1", "kind": "Config", "current-context": "x",'
        ' "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],'
        ' "users": [{"name": "u", "user": {"token": "t"}}],'
        ' "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}]}'
    )
    args = ["apply", "-f", "-", "--kubeconfig", str(unreachable)]
    result = CliRunner().invoke(app, args, input=ALIAS_BOMB)
    assert result.exit_code == 2
    line = _one_clean_line(result.output)
    assert line.startswith("error: stdin: ")
    assert "alias" in line


@pytest.mark.parametrize("command", [["controller", "run"], ["install"]])
@pytest.mark.parametrize("name", ["Team_A", "-rf", "a" * 64, "../x"])
def test_watch_namespace_must_be_a_namespace_name(tmp_path: Path, command: list[str], name: str) -> None:
    kubeconfig = tmp_path / "nowhere.yaml"  # never read: refused before connecting
    code, output = _run(*command, "--kubeconfig", str(kubeconfig), f"--watch-namespace={name}")
    assert code == 2, output
    assert "not a namespace name" in _one_clean_line(output)
