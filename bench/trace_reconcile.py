"""Which files and functions of `src/fleetwave` one reconcile passes through, per source tree.

    .venv/bin/python bench/trace_reconcile.py [--src DIR ...] [--top N]

Two reconciles are traced with `sys.setprofile`, in-process, against an in-memory API server (no
Kubernetes needed): a ClusterPromotion pass that admits the next stage, and a ClusterStagedUpdateRun
pass that finishes the first stage's cluster and delivers to the next stage's. Each is warmed up
with passes until one writes nothing (they initialize the rollout and start its first stage, and do
the imports a pass does lazily), the world is moved on (the first stage's cluster reported ready),
and the next pass is the one traced; a check that it did what it is said to do follows it.
Counted are the Python functions entered whose file is under the given src dir: distinct files,
distinct functions, and calls (a coroutine resumed after an await is not a new call).

Each `--src` is a fleetwave source tree (default: this checkout's `src`), measured in its own
subprocess with it first on PYTHONPATH, so an older checkout (`git worktree`) runs side by side with
this one: `--src /path/to/old/src --src src`. The module paths that moved between trees are tried in
their new place, then in their old one. `--top N` also prints, per tree and reconcile, the N files
with the most calls.

The fixtures are bench_gates' own (its promotion, policy ConfigMap, placement and strategy, no gates),
over three members labelled env=dev, staging and prod; members are reached through a stand-in for
`MemberTarget.session` (its frames are this file's, so they are not counted).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import copy
import dis
import importlib
import inspect
import json
import os
import platform
import shlex
import subprocess
import sys
import types
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from lightkube import ApiError, codecs
from lightkube.models import meta_v1
from lightkube.types import PatchType

ROOT = Path(__file__).resolve().parent.parent
Obj = dict[str, Any]

# Module paths, newest first: a tree that predates a move has the module at the later name.
PROMOTION = ("fleetwave.controllers.sveltos.promotion", "fleetwave.controllers.promotion")
SUMMARY_STATUS = ("fleetwave.controllers.sveltos.summary_status", "fleetwave.controllers.summary_status")
CONTEXT = ("fleetwave.controllers.shared.context", "fleetwave.controllers.context")
RUN = ("fleetwave.controllers.kubefleet.run",)
EXECUTOR = ("fleetwave.controllers.kubefleet.executor",)
NAMING = ("fleetwave.controllers.kubefleet.naming",)
SNAPSHOTS = ("fleetwave.controllers.kubefleet.snapshots",)

FLEET_NS = "fleet"
ENVS = ("dev", "staging", "prod")
T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{name: m, cluster: {server: "https://%s.invalid:6443"}}]
users: [{name: m, user: {token: bench}}]
contexts: [{name: m, context: {cluster: m, user: m}}]
current-context: m
"""


def module(names: Iterable[str]) -> Any:
    """The first of `names` that this tree has (a missing dependency of it is still an error)."""
    tried = []
    for name in names:
        try:
            return importlib.import_module(name)
        except ModuleNotFoundError as e:
            if e.name is None or not name.startswith(e.name):
                raise
            tried.append(name)
    raise ModuleNotFoundError(f"none of {tried} in this tree")


# --- the tracer -------------------------------------------------------------------------------------

_RESUME = dis.opmap.get("RESUME")
_GENERATOR_FLAGS = 0x20 | 0x80 | 0x200  # CO_GENERATOR, CO_COROUTINE, CO_ASYNC_GENERATOR


def _resumed(frame: types.FrameType) -> bool:
    """A generator or coroutine taken up again (after a yield or an await), not entered: its 'call'
    event stops at a RESUME whose argument is not 0 (Python 3.11+)."""
    code = frame.f_code
    if not code.co_flags & _GENERATOR_FLAGS or _RESUME is None:
        return False
    at = frame.f_lasti
    raw = code.co_code
    return 0 <= at < len(raw) - 1 and raw[at] == _RESUME and raw[at + 1] != 0


