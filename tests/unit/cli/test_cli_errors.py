"""Every command that reaches a cluster says what failed in one line, with the documented exit code,
and never prints a traceback, whatever the server does (issue 41; exit codes in `cli.errors`)."""

from __future__ import annotations

import http.server
import json
import re
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

import fleetwave
from fleetwave import cli
from fleetwave.cli import errors

COMMANDS = [
    ["status"],
    ["status", "promotion", "p1"],
    ["cluster", "list"],
    ["install"],
    ["approve", "promotion", "p1", "--stage", "prod"],
    ["pause", "promotion", "p1"],
    ["resume", "promotion", "p1"],
    ["rollback", "promotion", "p1"],
    ["abort", "promotion", "p1"],
    ["history", "promotion", "p1"],
]
PROMOTION = """apiVersion: fleetwave.io/v1alpha1
kind: ClusterPromotion
metadata: {name: p1}
spec:
  profileSpec: {policyRefs: [{kind: ConfigMap, name: c, namespace: default}]}
  stages: [{name: dev, clusterSelector: {matchLabels: {env: dev}}}]
"""


def _kubeconfig(tmp_path: Path, server: str) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": server}}],
                "users": [{"name": "u", "user": {"token": "t0ken"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    return path


class _Answers(http.server.BaseHTTPRequestHandler):
    """Answers every request with one status: plain text, as an API server does for a path it does
    not serve, or a Status body."""

    status = 500
    status_body = True

    def _answer(self) -> None:
        if self.status_body:
            body = json.dumps(
                {
                    "kind": "Status",
                    "apiVersion": "v1",
                    "status": "Failure",
                    "code": self.status,
                    "message": "said no",
                }
            ).encode()
            kind = "application/json"
        else:
            body, kind = b"404 page not found\n", "text/plain"
        self.send_response(self.status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _answer

    def log_message(self, *_: object) -> None:
        pass


@pytest.fixture
def answering() -> Iterator[type[_Answers]]:
    handler = type("Handler", (_Answers,), {})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    handler.port = server.server_address[1]  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield handler
    finally:
        server.shutdown()
        server.server_close()


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    with pytest.raises(SystemExit) as exited:
        cli.run(argv)
    captured = capsys.readouterr()
    return int(exited.value.code or 0), captured.err + captured.out


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.parametrize("command", [*COMMANDS, ["apply", "-f", "PROMOTION"]], ids=" ".join)
def test_an_unreachable_server_is_one_line_and_exit_1(
    command: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "p.yaml").write_text(PROMOTION)
    command = [str(tmp_path / "p.yaml") if a == "PROMOTION" else a for a in command]
    kubeconfig = _kubeconfig(tmp_path, f"http://127.0.0.1:{_closed_port()}")
    code, text = _run(["--kubeconfig", str(kubeconfig), *command], capsys)
    assert "Traceback" not in text
    assert code == errors.EXIT_API, text
    assert "cannot be reached" in text
    assert len(text.strip().splitlines()) <= 2


@pytest.mark.parametrize(
    ("status", "status_body", "code", "says"),
    [
        (401, True, errors.EXIT_FORBIDDEN, "did not accept your credentials"),
        (403, True, errors.EXIT_FORBIDDEN, "(403)|not allowed"),
        (404, False, errors.EXIT_API, "run `fleetwave install`"),
        (404, True, errors.EXIT_API, "run `fleetwave install`"),
        (429, True, errors.EXIT_API, "throttling"),
        (500, True, errors.EXIT_API, r"failed \(500\)"),
    ],
)
@pytest.mark.parametrize(
    "command", [["status"], ["history", "promotion", "p1"], ["pause", "promotion", "p1"]]
)
def test_each_answer_of_the_server_is_one_line_with_its_exit_code(
    answering: type[_Answers],
    command: list[str],
    status: int,
    status_body: bool,
    code: int,
    says: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    answering.status, answering.status_body = status, status_body
    kubeconfig = _kubeconfig(tmp_path, f"http://127.0.0.1:{answering.port}")  # type: ignore[attr-defined]
    exit_code, text = _run(["--kubeconfig", str(kubeconfig), *command], capsys)
    assert "Traceback" not in text
    assert re.search(says, text), text
    assert exit_code == code, text
    assert "t0ken" not in text


def test_debug_lets_the_traceback_through(tmp_path: Path) -> None:
    kubeconfig = _kubeconfig(tmp_path, f"http://127.0.0.1:{_closed_port()}")
    with pytest.raises(Exception, match="onnect"):
        cli.run(["--debug", "--kubeconfig", str(kubeconfig), "status"])


def test_an_unresolvable_server_names_dns(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    kubeconfig = _kubeconfig(tmp_path, "https://no-such-host.invalid:6443")
    code, text = _run(["--kubeconfig", str(kubeconfig), "status"], capsys)
    assert code == errors.EXIT_API
    assert "does not resolve" in text


def test_bare_fleetwave_prints_help_and_succeeds_and_version_and_h_exist(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, text = _run([], capsys)
    assert code == 0
    assert "Usage: fleetwave" in text
    assert "Exit codes" in text  # the table, in the help's epilog
    code, text = _run(["--version"], capsys)
    assert (code, text.strip()) == (0, f"fleetwave {fleetwave.__version__}")
    code, text = _run(["status", "-h"], capsys)
    assert code == 0
    assert "Usage: fleetwave status" in text


def test_applying_nothing_says_so_and_fails_before_connecting(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "empty.yaml"
    empty.write_text("# nothing here\n")
    kubeconfig = _kubeconfig(tmp_path, f"http://127.0.0.1:{_closed_port()}")
    code, text = _run(["--kubeconfig", str(kubeconfig), "apply", "-f", str(empty)], capsys)
    assert code == errors.EXIT_USAGE
    assert "no objects passed to apply" in text
