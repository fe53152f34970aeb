"""The local fleet: one management cluster and N member clusters made of real Kubernetes processes.

One etcd is shared; every cluster is its own kube-apiserver (own `--etcd-prefix`, own TLS port,
bearer-token auth, RBAC). A *full* member also runs kube-controller-manager, kube-scheduler and kwok
with one fake Node, so Deployments become Available and Jobs complete without kubelets or containers.
A *light* member is its API server alone, without a watch cache: content is stored and read back,
but nothing reconciles it (no Pods for a Deployment, namespaces are not finalized). Fleets of a
hundred members mix them (ADR 0066). The management cluster runs kube-controller-manager too
(garbage collection of owned objects, namespace deletion). Everything binds to 127.0.0.1 only.

All of it is recorded in `<state>/state.json`, which is what `status`, `kubeconfig` and `down` read.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import shutil
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from importlib import resources
from pathlib import Path

from fleetwave.local import api, audit, binaries, pki, processes
from fleetwave.local.processes import ProcessRecord

MANAGEMENT = "management"
DEFAULT_ENVS = ("dev", "staging", "prod")
START_TIMEOUT = 180.0  # seconds: five apiservers starting at once on 2 cores are slow
START_TIMEOUT_PER_CLUSTER = 3.0  # more apiservers start more slowly: added per cluster past five
FULL, LIGHT = "full", "light"
# The processes of the two etcds: the management cluster's, and the one all members share.
ETCD, MEMBERS_ETCD = "etcd", "etcd-members"


class FleetError(RuntimeError):
    """The fleet could not be started or read; the message says why and what to do."""


@dataclass(frozen=True, slots=True)
class ClusterInfo:
    name: str
    role: str  # "management" or "member"
    port: int
    kubeconfig: str
    token: str
    labels: dict[str, str] = field(default_factory=dict)
    profile: str = FULL  # members: FULL (apiserver + KCM + scheduler + kwok) or LIGHT (apiserver)
    pull: bool = False  # members: joined in pull mode, through an agent beside it (`local up --pull-members`)

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def audit_log(self) -> Path:
        """Where a member's API server logs every request (management: not logged)."""
        return Path(self.kubeconfig).parent / audit.LOG_NAME


@dataclass(frozen=True, slots=True)
class FleetState:
    state_dir: str
    bin_dir: str
    ca_cert: str
    etcd_port: int
    clusters: list[ClusterInfo]
    processes: list[ProcessRecord]

    def cluster(self, name: str) -> ClusterInfo:
        for c in self.clusters:
            if c.name == name:
                return c
        known = ", ".join(c.name for c in self.clusters)
        raise FleetError(f"no cluster named {name!r} in the local fleet (clusters: {known})")

    @property
    def members(self) -> list[ClusterInfo]:
        return [c for c in self.clusters if c.role == "member"]


@dataclass(frozen=True, slots=True)
class ClusterHealth:
    name: str
    role: str
    ready: bool
    processes_alive: int
    processes_total: int
    labels: dict[str, str]


def default_state_dir() -> Path:
    base = os.environ.get("FLEETWAVE_STATE_DIR")
    if base:
        return Path(base)
    return Path(os.environ.get("XDG_STATE_HOME", Path.home() / ".local" / "state")) / "fleetwave" / "fleet"


def default_member_labels(count: int) -> dict[str, dict[str, str]]:
    """member-1 is dev, member-2 staging, the rest prod: the seeds' three environments."""
    return {
        f"member-{i}": {"env": DEFAULT_ENVS[min(i - 1, len(DEFAULT_ENVS) - 1)]} for i in range(1, count + 1)
    }


def load(state_dir: Path) -> FleetState | None:
    path = state_dir / "state.json"
    if not path.is_file():
        return None
    try:
        raw = json.loads(path.read_text())
        return FleetState(
            state_dir=raw["state_dir"],
            bin_dir=raw["bin_dir"],
            ca_cert=raw["ca_cert"],
            etcd_port=raw["etcd_port"],
            clusters=[ClusterInfo(**c) for c in raw["clusters"]],
            processes=[ProcessRecord(**p) for p in raw["processes"]],
        )
    except (ValueError, KeyError, TypeError):
        return None  # a half-written or foreign state file is treated as stale


def _save(state: FleetState) -> None:
    path = Path(state.state_dir) / "state.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(asdict(state), indent=2))
    tmp.replace(path)


def replace_processes(
    state: FleetState, names: Collection[str], records: Sequence[ProcessRecord]
) -> FleetState:
    """The state (saved) with its processes named in `names` replaced by `records`: services started
    next to the fleet (Prometheus) are recorded with it, so `down` stops them too."""
    kept = [p for p in state.processes if p.name not in names]
    updated = dataclasses.replace(state, processes=[*kept, *records])
    _save(updated)
    return updated


