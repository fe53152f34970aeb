"""Support for the ClusterPromotion integration tests: an in-process controller on its own thread,
waiting helpers, and readers of what actually landed on the members.

The controller runs as the ServiceAccount that `fleetwave install` creates, with a token from the
TokenRequest API, so every module that starts it runs under exactly the installed RBAC (ADR 0047).
A request the RBAC refuses fails the module: `ControllerThread.error` is set when the controller
logged an authorization refusal, even one it survived (Events are best effort, for instance).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
import re
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import httpx2
import pytest
import yaml
from lightkube import ApiError, Client
from lightkube.models.authentication_v1 import TokenRequestSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import ConfigMap, ServiceAccount
from lightkube.types import PatchType

from fleetwave.controllers import app as controllers
from fleetwave.kube import client as kubeclient
from fleetwave.kube import kinds
from fleetwave.local import fleet, processes
from fleetwave.mgmt import install, registration

T = TypeVar("T")
CHARTS = Path(__file__).resolve().parents[1] / "charts"


SERVICE_ACCOUNT_USER = f"system:serviceaccount:{install.NAMESPACE}:{install.SERVICE_ACCOUNT}"
_REFUSED = re.compile(r'User "system:serviceaccount:[^"]+" cannot ')


def service_account_kubeconfig(
    admin_kubeconfig: str,
    *,
    namespace: str = install.NAMESPACE,
    name: str = install.SERVICE_ACCOUNT,
    seconds: int = 6 * 3600,
) -> bytes:
    """`admin_kubeconfig` with its user replaced by a fresh token of the ServiceAccount (TokenRequest
    API; the account must exist: `fleetwave install` first)."""
    with kubeclient.client(kubeclient.config_from_file(admin_kubeconfig)) as admin:
        request = ServiceAccount.Token(
            metadata=ObjectMeta(), spec=TokenRequestSpec(audiences=[], expirationSeconds=seconds)
        )
        issued = admin.create(request, name, namespace=namespace)
    token = issued.status.token if issued.status else None
    assert token, f"no token issued for {namespace}/{name}"
    config = yaml.safe_load(Path(admin_kubeconfig).read_text(encoding="utf-8"))
    user = f"{namespace}-{name}"
    config["users"] = [{"name": user, "user": {"token": token}}]
    for context in config.get("contexts") or []:
        context["context"]["user"] = user
    return json.dumps(config).encode()


class _RefusalLog(logging.Handler):
    """Collects log records that carry an API server's RBAC refusal for a service account."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.refusals: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if record.exc_info:
            text += "\n" + "".join(traceback.format_exception(*record.exc_info))
        if _REFUSED.search(text):
            self.refusals.append(f"{record.name}: {text.strip().splitlines()[-1]}")