class Tracer:
    """Calls of Python functions defined under `root`, by (file, first line, qualified name)."""

    def __init__(self, root: Path) -> None:
        self.root = str(root.resolve()) + os.sep
        self.calls: Counter[tuple[str, int, str]] = Counter()

    def _profile(self, frame: types.FrameType, event: str, arg: object) -> None:
        if event != "call":
            return
        code = frame.f_code
        if code.co_filename.startswith(self.root) and not _resumed(frame):
            self.calls[(code.co_filename[len(self.root) :], code.co_firstlineno, code.co_qualname)] += 1

    async def trace(self, call: Awaitable[Any]) -> Any:
        sys.setprofile(self._profile)
        try:
            return await call
        finally:
            sys.setprofile(None)

    def summary(self, top: int) -> Obj:
        per_file: Counter[str] = Counter()
        functions: Counter[str] = Counter()
        for (path, _, _), n in self.calls.items():
            per_file[path] += n
            functions[path] += 1
        return {
            "files": len(per_file),
            "functions": len(self.calls),
            "calls": sum(self.calls.values()),
            "top": [[path, n, functions[path]] for path, n in per_file.most_common(top)],
        }


# --- an in-memory API server ------------------------------------------------------------------------


class Informer:
    """What `Cache` reads of an informer: its store, a revision and change handlers."""

    def __init__(self) -> None:
        self._store: dict[str, Any] = {}
        self.revision = 0
        self._handlers: list[Callable[[str, Any], None]] = []

    @property
    def store(self) -> Mapping[str, Any]:
        return self._store

    def get(self, key: str) -> Any | None:
        return self._store.get(key)

    def on_change(self, handler: Callable[[str, Any], None]) -> None:
        self._handlers.append(handler)

    def changed(self, event: str, key: str, obj: Any) -> None:
        if event == "DELETED":
            self._store.pop(key, None)
        else:
            self._store[key] = obj
        self.revision += 1
        for handler in self._handlers:
            handler(event, obj)


def _status(code: int, reason: str, message: str, name: str = "") -> ApiError:
    details = meta_v1.StatusDetails(name=name) if name else None
    return ApiError(status=meta_v1.Status(code=code, reason=reason, message=message, details=details))


def _kind_of(resource: Any) -> tuple[str, str | None]:
    """(kind, subresource) of a lightkube resource class (`X.Status` is X's status)."""
    info = resource._api_info
    return (info.parent.kind, info.action) if info.action else (info.resource.kind, None)


def _body(obj: Any) -> Obj:
    raw = obj.to_dict() if hasattr(obj, "to_dict") else dict(obj)
    return copy.deepcopy(dict(raw))


def _as(cls: Any, body: Obj) -> Any:
    """`body` as the client would answer it for resource class `cls`: a dict for a generic resource
    class (as members' objects are read and written), else lightkube's class of its kind."""
    copied = copy.deepcopy(body)
    return cls(copied) if isinstance(cls, type) and issubclass(cls, dict) else codecs.from_dict(copied)