def health(state: FleetState) -> list[ClusterHealth]:
    result = []
    for c in state.clusters:
        owned = [p for p in state.processes if p.name.startswith(f"{c.name}/")]
        alive = sum(processes.is_ours(p) for p in owned)
        ready = api.is_ready(c.server, Path(state.ca_cert), timeout=2.0)
        result.append(ClusterHealth(c.name, c.role, ready, alive, len(owned), c.labels))
    return result


def is_healthy(state: FleetState) -> bool:
    etcd_alive = all(processes.is_ours(p) for p in state.processes if p.name in (ETCD, MEMBERS_ETCD))
    return etcd_alive and all(h.ready and h.processes_alive == h.processes_total for h in health(state))


def down(state_dir: Path) -> list[str]:
    """Stop every process the fleet in `state_dir` started; returns the names that needed SIGKILL."""
    state = load(state_dir)
    killed: list[str] = []
    if state is not None:
        # Controllers first, then apiservers, etcd last: an apiserver whose etcd is already gone
        # hangs in shutdown until it is killed.
        def phase(p: ProcessRecord) -> int:
            return 2 if p.name in (ETCD, MEMBERS_ETCD) else 1 if p.name.endswith("/apiserver") else 0

        for n in range(3):
            killed += processes.stop([p for p in state.processes if phase(p) == n])
    shutil.rmtree(state_dir, ignore_errors=True)
    return killed


def up(
    state_dir: Path,
    *,
    members: Mapping[str, Mapping[str, str]],
    now: dt.datetime,
    bin_dir: Path | None = None,
    full_members: int | None = None,
    members_etcd: bool = False,
    pull_members: int = 0,
    flow_control: bool = False,
) -> FleetState:
    """Start the fleet, or return the running one when it is already healthy with the same members.

    `members_etcd`: the members keep their data in an etcd of their own, not the management
    cluster's (the scale benchmark's fleets, ADR 0066's stop-35 addendum). `flow_control`: API
    Priority and Fairness on the management API server (the chart's FlowSchema is tested with it).

    The first `full_members` members (all when None) are full, the rest light. The last
    `pull_members` are marked to join in pull mode: registering them and starting their agents is
    the caller's (`fleetwave local up`), which can reach the management layer this one cannot.

    A stale state directory (crashed fleet, half-started fleet, different members) is cleaned up:
    leftover processes we own are stopped and the directory is started afresh.
    """
    if not 0 <= pull_members <= len(members):
        raise FleetError(f"{pull_members} pull members asked for, of {len(members)} members")
    wanted = _wanted(members, full_members, pull_members)
    existing = load(state_dir)
    if existing is not None:
        same = {c.name: (c.labels, c.profile, c.pull) for c in existing.members} == wanted
        if same and is_healthy(existing):
            return existing
    down(state_dir)
    bins = binaries.Binaries(bin_dir) if bin_dir else binaries.ensure()
    state_dir.mkdir(parents=True, exist_ok=True)
    try:
        return _start(state_dir.resolve(), bins, wanted, now, members_etcd, flow_control)
    except BaseException:
        down(state_dir)
        raise


Wanted = dict[str, tuple[dict[str, str], str, bool]]  # member -> (labels, profile, pull)


def _wanted(members: Mapping[str, Mapping[str, str]], full_members: int | None, pull_members: int) -> Wanted:
    """Each member's labels, profile (the first `full_members` full) and mode (the last
    `pull_members` pull)."""
    full = len(members) if full_members is None else full_members
    first_pull = len(members) - pull_members
    return {
        name: (dict(labels), FULL if i < full else LIGHT, i >= first_pull)
        for i, (name, labels) in enumerate(members.items())
    }


def _start(
    state_dir: Path,
    bins: binaries.Binaries,
    members: Wanted,
    now: dt.datetime,
    members_etcd: bool = False,
    flow_control: bool = False,
) -> FleetState:
    keys = pki.generate(state_dir / "pki", now=now)
    marker = str(state_dir)
    records: list[ProcessRecord] = []
    etcd_port = processes.free_port()
    records.append(_start_etcd(bins, state_dir, etcd_port, marker))
    api.wait_etcd(etcd_port, timeout=60.0, check_alive=lambda: processes.is_ours(records[0]))
    # A management cluster never shares an etcd with the clusters it manages: a thousand light
    # members' reads (no watch cache) queued in front of its writes, a contention no real fleet has.
    members_store = etcd_port
    if members and members_etcd:
        members_store = processes.free_port()
        records.append(_start_etcd(bins, state_dir, members_store, marker, name=MEMBERS_ETCD))
        api.wait_etcd(members_store, timeout=60.0, check_alive=lambda: processes.is_ours(records[-1]))

    clusters = [_cluster(state_dir, keys, MANAGEMENT, "management", ({}, FULL, False))]
    clusters += [_cluster(state_dir, keys, name, "member", wanted) for name, wanted in members.items()]
    policy = audit.write_policy(state_dir / "audit-policy.yaml") if members else None
    stores = (etcd_port, members_store)
    records += _start_apiservers(bins, keys, clusters, marker, stores, policy, flow_control)

    state = FleetState(str(state_dir), str(bins.directory), str(keys.ca_cert), etcd_port, clusters, records)
    _save(state)
    _wait_ready(state)
    for c in clusters:
        if c.profile == LIGHT:
            continue  # the API server alone: nothing reconciles what it stores
        records.extend(_start_controllers(bins, keys, state_dir / c.name, c, marker))
        if c.role == "member":
            api.create_fake_node(c.server, keys.ca_cert, c.token, name="kwok-node-0")
    _save(state)
    return state


