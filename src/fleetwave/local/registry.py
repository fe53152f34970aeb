"""A real OCI registry (CNCF distribution v3, built by `tools/flux/build.sh`) on loopback.

Plain HTTP on a free 127.0.0.1 port with filesystem storage under its directory, run as a process
like the rest of the local fleet (`processes.start`: own session, log file, marker in the command
line). Its configuration is the YAML `config` renders; `overrides` are merged into it key by key, so
a caller can add TLS (`http.tls`) or htpasswd auth (`auth.htpasswd`) without a second runner.
"""

from __future__ import annotations

import copy
import secrets
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from fleetwave.local import flux, processes
from fleetwave.local.processes import ProcessRecord

NAME = "registry"
START_TIMEOUT = 30.0


class RegistryError(RuntimeError):
    """The registry could not be started; the message says why and where its log is."""


@dataclass(frozen=True, slots=True)
class Registry:
    directory: str
    url: str  # http(s)://127.0.0.1:<port>
    process: ProcessRecord

    @property
    def host(self) -> str:
        """`127.0.0.1:<port>`, as OCI references name the registry (`oci://<host>/<repo>`)."""
        return self.url.split("://", 1)[1]


def config(directory: Path, port: int, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The registry's configuration: loopback, filesystem storage, deletes allowed, quiet logs."""
    base: dict[str, Any] = {
        "version": 0.1,
        "log": {"level": "warn", "accesslog": {"disabled": True}},
        "storage": {
            "filesystem": {"rootdirectory": str(directory / "data")},
            "delete": {"enabled": True},
            "redirect": {"disable": True},
        },
        "http": {"addr": f"127.0.0.1:{port}"},
    }
    return merge(base, overrides or {})


def merge(base: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """`base` with `overrides` laid over it: mappings merge key by key, anything else replaces."""
    out = copy.deepcopy(dict(base))
    for key, value in overrides.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def start(
    directory: Path,
    *,
    bin_dir: Path | None = None,
    marker: str | None = None,
    overrides: Mapping[str, Any] | None = None,
    ready_context: ssl.SSLContext | None = None,
) -> Registry:
    """Start the registry in `directory` (created) and wait until `/v2/` answers. `ready_context`:
    the TLS trust to reach it with when `overrides` turn on TLS."""
    binary = (bin_dir or flux.binaries_dir()) / "registry"
    directory = directory.resolve()
    directory.mkdir(parents=True, exist_ok=True)
    port = processes.free_port()
    # A secret of its own (it signs upload state), so the registry does not warn that it made one up.
    settings = config(directory, port, merge({"http": {"secret": secrets.token_hex(16)}}, overrides or {}))
    path = directory / "config.yml"
    path.write_text(yaml.safe_dump(settings, sort_keys=False))
    path.chmod(0o600)  # may name an htpasswd file or TLS key
    scheme = "https" if settings["http"].get("tls") else "http"
    record = processes.start(
        NAME,
        [str(binary), "serve", str(path)],
        log=directory / "registry.log",
        marker=marker or str(directory),
        # Tracing is on by default in v3 and exports to localhost:4318; nothing listens there.
        env={"OTEL_TRACES_EXPORTER": "none", "GOMAXPROCS": "1"},
    )
    started = Registry(str(directory), f"{scheme}://127.0.0.1:{port}", record)
    try:
        _wait_ready(started, ready_context)
    except BaseException:
        stop(started)
        raise
    return started


def stop(registry: Registry) -> list[str]:
    """Stop the registry; returns its name if it needed SIGKILL."""
    return processes.stop([registry.process])


def _answers(url: str, context: ssl.SSLContext | None) -> bool:
    """`/v2/` answers: 200, or 401 when authentication is configured."""
    try:
        with urllib.request.urlopen(f"{url}/v2/", timeout=2, context=context) as response:
            return bool(response.status == 200)
    except urllib.error.HTTPError as e:
        e.close()
        return e.code == 401
    except OSError:
        return False


def _wait_ready(registry: Registry, context: ssl.SSLContext | None) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while not _answers(registry.url, context):
        if not processes.is_ours(registry.process):
            raise RegistryError(f"the registry exited during start-up; see {registry.process.log}")
        if time.monotonic() > deadline:
            raise RegistryError(
                f"the registry did not answer within {START_TIMEOUT:.0f}s; see {registry.process.log}"
            )
        time.sleep(0.1)