def _merged(old: Any, patch: Any) -> Any:
    """RFC 7386: maps merge key by key, a null removes, anything else replaces."""
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    out = dict(old) if isinstance(old, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = _merged(out.get(key), value)
    return out


class Server:
    """Objects by kind and key; every write lands in its informer at once, as if its watch event had
    already arrived (a reconcile reads its own writes back from the cache on the next pass)."""

    def __init__(self, kinds: Iterable[str] = ()) -> None:
        self.informers: dict[str, Informer] = {k: Informer() for k in kinds}
        self.bodies: dict[tuple[str, str], Obj] = {}
        self.version = 100
        self.writes: list[str] = []

    def key(self, body: Mapping[str, Any], namespace: str | None = None) -> str:
        meta = body.get("metadata") or {}
        ns = namespace or meta.get("namespace")
        return f"{ns}/{meta['name']}" if ns else str(meta["name"])

    def put(self, body: Obj, verb: str = "seed") -> None:
        kind, key = body["kind"], self.key(body)
        event = "MODIFIED" if (kind, key) in self.bodies else "ADDED"
        self.version += 1
        meta = body.setdefault("metadata", {})
        meta["resourceVersion"] = str(self.version)
        meta.setdefault("uid", f"uid-{kind}-{key}")
        meta.setdefault("generation", 1)
        meta.setdefault("creationTimestamp", T0.strftime("%Y-%m-%dT%H:%M:%SZ"))
        self.bodies[(kind, key)] = body
        self.writes.append(f"{verb} {kind} {key}")
        obj = codecs.from_dict(copy.deepcopy(body))
        self.informers.setdefault(kind, Informer()).changed(event, key, obj)

    def drop(self, kind: str, key: str) -> None:
        body = self.bodies.pop((kind, key))
        self.writes.append(f"delete {kind} {key}")
        self.informers.setdefault(kind, Informer()).changed("DELETED", key, codecs.from_dict(body))

    def found(self, kind: str, key: str) -> Obj:
        body = self.bodies.get((kind, key))
        if body is None:
            raise _status(404, "NotFound", f"{kind} {key} not found", key.rpartition("/")[2])
        return body

    def listed(self, kind: str, namespace: str | None, labels: Mapping[str, Any] | None) -> list[Obj]:
        out = []
        for (k, _), body in sorted(self.bodies.items()):
            meta = body["metadata"]
            if k != kind or (namespace not in (None, "*") and meta.get("namespace") != namespace):
                continue
            if all((meta.get("labels") or {}).get(n) == v for n, v in (labels or {}).items()):
                out.append(body)
        return out


@dataclass
class Client:
    """The calls controllers make of lightkube's AsyncClient, answered by a `Server`."""

    server: Server

    async def create(self, obj: Any, namespace: str | None = None, **_: Any) -> Any:
        body = _body(obj)
        if namespace:
            body["metadata"]["namespace"] = namespace
        if (body["kind"], self.server.key(body)) in self.server.bodies:
            raise _status(409, "AlreadyExists", f"{body['kind']} {self.server.key(body)} already exists")
        self.server.put(body, "create")
        return _as(type(obj), body)

    async def apply(self, obj: Any, namespace: str | None = None, **_: Any) -> Any:
        body = _body(obj)
        if namespace:
            body["metadata"]["namespace"] = namespace
        old = self.server.bodies.get((body["kind"], self.server.key(body)))
        if old is not None:
            meta = {**old["metadata"], **body["metadata"]}
            generation = old["metadata"]["generation"] + (old.get("spec") != body.get("spec"))
            body = {**old, **body, "metadata": {**meta, "generation": generation}}
            body["status"] = old.get("status")
        body = {k: v for k, v in body.items() if v is not None}
        self.server.put(body, "apply")
        return _as(type(obj), body)

    async def replace(self, obj: Any, namespace: str | None = None, **_: Any) -> Any:
        return await self.apply(obj, namespace)

    async def patch(
        self, resource: Any, name: str, obj: Any, *, namespace: str | None = None, **kw: Any
    ) -> Any:
        kind, sub = _kind_of(resource)
        key = f"{namespace}/{name}" if namespace else name
        old = self.server.found(kind, key)
        if kw.get("patch_type") == PatchType.JSON:
            raise NotImplementedError("JSON patches are not needed by the traced passes")
        patch = _body(obj)
        wanted = (patch.get("metadata") or {}).pop("resourceVersion", None)
        if wanted is not None and wanted != old["metadata"]["resourceVersion"]:
            raise _status(409, "Conflict", "the object has been modified; please apply your changes")
        if sub == "status":
            patch = {"status": patch.get("status")}
        body = _merged(old, patch)
        self.server.put(body, f"patch {sub or ''}".strip())
        return _as(resource, body)

    async def get(self, resource: Any, name: str, *, namespace: str | None = None, **_: Any) -> Any:
        kind, _sub = _kind_of(resource)
        return _as(resource, self.server.found(kind, f"{namespace}/{name}" if namespace else name))

    async def delete(self, resource: Any, name: str, *, namespace: str | None = None, **_: Any) -> None:
        kind, _sub = _kind_of(resource)
        key = f"{namespace}/{name}" if namespace else name
        self.server.found(kind, key)
        self.server.drop(kind, key)

    async def list(
        self,
        resource: Any,
        *,
        namespace: str | None = None,
        labels: Mapping[str, Any] | None = None,
        **_: Any,
    ) -> AsyncIterator[Any]:
        for body in self.server.listed(_kind_of(resource)[0], namespace, labels):
            yield _as(resource, body)


class Recorder:
    """Events: kept, not sent."""

    def __init__(self) -> None:
        self.events: list[str] = []

    async def record(self, ref: Any, kind: Any, reason: str, message: str) -> None:
        self.events.append(f"{reason}: {message}")


@dataclass
class Health:
    """Members' readiness as the bench decides it: the clusters in `ready` are."""

    outcome: Callable[[bool, str], Any]
    ready: set[str] = field(default_factory=set)

    async def check(self, target: Any, checks: Iterable[Any], **_: Any) -> Any:
        ok = target.name in self.ready
        return self.outcome(ok, "ready" if ok else "Deployment is not available yet")


# --- the world: a management cluster with three members ---------------------------------------------


@dataclass
class World:
    server: Server
    members: dict[str, Server]
    health: Health
    ctx: Any
    now: list[datetime]
    # What a controller keeps between its own passes (its delivery memory), when the tree has it.
    kept: dict[str, Any] = field(default_factory=dict)

    def tick(self, seconds: float) -> None:
        self.now[0] += timedelta(seconds=seconds)


def _member_objects(env: str) -> list[Obj]:
    name = f"{env}-1"
    kubeconfig = base64.b64encode((KUBECONFIG % name).encode()).decode()
    cluster = {
        "apiVersion": "fleetwave.io/v1alpha1",
        "kind": "MemberCluster",
        "metadata": {"name": name, "namespace": FLEET_NS, "labels": {"env": env}},
        "spec": {"kubeconfigSecretRef": {"name": f"{name}-kubeconfig"}},
        "status": {"ready": True},
    }
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": f"{name}-kubeconfig", "namespace": FLEET_NS},
        "data": {"kubeconfig": kubeconfig},
    }
    return [cluster, secret]


