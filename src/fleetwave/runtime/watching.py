"""Informers: list, then watch from the list's resourceVersion, keeping a local store of one kind.

Any watch failure (410 Gone included) leads to a fresh list with backoff; the relist is diffed
against the store, so handlers also hear about deletions that happened while the watch was down.
Bookmarks are requested through lightkube's request builder, which has no public parameter for them.

An informer of a namespaced kind may be limited to some namespaces (`--watch-namespace`): it then
runs one list-and-watch per namespace — the API has no multi-namespace watch, and a namespaced Role
grants no cluster-wide one — over one store, each relist diffing only its own namespace's slice.

An informer may watch a kind that is not always installed (another project's, such as Cluster API's
`Cluster`, ADR 0109): with `unserved_poll`, a kind the API server does not serve is an empty store
that counts as synced, looked for again every `unserved_poll` seconds, so the controller starts and
runs without it and picks it up once its CRD is installed. `fallbacks` are other versions of the
kind, tried in order when the first is not served.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from typing import Any, Literal

from fleetwave.kube import internals, ops
from fleetwave.kube.client import AsyncClient
from fleetwave.runtime import queueing

log = logging.getLogger(__name__)

EventType = Literal["ADDED", "MODIFIED", "DELETED"]
Handler = Callable[[EventType, Any], None]
ALL_NAMESPACES = "*"
_RELIST_BACKOFF = queueing.Backoff(base=0.2, cap=30.0)
# A just-created CRD's watch cache answers 429 "try again" while it initializes, and a watch resumed
# from a resourceVersion the server has compacted away answers 410 Gone: both are expected (the relist
# is the protocol), so the first few are not worth a warning (a lasting one still is).
_QUIET_BUSY = 3
_EXPECTED = (ops.TOO_MANY_REQUESTS, ops.GONE)


def object_key(obj: Any) -> str:
    """`namespace/name` for namespaced objects, `name` for cluster-scoped ones."""
    meta = obj.metadata
    return f"{meta.namespace}/{meta.name}" if meta.namespace else str(meta.name)


def slimmed(obj: Any) -> Any:
    """`obj` without `metadata.managedFields`, as informers keep it: nothing a controller decides
    reads them (server-side apply keeps them on the server), and they are a large part of every
    object written by two managers (a summary: its profile's apply and its own status), held for
    every object of the kind and converted again on every read (client-go's informers drop them
    the same way, `TransformStripManagedFields`)."""
    if isinstance(obj, dict):  # lightkube's generic resources are dicts: metadata parsed on access
        meta = obj.get("metadata")
        if isinstance(meta, dict):
            meta.pop("managedFields", None)
            return obj
    meta = getattr(obj, "metadata", None)
    if meta is not None and getattr(meta, "managedFields", None) is not None:
        meta.managedFields = None
    return obj


class Informer:
    """Keeps `store` (key -> latest lightkube object, `slimmed`) in step with the API server.

    `namespace=None` watches every namespace of a namespaced kind; `namespaces` names several (it is
    ignored for cluster-scoped kinds). Handlers run synchronously on the event loop and must be quick
    (typically: map the object to keys and enqueue them).
    """

    def __init__(
        self,
        client: AsyncClient,
        resource: type[Any],
        *,
        namespace: str | None = None,
        namespaces: Iterable[str] = (),
        labels: dict[str, str] | None = None,
        server_timeout: int = 300,
        backoff: queueing.Backoff = _RELIST_BACKOFF,
        unserved_poll: float | None = None,
        fallbacks: Iterable[type[Any]] = (),
    ) -> None:
        self.resource = resource
        self._candidates = (resource, *fallbacks)
        self._unserved_poll = unserved_poll
        self.served: bool | None = None  # None until the first list; False: not served (yet)
        self._api = client
        namespaced = internals.is_namespaced(resource)
        chosen: list[str | None] = [*sorted({*namespaces, *([namespace] if namespace else [])})]
        # One list-and-watch per entry: None for a cluster-scoped kind, "*" for every namespace.
        self._scopes = (chosen or [ALL_NAMESPACES]) if namespaced else [None]
        self._labels: dict[str, Any] | None = dict(labels) if labels else None
        self._server_timeout = server_timeout
        self._backoff = backoff
        self._store: dict[str, Any] = {}
        # Bumped on every change of the store: what is derived from it can be kept until it moves.
        self.revision = 0
        self._handlers: list[Handler] = []
        self.has_synced = asyncio.Event()
        self.relists = 0
        self.last_error: BaseException | None = None

    @property
    def name(self) -> str:
        return f"{self.resource.__name__}@{','.join(s or 'cluster' for s in self._scopes)}"

    @property
    def namespaces(self) -> tuple[str, ...] | None:
        """The namespaces watched; None when every one is (or the kind is cluster-scoped)."""
        if self._scopes in ([None], [ALL_NAMESPACES]):
            return None
        return tuple(s for s in self._scopes if s)

    @property
    def store(self) -> Mapping[str, Any]:
        return self._store

    def get(self, key: str) -> Any | None:
        return self._store.get(key)

    def on_change(self, handler: Handler) -> None:
        self._handlers.append(handler)

    async def run(self) -> None:
        """List and watch until cancelled."""
        if len(self._scopes) == 1:
            await self._run(self._scopes[0], self.has_synced)
            return
        synced = [asyncio.Event() for _ in self._scopes]
        loops = [asyncio.create_task(self._run(s, e)) for s, e in zip(self._scopes, synced, strict=True)]
        try:
            await asyncio.gather(*(e.wait() for e in synced))
            self.has_synced.set()
            await asyncio.gather(*loops)
        finally:
            for loop in loops:
                loop.cancel()
            await asyncio.gather(*loops, return_exceptions=True)

    async def _run(self, scope: str | None, synced: asyncio.Event) -> None:
        failures = 0
        where = self.name if len(self._scopes) == 1 else f"{self.resource.__name__}@{scope}"
        while True:
            try:
                resource_version = await self._relist(scope)
                synced.set()
                async for _ in self._watch(scope, resource_version):
                    failures = 0  # the stream is healthy again; restart backoff from the base
            except asyncio.CancelledError:
                raise
            except _Unserved:
                failures = 0
                self._replace(scope, {})  # what it held (served before) is gone with the kind
                synced.set()
                await asyncio.sleep(self._unserved_poll or 0)
            except Exception as exc:  # any failure means our view may be stale: relist
                failures += 1
                self.last_error = exc
                delay = self._backoff.delay(failures)
                expected = isinstance(exc, ops.StatusError) and ops.code_of(exc) in _EXPECTED
                level = logging.DEBUG if expected and failures <= _QUIET_BUSY else logging.WARNING
                log.log(level, "informer %s: %s; relisting in %.2fs", where, exc, delay)
                await asyncio.sleep(delay)

    async def _relist(self, scope: str | None) -> str:
        listing, fresh = await self._list(scope)
        resource_version: str = listing.resourceVersion
        self._replace(scope, fresh)
        return resource_version

    async def _list(self, scope: str | None) -> tuple[Any, dict[str, Any]]:
        """The listing and its objects, of the first candidate version served; _Unserved when none
        is and that is allowed (`unserved_poll`)."""
        for resource in self._candidates:
            listing = self._api.list(resource, namespace=scope, labels=self._labels, chunk_size=500)
            try:
                fresh = {object_key(obj): slimmed(obj) async for obj in listing}
            except ops.StatusError as e:
                if self._unserved_poll is None or not ops.is_unserved(e):
                    raise
                continue
            if self.served is not True:
                log.info("informer %s: %s is served", self.name, _api_version(resource))
            self.resource, self.served = resource, True
            return listing, fresh
        if self.served is not False:
            log.info(
                "informer %s: not served by the API server; looking again every %ss",
                self.name,
                self._unserved_poll,
            )
        self.served = False
        raise _Unserved()

    def _replace(self, scope: str | None, fresh: dict[str, Any]) -> None:
        """Make the store (this scope's slice of it) `fresh`, telling the handlers what changed."""
        if len(self._scopes) == 1:
            old, self._store = self._store, fresh
        else:  # this scope's slice of the store; the other namespaces' loops keep theirs
            old = {k: o for k, o in self._store.items() if o.metadata.namespace == scope}
            for key in old.keys() - fresh.keys():
                del self._store[key]
            self._store.update(fresh)
        self.revision += 1
        self.relists += 1
        for key, obj in fresh.items():
            previous = old.get(key)
            if previous is None:
                self._dispatch("ADDED", obj)
            elif previous.metadata.resourceVersion != obj.metadata.resourceVersion:
                self._dispatch("MODIFIED", obj)
        for key, obj in old.items():
            if key not in fresh:
                self._dispatch("DELETED", obj)

    async def _watch(self, scope: str | None, resource_version: str) -> AsyncIterator[None]:
        """Apply watch events to the store; yields after each so `run` can see the stream is alive."""
        async for event_type, obj in self._open_watch(scope, resource_version):
            if event_type == "BOOKMARK":
                yield None
                continue
            key = object_key(obj)
            if event_type == "DELETED":
                self._store.pop(key, None)
            else:
                self._store[key] = slimmed(obj)
            self.revision += 1
            self._dispatch("DELETED" if event_type == "DELETED" else _upsert(event_type), obj)
            yield None

    def _open_watch(self, scope: str | None, resource_version: str) -> AsyncIterator[tuple[str, Any]]:
        return internals.watch_with_bookmarks(
            self._api,
            self.resource,
            namespace=scope,
            labels=self._labels,
            resource_version=resource_version,
            server_timeout=self._server_timeout,
        )

    def _dispatch(self, event_type: EventType, obj: Any) -> None:
        for handler in self._handlers:
            try:
                handler(event_type, obj)
            except Exception:  # one faulty handler must not stop the informer or its siblings
                log.exception("informer %s: handler failed on %s", self.name, event_type)


class _Unserved(Exception):
    """None of an informer's versions is served, and it may wait for one (`unserved_poll`)."""


def _api_version(resource: type[Any]) -> str:
    info = getattr(resource, "_api_info", None)
    version = getattr(getattr(info, "resource", None), "api_version", None)
    return str(version or resource.__name__)


def _upsert(event_type: str) -> EventType:
    return "ADDED" if event_type == "ADDED" else "MODIFIED"


async def wait_synced(informers: list[Informer]) -> None:
    await asyncio.gather(*(informer.has_synced.wait() for informer in informers))
