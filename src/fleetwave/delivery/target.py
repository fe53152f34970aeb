"""One member cluster to deliver to: its name and kubeconfig, an API session, a private kubeconfig file.

A transport failure talking to the member (connection refused, timeout, DNS) becomes
`MemberUnreachable`, which the controller maps to "waiting"; everything else is reported, not raised.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol
from urllib.parse import urlsplit

from fleetwave.delivery import sessions
from fleetwave.kube import client as kubeclient
from fleetwave.kube import ops


class MemberUnreachable(Exception):
    """The member's API server could not be reached; retry later."""

    def __init__(self, cluster: str, detail: str) -> None:
        super().__init__(f"member cluster {cluster!r} is unreachable: {detail}")
        self.cluster = cluster
        self.detail = detail


class CredentialsRefused(MemberUnreachable):
    """The member's kubeconfig did not pass the policy (`kubeconfig_policy`): nothing was sent."""


@dataclass(frozen=True, slots=True)
class MemberTarget:
    name: str
    kubeconfig: bytes = field(repr=False)  # credentials: never in logs or reprs
    allow_insecure: bool = False  # http:// or skip-TLS-verify servers, opted in on the MemberCluster
    # `namespace/name` of the tenant admin the kubeconfig acts as (ADR 0111), "" for fleetwave itself
    tenant: str = ""

    @classmethod
    def from_file(cls, name: str, path: str | Path) -> MemberTarget:
        return cls(name=name, kubeconfig=Path(path).read_bytes())

    @asynccontextmanager
    async def session(self) -> AsyncIterator[kubeclient.AsyncClient]:
        """A client for this member from the event loop's pool (its connections are reused: no TLS
        handshake per call); transport errors become MemberUnreachable and retire the client."""
        pool = sessions.pool()
        entry = pool.checkout(self.pool_key(), self.config)
        try:
            yield entry.client
            entry.answered = time.monotonic()
        except ops.TransportError as err:
            pool.retire(entry)
            raise MemberUnreachable(self.name, f"{type(err).__name__}: {err}") from err
        finally:
            pool.checkin(entry)

    def pool_key(self) -> tuple[str, bool]:
        """Clients are shared only for identical kubeconfigs (server and credentials): a rotated one
        gets its own, and registrations of one server with one kubeconfig share one."""
        return hashlib.sha256(self.kubeconfig).hexdigest(), self.allow_insecure

    def config(self) -> kubeclient.KubeConfig:
        """The member's kubeconfig once it passed the policy (no exec plugins, local files or
        proxies: it was written by someone else); a refused one makes the member unreachable."""
        try:
            return kubeclient.member_config(self.kubeconfig, allow_insecure=self.allow_insecure)
        except kubeclient.KubeconfigRefused as e:
            raise CredentialsRefused(self.name, str(e)) from None

    def server_host(self) -> str:
        """The host of the member's API server, as its checked kubeconfig names it."""
        current = self.config().get()
        return (urlsplit(current.cluster.server).hostname or "") if current is not None else ""

    @contextmanager
    def kubeconfig_file(self) -> Iterator[Path]:
        """The kubeconfig in a private (0700) directory as a 0600 file, removed afterwards; the
        directory also serves as helm's cache/config home so concurrent runs never share state.
        Only the policy's canonical document is written: helm would run an exec plugin or read a
        file the author's own text names, and reads a repeated name differently."""
        try:
            text = kubeclient.member_kubeconfig_text(self.kubeconfig, allow_insecure=self.allow_insecure)
        except kubeclient.KubeconfigRefused as e:
            raise CredentialsRefused(self.name, str(e)) from None
        directory = Path(tempfile.mkdtemp(prefix="fleetwave-member-"))
        try:
            path = directory / "kubeconfig"
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.write(text)
            yield path
        finally:
            shutil.rmtree(directory, ignore_errors=True)


class Target(Protocol):
    """Where manifests are applied: a member cluster, or the management cluster itself."""

    @property
    def name(self) -> str: ...

    def session(self) -> AbstractAsyncContextManager[kubeclient.AsyncClient]: ...


@dataclass(frozen=True, slots=True)
class ManagementTarget:
    """The management cluster, through the controller's own client (Sveltos `deploymentType: Local`):
    what it may do there is exactly what the controller's RBAC allows (ADR 0064)."""

    client: kubeclient.AsyncClient = field(repr=False)
    name: str = "management cluster"

    @asynccontextmanager
    async def session(self) -> AsyncIterator[kubeclient.AsyncClient]:
        try:
            yield self.client  # shared with the controller: never closed here
        except ops.TransportError as err:
            raise MemberUnreachable(self.name, f"{type(err).__name__}: {err}") from err