def _patch_member_sessions(members: dict[str, Server]) -> None:
    """Members are reached through `Client`s on their own `Server`s, not over HTTP."""
    target = importlib.import_module("fleetwave.delivery.target")

    @asynccontextmanager
    async def session(self: Any) -> AsyncIterator[Client]:
        yield Client(members.setdefault(self.name, Server()))

    target.MemberTarget.session = session


def world(seed: Iterable[Obj]) -> World:
    """A management cluster holding the members and `seed`, and a Context reading it."""
    ctx_mod = module(CONTEXT)
    kinds = importlib.import_module("fleetwave.kube.kinds")
    models = importlib.import_module("fleetwave.api.models")
    kinds.register_all()
    server = Server([*models.KINDS, "ConfigMap", "Secret", "Namespace"])
    for env in ENVS:
        for body in _member_objects(env):
            server.put(body)
    for body in seed:
        server.put(copy.deepcopy(body))
    members: dict[str, Server] = {}
    _patch_member_sessions(members)
    health = Health(ctx_mod.HealthOutcome)
    now = [T0]
    ctx = ctx_mod.Context(
        client=Client(server),
        cache=ctx_mod.Cache(server.informers),
        recorder=Recorder(),
        helm=None,
        health=health,
        namespace="fleetwave-system",
        clock=lambda: now[0],
    )
    return World(server, members, health, ctx, now)


# --- the two scenarios ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Scenario:
    name: str
    traced: str  # which pass is traced, in words
    setup: Callable[[], World]
    reconcile: Callable[[World], Awaitable[Any]]
    between: Callable[[World], None]  # what moves on between the warm-up and the traced pass
    check: Callable[[World], str]  # "" when the traced pass did what `traced` says


def _bench_gates() -> Any:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    return importlib.import_module("bench_gates")


