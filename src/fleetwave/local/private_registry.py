"""A private OCI registry on loopback, for the tests of private Helm charts (ADR 0105).

The real CNCF distribution (v3) `registry` binary, from `$FLEETWAVE_FLUX_DIR/registry` (built from
the Go module proxy with the pinned Go set), serving over TLS with a serving certificate from a CA
of the local fleet's kind (`pki.generate`: fresh, throwaway, for 127.0.0.1), behind htpasswd
authentication (distribution accepts only bcrypt entries: written with the `bcrypt` package, a
development dependency), storing blobs on the filesystem in its own directory. Charts are pushed with
the real `helm push`, logged in with `helm registry login --password-stdin` into a registry config
of the push's own, so no password is ever an argument.
"""

from __future__ import annotations

import datetime as dt
import os
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from fleetwave.local import pki, processes
from fleetwave.local.processes import ProcessRecord

FLUX_DIR_ENV = "FLEETWAVE_FLUX_DIR"
START_TIMEOUT = 30.0


class RegistryNotFound(RuntimeError):
    """No registry binary: the message says where it was looked for and how to build it."""


@dataclass(frozen=True, slots=True)
class PrivateRegistry:
    host: str  # 127.0.0.1:PORT, as it appears in oci:// references and docker configs
    ca_cert: Path
    username: str
    password: str = field(repr=False)
    directory: Path = Path()
    record: ProcessRecord | None = None

    @property
    def url(self) -> str:
        return f"oci://{self.host}"


def binary() -> Path:
    """distribution's `registry`, from `$FLEETWAVE_FLUX_DIR`."""
    where = os.environ.get(FLUX_DIR_ENV, "")
    found = Path(where) / "registry" if where else None
    if found is None or not os.access(found, os.X_OK):
        raise RegistryNotFound(
            f"no distribution registry binary at ${FLUX_DIR_ENV}/registry ({where or 'unset'}): "
            "build it with tools/flux/build.sh and point the variable at its directory"
        )
    return found


def htpasswd_line(username: str, password: str) -> str:
    """One htpasswd entry with a bcrypt hash, the only kind distribution accepts."""
    import bcrypt  # noqa: PLC0415 - a development dependency: only the tests' registry needs it

    hashed = bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=10)).decode()
    return f"{username}:{hashed}\n"


def _config(directory: Path, port: int, tls: pki.Pki) -> dict[str, object]:
    return {
        "version": 0.1,
        "log": {"level": "warn", "accesslog": {"disabled": True}},
        "storage": {"filesystem": {"rootdirectory": str(directory / "data")}},
        "http": {
            "addr": f"127.0.0.1:{port}",
            "tls": {"certificate": str(tls.serving_cert), "key": str(tls.serving_key)},
        },
        "auth": {"htpasswd": {"realm": "fleetwave-private", "path": str(directory / "htpasswd")}},
    }


def start(
    directory: Path, *, username: str, password: str, registry_binary: Path | None = None
) -> PrivateRegistry:
    """Start the registry in `directory` (created) and wait until it answers over TLS."""
    found = registry_binary or binary()
    directory = directory.resolve()
    directory.mkdir(parents=True, exist_ok=True)
    tls = pki.generate(directory / "pki", now=dt.datetime.now(dt.UTC))
    (directory / "htpasswd").write_text(htpasswd_line(username, password), encoding="utf-8")
    (directory / "htpasswd").chmod(0o600)
    port = processes.free_port()
    config = directory / "config.yml"
    config.write_text(yaml.safe_dump(_config(directory, port, tls)), encoding="utf-8")
    record = processes.start(
        "registry", [str(found), "serve", str(config)], log=directory / "registry.log", marker=str(directory)
    )
    served = PrivateRegistry(f"127.0.0.1:{port}", tls.ca_cert, username, password, directory, record)
    _wait_ready(served)
    return served


def _wait_ready(served: PrivateRegistry) -> None:
    context = ssl.create_default_context(cafile=str(served.ca_cert))
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"https://{served.host}/v2/", timeout=2, context=context)
            return
        except urllib.error.HTTPError as e:
            if e.code == 401:  # up, and asking for credentials: as it should
                return
        except OSError:
            pass
        assert served.record is not None
        if not processes.is_ours(served.record):
            break
        time.sleep(0.1)
    log = Path(served.directory / "registry.log")
    tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
    raise RuntimeError(f"the registry on {served.host} did not start within {START_TIMEOUT:.0f}s:\n{tail}")


def stop(served: PrivateRegistry) -> None:
    if served.record is not None:
        processes.stop([served.record])


@contextmanager
def serve(directory: Path, *, username: str, password: str) -> Iterator[PrivateRegistry]:
    served = start(directory, username=username, password=password)
    try:
        yield served
    finally:
        stop(served)


def push_chart(helm: str, served: PrivateRegistry, chart: Path, *, repository: str = "charts") -> str:
    """`helm push` the packaged `chart` to `oci://HOST/repository`, logged in through a registry config
    private to this push (the password on helm's stdin); the chart's oci:// repository URL."""
    target = f"{served.url}/{repository}"
    with tempfile.TemporaryDirectory(prefix="fleetwave-push-") as home:
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": home}
        common = ["--registry-config", f"{home}/registry.json", "--ca-file", str(served.ca_cert)]
        login = [helm, "registry", "login", served.host, "--username", served.username, "--password-stdin"]
        for argv, stdin in (
            (login + common, served.password),
            ([helm, "push", str(chart), target, *common], ""),
        ):
            done = subprocess.run(argv, input=stdin, capture_output=True, text=True, env=env, check=False)
            if done.returncode != 0:
                raise RuntimeError(f"{argv[1]} failed: {done.stderr.replace(served.password, '***')[-500:]}")
    return target
