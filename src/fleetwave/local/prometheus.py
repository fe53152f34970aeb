"""A real Prometheus and Pushgateway on loopback, for metric health checks locally and in tests.

The binaries are Debian's (`tools/prometheus/fetch.sh`, or `FLEETWAVE_PROMETHEUS_DIR`), run as
plain processes like the rest of the local fleet (`processes.start`: own session, log file, marker
in the command line). Each instance has its own directory: generated config, TSDB, pushgateway
persistence, logs, and the scrape tokens (mode 0600).

Prometheus scrapes the Pushgateway every second with `honor_labels` (a pushed job keeps its own
`job`/`instance` labels) and every API server it is given every 5 s: HTTPS against the fleet's CA
with that cluster's bearer token (the local fleet's admin token, which may read `/metrics`), job
`apiserver-<cluster>` with a `cluster` label.

Attached to a local fleet (`attach`), its processes join the fleet's state, so `fleet.down` stops
them with the rest; its addresses are kept in `<state>/prometheus/prometheus.json`.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import yaml

from fleetwave.local import fleet, processes, recipe
from fleetwave.local.processes import ProcessRecord

PROMETHEUS, PUSHGATEWAY = "prometheus", "pushgateway"
START_TIMEOUT = 60.0
PUSHGATEWAY_INTERVAL = "1s"
APISERVER_INTERVAL = "5s"


class PrometheusError(RuntimeError):
    """Prometheus could not be found or started; the message says why and what to do."""


@dataclass(frozen=True, slots=True)
class ScrapeTarget:
    """An API server Prometheus scrapes: job `apiserver-<cluster>`."""

    cluster: str
    server: str  # https://127.0.0.1:<port>
    token: str
    ca_cert: str

    @property
    def job(self) -> str:
        return f"apiserver-{self.cluster}"


@dataclass(frozen=True, slots=True)
class Prometheus:
    directory: str
    url: str  # http://127.0.0.1:<port>
    pushgateway_url: str
    processes: list[ProcessRecord]


def binaries_dir() -> Path:
    """The directory holding `prometheus` and `prometheus-pushgateway` (fetched once, then cached)."""
    override = os.environ.get("FLEETWAVE_PROMETHEUS_DIR")
    script = recipe.prometheus_fetcher()
    if script is None:
        if override and all((Path(override) / n).is_file() for n in ("prometheus", "prometheus-pushgateway")):
            return Path(override)
        raise PrometheusError(
            "cannot find tools/prometheus/fetch.sh (a checkout) or its packaged copy; set "
            "FLEETWAVE_PROMETHEUS_DIR to a directory holding prometheus and prometheus-pushgateway"
        )
    proc = subprocess.run(["bash", str(script)], stdout=subprocess.PIPE, stderr=None, text=True, check=False)
    if proc.returncode != 0 or not proc.stdout.strip():
        raise PrometheusError(f"fetching the Prometheus binaries failed (exit {proc.returncode}); see above")
    return Path(proc.stdout.strip().splitlines()[-1])


def start(
    directory: Path,
    *,
    targets: Sequence[ScrapeTarget] = (),
    bin_dir: Path | None = None,
    marker: str | None = None,
) -> Prometheus:
    """Start Prometheus and the Pushgateway in `directory` (created) and wait until both are ready.
    `marker`: the string that identifies their processes as ours (default: the directory)."""
    bins = bin_dir or binaries_dir()
    directory = directory.resolve()
    directory.mkdir(parents=True, exist_ok=True)
    mark = marker or str(directory)
    gateway_port, port = processes.free_port(), processes.free_port()
    records = [
        processes.start(
            PUSHGATEWAY,
            [
                str(bins / "prometheus-pushgateway"),
                f"--web.listen-address=127.0.0.1:{gateway_port}",
                # Also what puts the directory (our marker) into its command line.
                f"--persistence.file={directory / 'pushgateway.data'}",
                "--log.level=warn",
            ],
            log=directory / "pushgateway.log",
            marker=mark,
            env={"GOMAXPROCS": "1"},
        )
    ]
    config = directory / "prometheus.yml"
    config.write_text(yaml.safe_dump(_config(directory, gateway_port, targets), sort_keys=False))
    records.append(
        processes.start(
            PROMETHEUS,
            [
                str(bins / "prometheus"),
                f"--config.file={config}",
                f"--storage.tsdb.path={directory / 'data'}",
                "--storage.tsdb.retention.time=1d",
                f"--web.listen-address=127.0.0.1:{port}",
                "--log.level=warn",
            ],
            log=directory / "prometheus.log",
            marker=mark,
            env={"GOMAXPROCS": "1"},
        )
    )
    started = Prometheus(
        str(directory), f"http://127.0.0.1:{port}", f"http://127.0.0.1:{gateway_port}", records
    )
    try:
        _wait_ready(started)
    except BaseException:
        stop(started)
        raise
    return started


def stop(prometheus: Prometheus) -> list[str]:
    """Stop both processes; returns the names that needed SIGKILL."""
    return processes.stop(prometheus.processes)


def is_running(prometheus: Prometheus) -> bool:
    return all(processes.is_ours(p) for p in prometheus.processes) and all(
        _ready(url) for url in (prometheus.url, prometheus.pushgateway_url)
    )


def push(pushgateway_url: str, job: str, text: str) -> None:
    """Replace the metrics of `job` on the Pushgateway with `text` (exposition format)."""
    body = text if text.endswith("\n") else text + "\n"
    request = urllib.request.Request(
        f"{pushgateway_url}/metrics/job/{urllib.parse.quote(job, safe='')}",
        data=body.encode(),
        method="PUT",
        headers={"Content-Type": "text/plain; version=0.0.4"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        response.read()


# --- next to a local fleet --------------------------------------------------------------------------


def targets_of(state: fleet.FleetState) -> list[ScrapeTarget]:
    return [ScrapeTarget(c.name, c.server, c.token, state.ca_cert) for c in state.members]


def attached(state: fleet.FleetState) -> Prometheus | None:
    """The Prometheus started next to this fleet, if its record is there (running or not)."""
    path = Path(state.state_dir) / PROMETHEUS / "prometheus.json"
    try:
        raw = json.loads(path.read_text())
        return Prometheus(
            directory=raw["directory"],
            url=raw["url"],
            pushgateway_url=raw["pushgateway_url"],
            processes=[ProcessRecord(**p) for p in raw["processes"]],
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def attach(state: fleet.FleetState, *, bin_dir: Path | None = None) -> tuple[fleet.FleetState, Prometheus]:
    """Prometheus scraping every member of the fleet: the running one, or a fresh one (a stopped or
    crashed one is cleaned up first). Its processes join the fleet's state, so `fleet.down` stops them."""
    found = attached(state)
    if found is not None and is_running(found):
        return state, found
    names = {PROMETHEUS, PUSHGATEWAY}
    processes.stop([p for p in state.processes if p.name in names])  # also those of a lost record
    directory = Path(state.state_dir) / PROMETHEUS
    started = start(directory, targets=targets_of(state), bin_dir=bin_dir, marker=state.state_dir)
    _save(started)
    return fleet.replace_processes(state, names, started.processes), started