class ControllerThread:
    """The real controller (informers, leader election, workers) on a private event loop.

    By default it authenticates as the installed ServiceAccount (`service_account=False`: as
    `kubeconfig`'s own user, the admin); each start gets a fresh token."""

    def __init__(
        self, kubeconfig: str, settings: controllers.Settings, *, service_account: bool = True
    ) -> None:
        self._kubeconfig = kubeconfig
        self._settings = settings
        self._service_account = service_account
        self._loop: asyncio.AbstractEventLoop | None = None
        self._manager: Any = None
        self._thread: threading.Thread | None = None
        self._started = threading.Event()
        self._refusals = _RefusalLog()
        self.kubeconfig: bytes = b""  # what the controller authenticates with
        self.error: BaseException | None = None

    @property
    def user(self) -> str:
        return SERVICE_ACCOUNT_USER if self._service_account else "admin"

    def start(self) -> None:
        self._started.clear()
        if self._service_account:
            self.kubeconfig = service_account_kubeconfig(self._kubeconfig, namespace=self._settings.namespace)
        else:
            self.kubeconfig = Path(self._kubeconfig).read_bytes()
        logging.getLogger("fleetwave").addHandler(self._refusals)
        self._thread = threading.Thread(target=self._main, name="fleetwave-controller", daemon=True)
        self._thread.start()
        assert self._started.wait(30), "controller did not start"

    def _main(self) -> None:
        # asyncio.run, like the CLI: after the manager returns, leftover tasks are cancelled and the
        # loop runs the callbacks that close subprocess pipes (sandbox workers) before it closes.
        try:
            asyncio.run(self._run())
        except BaseException as e:  # surfaced by the tests through .error
            self.error = e

    async def _run(self) -> None:
        self._loop = asyncio.get_running_loop()
        config = kubeclient.config_from_bytes(self.kubeconfig)
        client, watcher = kubeclient.async_client(config), kubeclient.async_client(config)
        try:
            self._manager = controllers.build(
                client, self._settings, handle_signals=False, watch_client=watcher
            )
            self._started.set()
            await self._manager.run()
        finally:
            await client.close()
            await watcher.close()

    def _where(self) -> str:
        """What the controller's thread and its tasks are doing (for a stop that hangs)."""
        frame = sys._current_frames().get(self._thread.ident or -1) if self._thread else None
        lines = traceback.format_stack(frame) if frame is not None else ["(thread gone)"]
        try:  # read from another thread: good enough for a diagnosis, may race
            tasks = list(asyncio.all_tasks(self._loop)) if self._loop is not None else []
        except RuntimeError:
            tasks = []
        for task in tasks:
            frames = task.get_stack(limit=1)
            code = frames[-1].f_code if frames else None
            where = f"{code.co_filename}:{frames[-1].f_lineno} {code.co_name}" if code else ""
            lines.append(f"task {task.get_name()}: {task.get_coro()} {where}\n")
        return "".join(lines[-80:])

    def stop(self) -> None:
        if self._loop is not None and self._manager is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._manager.stop)
            # The manager's own shutdown is bounded at about a minute in the worst case (Events 5 s,
            # notifications 5 s, member watches, member clients and the sandbox 15 s each, after the
            # controllers and the lease): waiting less than that, a slow but bounded stop on a busy
            # machine left a controller running into the next module, holding the leader lease.
            self._thread.join(120)
            assert not self._thread.is_alive(), f"controller did not stop:\n{self._where()}"
        logging.getLogger("fleetwave").removeHandler(self._refusals)
        if self._refusals.refusals and self.error is None:
            shown = "\n".join(sorted(set(self._refusals.refusals))[:20])
            self.error = AssertionError(f"the installed RBAC refused requests of the controller:\n{shown}")


class ControllerProcess:
    """`fleetwave controller run` as a real process, killed without warning when asked."""

    def __init__(
        self, kubeconfig: str, helm: str, log: Path, *, identity: str, extra: tuple[str, ...] = ()
    ) -> None:
        self.kubeconfig, self.helm, self.log = kubeconfig, helm, log
        self.identity, self.extra = identity, extra
        self.proc: subprocess.Popen[bytes] | None = None
        self.generation = 0

    def start(self) -> None:
        self.generation += 1
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "fleetwave",
                    "controller",
                    "run",
                    "--kubeconfig",
                    self.kubeconfig,
                    "--helm",
                    self.helm,
                    "--metrics-port",
                    str(processes.free_port()),
                    "--health-port",
                    str(processes.free_port()),
                    "--identity",
                    f"{self.identity}-{self.generation}",
                    "--allow-loopback-targets",  # the tests' servers listen on 127.0.0.1 (ADR 0096)
                    *self.extra,
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    @property
    def current_identity(self) -> str:
        return f"{self.identity}-{self.generation}"

    def refusals(self) -> list[str]:
        """Requests the installed RBAC refused, from the process's log."""
        return [line for line in self.log.read_text(errors="replace").splitlines() if _REFUSED.search(line)]

    def kill(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)  # a paused replica (SIGSTOP) must hear SIGTERM
            self.proc.terminate()
            self.proc.wait(30)


@contextmanager
def controller_replicas(
    local_fleet: fleet.FleetState,
    helm: str,
    directory: Path,
    identities: Iterable[str],
    extra: tuple[str, ...],
) -> Iterator[list[ControllerProcess]]:
    """Controller processes with these identities, as the installed ServiceAccount, electing a leader
    among themselves (`extra`: their flags, such as a short lease); stopped on the way out."""
    kubeconfig = directory / "controller.kubeconfig"
    kubeconfig.write_bytes(service_account_kubeconfig(local_fleet.cluster(fleet.MANAGEMENT).kubeconfig))
    kubeconfig.chmod(0o600)
    group = [
        ControllerProcess(str(kubeconfig), helm, directory / f"{name}.log", identity=name, extra=extra)
        for name in identities
    ]
    for replica in group:
        replica.start()
    try:
        yield group
    finally:
        for replica in group:
            replica.stop()


def settings(helm: str, identity: str) -> controllers.Settings:
    return controllers.Settings(
        helm_binary=helm,
        metrics_port=processes.free_port(),
        health_port=processes.free_port(),
        identity=identity,
        allow_loopback_targets=True,  # the tests' servers listen on 127.0.0.1 (ADR 0096)
    )