def _cluster(
    state_dir: Path, keys: pki.Pki, name: str, role: str, wanted: tuple[dict[str, str], str, bool]
) -> ClusterInfo:
    """One cluster's directory, admin token and kubeconfig (its API server is started next)."""
    labels, profile, pull = wanted
    port, token = processes.free_port(), pki.new_token()
    cdir = state_dir / name
    cdir.mkdir()
    kubeconfig = cdir / "kubeconfig"
    api.write_kubeconfig(
        kubeconfig, cluster=name, server=f"https://127.0.0.1:{port}", ca_cert=keys.ca_cert, token=token
    )
    (cdir / "tokens.csv").write_text(f'{token},admin,admin-uid,"system:masters"\n')
    return ClusterInfo(name, role, port, str(kubeconfig), token, labels, profile, pull)


def _kwok_config(cdir: Path) -> Path:
    path = cdir / "kwok.yaml"
    path.write_bytes(resources.files("fleetwave.local").joinpath("kwok-stages.yaml").read_bytes())
    return path


def _wait_ready(state: FleetState) -> None:
    timeout = START_TIMEOUT + START_TIMEOUT_PER_CLUSTER * max(0, len(state.clusters) - 5)
    deadline = time.monotonic() + timeout
    pending = list(state.clusters)
    while pending:
        for c in list(pending):
            proc = next(p for p in state.processes if p.name == f"{c.name}/apiserver")
            if not processes.is_ours(proc):
                raise FleetError(f"kube-apiserver of {c.name} exited during start-up; see {proc.log}")
            if api.is_ready(c.server, Path(state.ca_cert), timeout=2.0):
                pending.remove(c)
        if pending and time.monotonic() > deadline:
            names = ", ".join(c.name for c in pending)
            raise FleetError(
                f"kube-apiserver of {names} not ready after {timeout:.0f}s; logs in {state.state_dir}"
            )
        if pending:
            time.sleep(0.5)


def _start_etcd(
    bins: binaries.Binaries, state_dir: Path, port: int, marker: str, *, name: str = ETCD
) -> ProcessRecord:
    peer = processes.free_port()
    data = state_dir / f"{name}-data"
    argv = [
        bins.path("etcd"),
        "--name=fleetwave",
        f"--data-dir={data}",
        f"--listen-client-urls=http://127.0.0.1:{port}",
        f"--advertise-client-urls=http://127.0.0.1:{port}",
        f"--listen-peer-urls=http://127.0.0.1:{peer}",
        f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
        f"--initial-cluster=fleetwave=http://127.0.0.1:{peer}",
        "--unsafe-no-fsync=true",
        "--log-level=warn",
        "--quota-backend-bytes=4294967296",
        "--listen-metrics-urls=",  # no extra listener
    ]
    return processes.start(name, argv, log=state_dir / f"{name}.log", marker=marker)


def _start_apiservers(
    bins: binaries.Binaries,
    keys: pki.Pki,
    clusters: list[ClusterInfo],
    marker: str,
    stores: tuple[int, int],
    policy: Path | None,
    fair: bool,
) -> list[ProcessRecord]:
    """An API server per cluster: the management one on etcd `stores[0]`, with API Priority and
    Fairness if `fair`; the members on `stores[1]`, their requests audited by `policy`."""
    started = []
    for c in clusters:
        management = c.role == "management"
        store, logged = (stores[0], None) if management else (stores[1], policy)
        queued = fair and management
        started.append(
            _start_apiserver(bins, keys, c, store, marker, audit_policy=logged, flow_control=queued)
        )
    return started