def detach(state: fleet.FleetState) -> fleet.FleetState:
    """Stop the fleet's Prometheus, if any, and drop it from the fleet's state."""
    found = attached(state)
    if found is not None:
        stop(found)
        (Path(found.directory) / "prometheus.json").unlink(missing_ok=True)
    return fleet.replace_processes(state, {PROMETHEUS, PUSHGATEWAY}, [])


def _save(prometheus: Prometheus) -> None:
    path = Path(prometheus.directory) / "prometheus.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(asdict(prometheus), indent=2))
    tmp.replace(path)


def _config(directory: Path, gateway_port: int, targets: Sequence[ScrapeTarget]) -> dict[str, object]:
    jobs: list[dict[str, object]] = [
        {
            "job_name": PUSHGATEWAY,
            "honor_labels": True,
            "scrape_interval": PUSHGATEWAY_INTERVAL,
            "scrape_timeout": PUSHGATEWAY_INTERVAL,
            "static_configs": [{"targets": [f"127.0.0.1:{gateway_port}"]}],
        }
    ]
    tokens = directory / "tokens"
    tokens.mkdir(mode=0o700, exist_ok=True)
    for target in targets:
        token_file = tokens / target.cluster
        token_file.write_text(target.token)
        token_file.chmod(0o600)
        jobs.append(
            {
                "job_name": target.job,
                "scheme": "https",
                "scrape_interval": APISERVER_INTERVAL,
                "scrape_timeout": APISERVER_INTERVAL,
                "tls_config": {"ca_file": target.ca_cert},
                "authorization": {"type": "Bearer", "credentials_file": str(token_file)},
                "static_configs": [
                    {
                        "targets": [target.server.removeprefix("https://")],
                        "labels": {"cluster": target.cluster},
                    }
                ],
            }
        )
    return {"global": {"scrape_interval": APISERVER_INTERVAL}, "scrape_configs": jobs}


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as response:
            return bool(response.status == 200)
    except urllib.error.HTTPError as e:
        e.close()
        return False
    except OSError:
        return False


def _wait_ready(prometheus: Prometheus) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    pending = {PUSHGATEWAY: prometheus.pushgateway_url, PROMETHEUS: prometheus.url}
    while pending:
        for record in prometheus.processes:
            if not processes.is_ours(record):
                raise PrometheusError(f"{record.name} exited during start-up; see {record.log}")
        pending = {name: url for name, url in pending.items() if not _ready(url)}
        if pending and time.monotonic() > deadline:
            names = " and ".join(pending)
            raise PrometheusError(
                f"{names} not ready after {START_TIMEOUT:.0f}s; logs in {prometheus.directory}"
            )
        if pending:
            time.sleep(0.2)