def wait_for(
    probe: Callable[[], T | None],
    *,
    timeout: float = 120.0,
    what: str,
    explain: Callable[[], str] | None = None,
) -> T:
    """Poll `probe` until it returns something truthy; fail with `what`, the last value and, when
    given, `explain()` (the state that says why, read at the moment of failure)."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = probe()
        except ApiError as e:
            last = e
            if e.status.code not in (404, 429):  # 429: storage (re)initializing after a CRD change
                raise
        except httpx2.HTTPStatusError as e:
            last = e
            if e.response.status_code != 429:
                raise
        # An error tolerated above is truthy too: it must never end the wait as if it were the answer.
        if last and not isinstance(last, ApiError | httpx2.HTTPStatusError):
            return last  # type: ignore[no-any-return]
        time.sleep(0.25)
    detail = f"\n{explain()}" if explain is not None else ""
    pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}; last seen: {last!r}{detail}")


def promotion(client: Client, name: str) -> Any:
    return client.get(kinds.resource("ClusterPromotion"), name)


def status(client: Client, name: str) -> dict[str, Any]:
    return dict(promotion(client, name).status or {})


def stage_phases(client: Client, name: str) -> dict[str, str]:
    return {s["name"]: s.get("phase", "") for s in status(client, name).get("stages") or []}


def chart_version(member: Client, namespace: str, release: str) -> str | None:
    try:
        cm = member.get(ConfigMap, f"{release}-config", namespace=namespace)
    except ApiError as e:
        if e.status.code == 404:
            return None
        raise
    return (cm.data or {}).get("chartVersion")


def profiles_of(client: Client, name: str) -> set[str]:
    return {
        p.metadata.name
        for p in client.list(kinds.resource("ClusterProfile"), labels={"fleetwave.io/promotion": name})
    }


@contextmanager
def deleted_after(client: Client, name: str) -> Iterator[None]:
    """Delete the promotion afterwards and wait until its summaries withdrew what they deployed."""
    try:
        yield
    finally:
        client.delete(kinds.resource("ClusterPromotion"), name)

        def gone() -> bool:
            summaries = client.list(kinds.resource("ClusterSummary"), namespace="*")
            return not any(
                (s.metadata.labels or {}).get("fleetwave.io/cluster-profile", "").startswith(name)
                for s in summaries
            )

        wait_for(gone, timeout=90, what=f"summaries of {name} withdrawn")


ENVS = {"member-1": "dev", "member-2": "staging", "member-3": "prod"}


def relabel(management: Client, member: str, env: str) -> None:
    """Move a member registered by `registered` to another env (a test puts it back after)."""
    patch = {"metadata": {"labels": {"env": env}}}
    management.patch(
        kinds.resource("MemberCluster"),
        member,
        patch,
        namespace="fleetwave-system",
        patch_type=PatchType.MERGE,
    )


@contextmanager
def registered(management: Client, state: fleet.FleetState) -> Iterator[None]:
    """fleetwave's CRDs and RBAC, and the three members registered as dev, staging and prod for the
    duration of a module (other modules roll out to "every cluster" and must not see them)."""
    install.install(management)
    for member in state.members:
        registration.register(
            management,
            name=member.name,
            namespace="fleetwave-system",
            kubeconfig=Path(member.kubeconfig).read_bytes(),
            labels={"env": ENVS[member.name]},
        )
    try:
        yield
    finally:  # also when the test failed: later modules must not see these members
        for member in state.members:
            management.delete(kinds.resource("MemberCluster"), member.name, namespace="fleetwave-system")


@contextmanager
def running_controller(
    state: fleet.FleetState, helm: str, identity: str, **overrides: Any
) -> Iterator[ControllerThread]:
    """The controller in a thread for the duration of the block; `overrides` replace Settings fields."""
    chosen = dataclasses.replace(settings(helm, identity), **overrides)
    thread = ControllerThread(state.cluster(fleet.MANAGEMENT).kubeconfig, chosen)
    thread.start()
    try:
        yield thread
    finally:
        thread.stop()
    assert thread.error is None, thread.error


@contextmanager
def registered_controller(
    state: fleet.FleetState, management: Client, helm: str, identity: str, **overrides: Any
) -> Iterator[ControllerThread]:
    """`registered` members and a `running_controller` for a module's tests, in that order."""
    with registered(management, state), running_controller(state, helm, identity, **overrides) as thread:
        yield thread
