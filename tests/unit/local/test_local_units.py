"""Pieces of the local fleet that need no Kubernetes: labels, PKI, process supervision."""

from __future__ import annotations

import datetime as dt
import socket
import ssl
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import typer
from cryptography import x509

from fleetwave.cli.local import parse_labels
from fleetwave.local import fleet, pki, processes


def test_default_members_are_dev_staging_prod_and_extra_members_are_prod() -> None:
    assert fleet.default_member_labels(4) == {
        "member-1": {"env": "dev"},
        "member-2": {"env": "staging"},
        "member-3": {"env": "prod"},
        "member-4": {"env": "prod"},
    }


def test_labels_option_replaces_one_members_labels() -> None:
    got = parse_labels(["member-2:env=canary,order=1"], 3)
    assert got["member-2"] == {"env": "canary", "order": "1"}
    assert got["member-1"] == {"env": "dev"}


@pytest.mark.parametrize("spec", ["member-9:env=x", "member-1", "member-1:env"])
def test_labels_option_rejects_malformed_specs_with_a_clear_message(spec: str) -> None:
    with pytest.raises(typer.BadParameter, match=r"member-1|key=value"):
        parse_labels([spec], 3)


def test_pki_serving_certificate_is_signed_by_the_ca_for_loopback(tmp_path: Path) -> None:
    keys = pki.generate(tmp_path, now=dt.datetime.now(dt.UTC))
    cert = x509.load_pem_x509_certificate(keys.serving_cert.read_bytes())
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "localhost" in sans.get_values_for_type(x509.DNSName)
    ca = x509.load_pem_x509_certificate(keys.ca_cert.read_bytes())
    cert.verify_directly_issued_by(ca)
    ssl.create_default_context(cafile=str(keys.ca_cert))  # the CA file loads as a trust store
    assert keys.serving_key.stat().st_mode & 0o077 == 0


def test_stop_terminates_the_whole_process_group_and_ignores_foreign_pids(tmp_path: Path) -> None:
    marker = str(tmp_path)
    script = (
        "import subprocess,sys,time;"
        "subprocess.Popen([sys.executable,'-c','import time; time.sleep(60)']); time.sleep(60)"
    )
    record = processes.start(
        "sleeper", [sys.executable, "-c", script, marker], log=tmp_path / "log", marker=marker
    )
    assert processes.is_ours(record)
    child_pids = _wait_children(record.pid)
    assert processes.stop([record], grace=5) == []
    assert not processes.is_ours(record)
    for pid in child_pids:
        assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2]
    # A pid whose cmdline does not carry our marker is never signalled.
    foreign = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        processes.stop([processes.ProcessRecord("x", foreign.pid, "", marker)], grace=0.1)
        assert foreign.poll() is None
    finally:
        foreign.kill()
        foreign.wait()


def _wait_children(pid: int) -> list[int]:
    for _ in range(100):
        out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True, check=False).stdout
        if out.strip():
            return [int(p) for p in out.split()]
        time.sleep(0.05)
    pytest.fail("child process never started")


def test_free_ports_lie_below_the_ephemeral_range_and_are_never_handed_out_twice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Outgoing connections take ports from the ephemeral range at any time: a port chosen there
    # may be gone before the process that was to listen on it binds it.
    range_file = tmp_path / "ip_local_port_range"
    range_file.write_text("32768\t60999\n")
    monkeypatch.setattr(processes, "_EPHEMERAL_FILE", range_file)
    ports = [processes.free_port() for _ in range(50)]
    assert all(10000 <= p < 32768 for p in ports)
    assert len(set(ports)) == 50
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", ports[-1]))  # still free to listen on


def test_free_port_falls_back_to_the_kernels_choice_when_nothing_lies_below_the_range(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kernel_start = processes._ephemeral_start()  # the range the kernel really picks from
    range_file = tmp_path / "ip_local_port_range"
    range_file.write_text("10500 60999\n")
    monkeypatch.setattr(processes, "_EPHEMERAL_FILE", range_file)
    port = processes.free_port()
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", port))
    assert port >= kernel_start  # the kernel's own pick, not one of ours below 10500


def test_watch_exit_calls_back_when_a_process_exits_unasked_and_not_when_expected(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    log = tmp_path / "child.log"
    log.write_text("starting\nsomething broke\n")
    died = threading.Event()
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.exit(3)"])
    processes.watch_exit(child, "the child", log, on_exit=died.set)
    assert died.wait(30)
    assert "the child exited with 3" in caplog.text
    assert "something broke" in caplog.text

    called = threading.Event()
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    expected = processes.watch_exit(sleeper, "the sleeper", log, on_exit=called.set)
    watcher = next(t for t in threading.enumerate() if t.name == f"watch-exit-{sleeper.pid}")
    expected.set()
    sleeper.terminate()
    watcher.join(30)
    assert not watcher.is_alive()  # it saw the exit, and said nothing
    assert not called.is_set()
    assert "the sleeper" not in caplog.text


def test_watch_exit_interrupts_a_main_thread_that_ignores_sigint(tmp_path: Path) -> None:
    # A script a non-interactive shell starts in the background inherits SIGINT ignored, and
    # `interrupt_main` does nothing then: the benchmark would wait out its whole budget.
    script = (
        "import signal, subprocess, sys, time\n"
        "from pathlib import Path\n"
        "from fleetwave.local import processes\n"
        "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
        "child = subprocess.Popen([sys.executable, '-c', 'pass'])\n"
        f"processes.watch_exit(child, 'the child', Path({str(tmp_path / 'none.log')!r}))\n"
        "try:\n"
        "    time.sleep(60)\n"
        "except KeyboardInterrupt:\n"
        "    print('interrupted')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], check=False, capture_output=True, text=True, timeout=50
    )
    assert done.stdout.strip() == "interrupted", done.stderr
    assert "the child exited with 0" in done.stderr