PROMOTION_NAME = "trace-reconcile"
PROFILE_LABEL = "fleetwave.io/cluster-profile"  # on a ClusterSummary: the profile it belongs to


def _promotion_world() -> World:
    bg = _bench_gates()
    return world([bg.promotion(PROMOTION_NAME, gated=False), bg.policy_configmap(PROMOTION_NAME, 1)])


async def _promotion_pass(w: World) -> Any:
    return await module(PROMOTION).reconcile(w.ctx, PROMOTION_NAME)


def _dev_summaries_ready(w: World) -> None:
    """The dev stage's ClusterSummaries report the content delivered and ready."""
    ss = module(SUMMARY_STATUS)
    for (kind, _), body in list(w.server.bodies.items()):
        profile = (body["metadata"].get("labels") or {}).get(PROFILE_LABEL)
        if kind == "ClusterSummary" and profile == f"{PROMOTION_NAME}-dev":
            wanted = body["metadata"].get("annotations", {}).get(ss.CONTENT_HASH_ANNOTATION)
            ready = {"type": "Ready", "status": "True", "reason": "Provisioned", "message": "ready"}
            status = {**(body.get("status") or {}), "observedContentHash": wanted, "conditions": [ready]}
            w.server.put({**copy.deepcopy(body), "status": status}, "summary ready")
    w.tick(5)


def _staging_profile_written(w: World) -> str:
    if ("ClusterProfile", f"{PROMOTION_NAME}-staging") not in w.server.bodies:
        return "the staging stage's profile was not written"
    return ""


STAGED = "bench-staged"


def _run_world() -> World:
    bg = _bench_gates()
    sn = module(SNAPSHOTS)
    selected = bg.content(STAGED, 1)
    snapshot = sn.snapshot_body(
        "ClusterResourceSnapshot", STAGED, None, 0, selected, sn.content_hash(selected)
    )
    run = {
        "apiVersion": "fleetwave.io/v1alpha1",
        "kind": "ClusterStagedUpdateRun",
        "metadata": {"name": f"{STAGED}-1"},
        "spec": {"placementName": STAGED, "resourceSnapshotIndex": "0", "stagedRolloutStrategyName": STAGED},
    }
    return world([bg.staged_placement(), bg.staged_strategy(), snapshot, run])


async def _run_pass(w: World) -> Any:
    run, key = module(RUN), f"{STAGED}-1"
    if "memory" not in inspect.signature(run.reconcile).parameters:  # before ADR 0102
        return await run.reconcile(w.ctx, module(NAMING).CLUSTER, key)
    memory = w.kept.setdefault("delivery", module(EXECUTOR).DeliveryMemory())
    return await run.reconcile(w.ctx, memory, module(NAMING).CLUSTER, key)


def _dev_cluster_ready(w: World) -> None:
    w.health.ready.add(f"{FLEET_NS}/dev-1")
    w.tick(5)


def _staging_cluster_applied(w: World) -> str:
    staging = w.members.get(f"{FLEET_NS}/staging-1")
    if staging is None or not any(k == "Deployment" for k, _ in staging.bodies):
        return "nothing was applied to the staging stage's cluster"
    return ""


SCENARIOS = (
    Scenario(
        "promotion",
        "a ClusterPromotion pass that admits the next stage (dev's summary ready -> staging's profile"
        " written), after warm-up passes that pin the content and start dev",
        _promotion_world,
        _promotion_pass,
        _dev_summaries_ready,
        _staging_profile_written,
    ),
    Scenario(
        "staged run",
        "a ClusterStagedUpdateRun pass that advances one cluster (dev's cluster found available ->"
        " staging's cluster applied), after warm-up passes that initialize the run and apply dev",
        _run_world,
        _run_pass,
        _dev_cluster_ready,
        _staging_cluster_applied,
    ),
)


WARM_UP_PASSES = 5