def _start_apiserver(
    bins: binaries.Binaries,
    keys: pki.Pki,
    cluster: ClusterInfo,
    etcd_port: int,
    marker: str,
    *,
    audit_policy: Path | None = None,
    flow_control: bool = False,
) -> ProcessRecord:
    """`audit_policy`: log every request to the cluster's `audit.log` (members: see `audit`).
    `flow_control`: API Priority and Fairness on (`up`)."""
    name, port, cdir = cluster.name, cluster.port, Path(cluster.kubeconfig).parent
    argv = [
        bins.path("kube-apiserver"),
        f"--etcd-servers=http://127.0.0.1:{etcd_port}",
        f"--etcd-prefix=/fleetwave/{name}/registry",
        "--bind-address=127.0.0.1",
        "--advertise-address=127.0.0.1",
        f"--secure-port={port}",
        f"--tls-cert-file={keys.serving_cert}",
        f"--tls-private-key-file={keys.serving_key}",
        f"--client-ca-file={keys.ca_cert}",
        f"--token-auth-file={cdir / 'tokens.csv'}",
        "--authorization-mode=Node,RBAC",
        "--service-cluster-ip-range=10.0.0.0/24",
        "--allow-privileged=true",
        f"--service-account-issuer=https://127.0.0.1:{port}",
        f"--service-account-key-file={keys.sa_pub}",
        f"--service-account-signing-key-file={keys.sa_key}",
        "--disable-admission-plugins=ServiceAccount",
        "--endpoint-reconciler-type=none",
        f"--enable-priority-and-fairness={str(flow_control).lower()}",
        "--v=0",
        f"--cert-dir={cdir / 'certs'}",
    ]
    argv += audit.flags(audit_policy, cluster.audit_log) if audit_policy else []
    env = {"GOMAXPROCS": "2"}
    if cluster.profile == LIGHT:
        # No watch cache (watches are served from etcd) and a tighter Go heap. Profiling stays on:
        # it only serves /debug/pprof to an authorised caller (`bench_scale.py --apiserver-profiles`).
        # (Trimming API groups with --runtime-config does not work: the server's own admission
        # informers wait for storage, node and discovery groups and it never becomes ready.)
        argv += ["--watch-cache=false"]
        env |= {"GOMAXPROCS": "1", "GOGC": "25", "GOMEMLIMIT": "120MiB"}
    return processes.start(f"{name}/apiserver", argv, log=cdir / "apiserver.log", marker=marker, env=env)


def _start_controllers(
    bins: binaries.Binaries, keys: pki.Pki, cdir: Path, cluster: ClusterInfo, marker: str
) -> list[ProcessRecord]:
    started = [_start_controller_manager(bins, keys, cdir, cluster, marker)]
    if cluster.role != "member":
        return started  # no Pods to place on the management cluster: its KCM is for GC and namespaces
    started.append(_start_scheduler(bins, cdir, cluster, marker))
    started.append(_start_kwok(bins, cdir, cluster, marker))
    return started


def _start_controller_manager(
    bins: binaries.Binaries, keys: pki.Pki, cdir: Path, cluster: ClusterInfo, marker: str
) -> ProcessRecord:
    return processes.start(
        f"{cluster.name}/controller-manager",
        [
            bins.path("kube-controller-manager"),
            f"--kubeconfig={cluster.kubeconfig}",
            "--leader-elect=false",
            "--secure-port=0",
            f"--service-account-private-key-file={keys.sa_key}",
            f"--root-ca-file={keys.ca_cert}",
            "--use-service-account-credentials=false",
            "--kube-api-qps=100",
            "--kube-api-burst=200",
            "--concurrent-deployment-syncs=10",
            f"--cluster-name={cluster.name}",
            f"--cert-dir={cdir / 'kcm-certs'}",
            "--v=0",
        ],
        log=cdir / "controller-manager.log",
        marker=marker,
    )


def _start_scheduler(bins: binaries.Binaries, cdir: Path, cluster: ClusterInfo, marker: str) -> ProcessRecord:
    kubeconfig = cluster.kubeconfig
    return processes.start(
        f"{cluster.name}/scheduler",
        [
            bins.path("kube-scheduler"),
            f"--kubeconfig={kubeconfig}",
            "--leader-elect=false",
            "--bind-address=127.0.0.1",
            f"--secure-port={processes.free_port()}",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            f"--cert-dir={cdir / 'scheduler-certs'}",
            "--v=0",
        ],
        log=cdir / "scheduler.log",
        marker=marker,
    )


def _start_kwok(bins: binaries.Binaries, cdir: Path, cluster: ClusterInfo, marker: str) -> ProcessRecord:
    return processes.start(
        f"{cluster.name}/kwok",
        [
            bins.path("kwok"),
            f"--kubeconfig={cluster.kubeconfig}",
            "--manage-all-nodes=true",
            f"--server-address=127.0.0.1:{processes.free_port()}",
            "--node-ip=127.0.0.1",
            "--node-lease-duration-seconds=40",
            f"--config={_kwok_config(cdir)}",
        ],
        log=cdir / "kwok.log",
        marker=marker,
    )
