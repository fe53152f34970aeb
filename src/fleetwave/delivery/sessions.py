"""Member API clients shared within one event loop, so deliveries and reads reuse connections.

A client per call cost a TCP and TLS handshake per request to the member (and a kubeconfig parse):
most of a small delivery's time. Clients are keyed by member name and a hash of the kubeconfig, so
a rotated credential never rides on a connection opened with the old one. A client is closed when
it has been idle for `IDLE_SECONDS`, when the pool holds more than `MAX_IDLE` idle clients (least
recently used first), when a transport error retires it, or when the loop's owner closes the pool.
A client in use is never closed under its user.
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field

from fleetwave.kube import client as kubeclient

log = logging.getLogger(__name__)

IDLE_SECONDS = 60.0
MAX_IDLE = 256
_SWEEP_EVERY = 5.0


@dataclass(eq=False, slots=True)
class Entry:
    key: Hashable
    client: kubeclient.AsyncClient = field(repr=False)
    users: int = 0
    last_used: float = 0.0
    retired: bool = False
    answered: float = float("-inf")  # when a use of it last ended without an error


class SessionPool:
    def __init__(self, *, idle_seconds: float = IDLE_SECONDS, max_idle: int = MAX_IDLE) -> None:
        self.idle_seconds, self.max_idle = idle_seconds, max_idle
        self._entries: OrderedDict[Hashable, Entry] = OrderedDict()
        self._closing: set[asyncio.Task[None]] = set()
        self._swept = time.monotonic()
        self.created = 0  # clients opened over the pool's life (benchmarks report reuse)

    def checkout(self, key: Hashable, config: Callable[[], kubeclient.KubeConfig]) -> Entry:
        """The pooled client for `key`, made from `config()` when there is none (which may raise)."""
        entry = self._entries.get(key)
        if entry is None:
            # HTTP/1.1: the member watches stream on this client too, and over one HTTP/2
            # connection a delivery stalled behind a busy watch for minutes (bench_gates; ADR 0068,
            # addendum bc82adb).
            entry = Entry(key, kubeclient.async_client(config()))
            self._entries[key] = entry
            self.created += 1
        self._entries.move_to_end(key)
        entry.users += 1
        self._sweep()
        return entry

    def checkin(self, entry: Entry) -> None:
        entry.users -= 1
        entry.last_used = time.monotonic()
        if entry.retired and entry.users == 0:
            self._close(entry)

    def answered_within(self, key: Hashable, seconds: float) -> bool:
        """Whether the member behind `key` answered a use of its client in the last `seconds`."""
        entry = self._entries.get(key)
        return entry is not None and time.monotonic() - entry.answered < seconds

    def retire(self, entry: Entry) -> None:
        """Stop handing this client out (its connections failed); closed once its last user is done."""
        if self._entries.get(entry.key) is entry:
            del self._entries[entry.key]
        entry.retired = True

    def __len__(self) -> int:
        return len(self._entries)

    def _sweep(self) -> None:
        now = time.monotonic()
        idle = [e for e in self._entries.values() if e.users == 0]
        over = len(idle) - self.max_idle
        if over <= 0 and now - self._swept < _SWEEP_EVERY:
            return
        self._swept = now
        for entry in idle:  # least recently used first
            if over > 0 or now - entry.last_used >= self.idle_seconds:
                over -= 1
                del self._entries[entry.key]
                self._close(entry)

    def _close(self, entry: Entry) -> None:
        task = asyncio.get_running_loop().create_task(_quietly_close(entry.client))
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def close(self) -> None:
        """Close every client (the loop's owner, at shutdown)."""
        entries, self._entries = list(self._entries.values()), OrderedDict()
        await asyncio.gather(*(_quietly_close(e.client) for e in entries), *self._closing)


async def _quietly_close(client: kubeclient.AsyncClient) -> None:
    try:
        await client.close()
    except Exception as exc:  # a broken connection cannot be closed cleanly: nothing to do about it
        log.debug("closing a member client failed: %s", exc)


_POOLS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, SessionPool] = weakref.WeakKeyDictionary()


def pool() -> SessionPool:
    """The running loop's pool: clients are bound to the loop their connections were opened on."""
    loop = asyncio.get_running_loop()
    found = _POOLS.get(loop)
    if found is None:
        found = _POOLS[loop] = SessionPool()
    return found


async def close_pool() -> None:
    """Close the running loop's pool, if it has one."""
    found = _POOLS.pop(asyncio.get_running_loop(), None)
    if found is not None:
        await found.close()