async def warm_up(scenario: Scenario, w: World) -> int:
    """Passes until one writes nothing, as the controller's own write events would run them: they add
    the finalizer, pin the content, initialize the rollout and start its first stage, and import
    whatever a pass imports lazily. Returns how many passes were made."""
    for passes in range(1, WARM_UP_PASSES + 1):
        before = len(w.server.writes) + sum(len(m.writes) for m in w.members.values())
        await scenario.reconcile(w)
        w.tick(1)
        if len(w.server.writes) + sum(len(m.writes) for m in w.members.values()) == before:
            return passes
    raise RuntimeError(f"{scenario.name}: still writing after {WARM_UP_PASSES} warm-up passes")


async def measure(scenario: Scenario, src: Path, top: int) -> Obj:
    w = scenario.setup()
    passes = await warm_up(scenario, w)
    scenario.between(w)
    if scenario.check(w) == "":
        raise RuntimeError(f"{scenario.name}: already done before the traced pass")
    tracer = Tracer(src)
    await tracer.trace(scenario.reconcile(w))
    problem = scenario.check(w)
    if problem:
        raise RuntimeError(f"{scenario.name}: {problem}; writes: {w.server.writes}")
    return {"traced": scenario.traced, "warm_up_passes": passes, **tracer.summary(top)}


def child(src: Path, top: int) -> None:
    """Measure in this process, whose PYTHONPATH starts with `src`; one JSON document on stdout."""
    fleetwave = importlib.import_module("fleetwave")
    if not Path(str(fleetwave.__file__)).resolve().is_relative_to(src.resolve()):
        raise SystemExit(f"fleetwave was imported from {fleetwave.__file__}, not from {src}")

    async def both() -> Obj:
        return {s.name: await measure(s, src, top) for s in SCENARIOS}

    print(json.dumps(asyncio.run(both())))


# --- the parent: one subprocess per tree, one table ---------------------------------------------------


def _commit(src: Path) -> str:
    found = subprocess.run(
        ["git", "-C", str(src), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    )
    return found.stdout.strip() or "?"


def run_tree(src: Path, top: int) -> Obj:
    # One hash seed for every tree: a difference between trees is never one of set iteration order.
    env = {**os.environ, "PYTHONPATH": str(src), "PYTHONHASHSEED": "0"}
    argv = [sys.executable, str(Path(__file__).resolve()), "--child", str(src), "--top", str(top)]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{src}: the measurement failed\n{done.stderr}")
    measured: Obj = json.loads(done.stdout)
    return measured


def report(sources: list[Path], results: list[Obj], top: int) -> None:
    print(f"date: {datetime.now().astimezone().strftime('%Y-%m-%d %H:%M %Z')}")
    print(f"machine: {platform.machine()}, {os.cpu_count()} cpus, Python {platform.python_version()}")
    print(f"command: {shlex.join(sys.orig_argv)}")
    for scenario in SCENARIOS:
        passes = " / ".join(str(r[scenario.name]["warm_up_passes"]) for r in results)
        print(f"traced, {scenario.name}: {scenario.traced} (warm-up passes: {passes})")
    print()
    heads = [f"{src} ({_commit(src)})" for src in sources]
    print("| Reconcile | Measure | " + " | ".join(heads) + " |")
    print("|---|---|" + "---:|" * len(heads))
    for scenario in SCENARIOS:
        for measure_ in ("files", "functions", "calls"):
            cells = " | ".join(f"{r[scenario.name][measure_]:,}" for r in results)
            print(f"| {scenario.name} | {measure_} | {cells} |")
    for src, result in zip(sources, results, strict=True):
        for scenario in SCENARIOS if top else ():
            print(f"\n{src}, {scenario.name}: the {top} files with the most calls (calls, functions)")
            for path, calls, functions in result[scenario.name]["top"]:
                print(f"  {calls:6,} {functions:4}  {path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--src", action="append", type=Path, help="a fleetwave source tree (repeatable)")
    parser.add_argument("--top", type=int, default=0, help="also list the N files with the most calls")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        child(args.child, args.top)
        return
    sources = args.src or [ROOT / "src"]
    report(sources, [run_tree(src.resolve(), args.top) for src in sources], args.top)


if __name__ == "__main__":
    main()
