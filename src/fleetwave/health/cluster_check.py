"""Judge one member cluster: readiness of delivered objects, then the user's health checks.

Synchronous on purpose (Lua's getResource reads the cluster from inside the script); the controller
runs it inside a sandbox worker process (`fleetwave.sandbox`), never on its own threads.

With `request_seconds`, every read of the member (discovery included) ends within that time, and a
member that did not answer once is not asked again in the same judgement: a member whose API server
accepts connections and never answers costs one short timeout, not the worker's whole wall time.
"""

from __future__ import annotations

import hashlib
import signal
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from types import FrameType
from typing import TypeVar

from fleetwave.api.objects import ObjDict
from fleetwave.api.sveltos import ValidateHealth
from fleetwave.health import checks, readiness
from fleetwave.health.model import DEFAULT_LIMITS, Limits
from fleetwave.health.reader import KindNotServed, KubeResourceReader
from fleetwave.kube import client as kubeclient

ObjectId = tuple[str, str, str | None, str]
T = TypeVar("T")


class NoAnswer(Exception):
    """The member did not answer one request within the judgement's per-request time. Not a
    TimeoutError: the HTTP stack would turn that into its own ReadTimeout and lose whose it was."""


@contextmanager
def _alarm(seconds: float) -> Iterator[None]:
    """Raise NoAnswer in this (the main) thread if the block takes longer than `seconds`. The
    member client's own timeouts are 30 s per read, discovery's too, and a read that trickles resets
    them; a signal interrupts the blocked socket call whatever it waits for (PEP 475)."""
    armed = True

    def ring(signum: int, frame: FrameType | None) -> None:
        if armed:  # a signal landing after the block ended is not this block's timeout
            raise NoAnswer(f"the member's API server did not answer within {seconds:g}s")

    previous = signal.signal(signal.SIGALRM, ring)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        armed = False
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


class BoundedReader:
    """A reader whose every request ends within `seconds`; after one went unanswered, every later
    read fails at once with the same reason (a script retrying getResource 100 times must not turn
    one silent member into 100 timeouts). Only in the main thread: signals are delivered there."""

    def __init__(self, inner: KubeResourceReader, seconds: float) -> None:
        self._inner = inner
        self._seconds = seconds
        self.silent: NoAnswer | None = None

    def list(
        self, api_version: str, kind: str, *, namespace: str | None, label_selector: str | None
    ) -> list[ObjDict]:
        return self._bounded(
            lambda: self._inner.list(api_version, kind, namespace=namespace, label_selector=label_selector)
        )

    def get(self, api_version: str, kind: str, *, namespace: str | None, name: str) -> ObjDict | None:
        return self._bounded(lambda: self._inner.get(api_version, kind, namespace=namespace, name=name))

    def _bounded(self, read: Callable[[], T]) -> T:
        if self.silent is not None:
            raise NoAnswer(str(self.silent))
        try:
            with _alarm(self._seconds):
                return read()
        except NoAnswer as e:
            self.silent = e
            raise


@dataclass(frozen=True, slots=True)
class Verdict:
    ok: bool
    message: str


class Clients:
    """Sync clients kept between judgements in one worker process (connections reused; a handshake
    per judgement was most of its time), keyed by a hash of the kubeconfig, least recently used
    closed first. Not thread-safe: a sandbox worker runs one job at a time."""

    def __init__(self, size: int = 32) -> None:
        self.size = size
        self._clients: OrderedDict[tuple[str, bool], kubeclient.Client] = OrderedDict()

    def get(self, kubeconfig: bytes, allow_insecure: bool) -> kubeclient.Client:
        key = hashlib.sha256(kubeconfig).hexdigest(), allow_insecure
        found = self._clients.get(key)
        if found is None:
            found = kubeclient.client(kubeclient.member_config(kubeconfig, allow_insecure=allow_insecure))
            self._clients[key] = found
            while len(self._clients) > self.size:
                self._clients.popitem(last=False)[1].close()
        self._clients.move_to_end(key)
        return found

    def drop(self, kubeconfig: bytes, allow_insecure: bool, *, close: bool = True) -> None:
        """Forget a client whose judgement failed (its connections may be the reason). `close=False`
        for one interrupted mid-request: its pool's state is unknown, the collector closes its sockets."""
        found = self._clients.pop((hashlib.sha256(kubeconfig).hexdigest(), allow_insecure), None)
        if found is not None and close:
            found.close()


def judge(
    kubeconfig: bytes,
    user_checks: Sequence[ValidateHealth],
    objects: Sequence[ObjectId],
    *,
    limits: Limits = DEFAULT_LIMITS,
    allow_insecure: bool = False,
    clients: Clients | None = None,
    request_seconds: float | None = None,
) -> Verdict:
    """`clients`: where to keep the member's client for the next judgement (default: a fresh client,
    closed afterwards). `request_seconds`: each read's limit (main thread only; None: the client's)."""
    try:
        if clients is None:
            config = kubeclient.member_config(kubeconfig, allow_insecure=allow_insecure)
            with kubeclient.client(config) as client:
                return _judge(_reader(client, request_seconds), user_checks, objects, limits)
        reader = _reader(clients.get(kubeconfig, allow_insecure), request_seconds)
    except kubeclient.KubeconfigRefused as e:
        return Verdict(False, str(e))
    try:
        return _judge(reader, user_checks, objects, limits)
    finally:
        if isinstance(reader, BoundedReader) and reader.silent is not None:
            clients.drop(kubeconfig, allow_insecure, close=False)


def _reader(client: kubeclient.Client, request_seconds: float | None) -> KubeResourceReader | BoundedReader:
    reader = KubeResourceReader(client)
    if request_seconds is None or threading.current_thread() is not threading.main_thread():
        return reader
    return BoundedReader(reader, request_seconds)


def _judge(
    reader: KubeResourceReader | BoundedReader,
    user_checks: Sequence[ValidateHealth],
    objects: Sequence[ObjectId],
    limits: Limits,
) -> Verdict:
    for api_version, kind, namespace, name in objects:
        ref = f"{kind} {namespace + '/' if namespace else ''}{name}"
        try:
            live = reader.get(api_version, kind, namespace=namespace, name=name)
        except KindNotServed as e:
            return Verdict(False, f"{kind} {name}: {e}")
        if live is None:
            return Verdict(False, f"{ref} not found")
        ok, message = readiness.is_ready(live)
        if not ok:
            return Verdict(False, f"{ref}: {message}")
    for result in checks.evaluate_all(user_checks, reader, limits=limits):
        if not result.ok:
            return Verdict(False, f"health check {result.check or ''} failing: {result.message}")
    names = ", ".join(c.name for c in user_checks)
    return Verdict(True, f"ready; health checks passing: {names}" if names else "ready")
