"""A thread with an event loop of its own, on which the controller's leader Lease is renewed (ADR 0140).

The holder must renew within `renew_deadline` of its last renewal. On the controller's event loop a
renewal waits for the turn in progress to end, and one long turn (a promotion pass reading a
thousand summaries took 13 s at 100 rollouts over 1,000 clusters) outlasts the deadline: the
process loses its lease although it is well. On a loop of its own, a renewal waits only for the
interpreter lock, which a thread running Python code hands over every few milliseconds
(`sys.getswitchinterval`). What still holds a renewal up is C code that keeps the lock for long —
a full GC sweep — and that sweep is taken only when the lease has room for it (ADR 0139).

Only the Lease requests run there, on a client built, used and closed on that loop: an asyncio
connection belongs to the loop that opened it. Work is handed over as coroutines (`run`): the
caller awaits the result on its own loop, and cancelling the caller cancels the work there.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")

STOP_SECONDS = 5.0  # how long `stop` waits for the thread to end (work still there is cancelled)


class LeaseLoop:
    """An event loop in a daemon thread; `start` before the first `run`, `stop` after the last."""

    def __init__(self, name: str = "fleetwave-leases") -> None:
        self.name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        ready = threading.Event()
        # Daemon: a thread stuck in a request must not keep the process from exiting.
        self._thread = threading.Thread(target=self._serve, args=(ready,), name=self.name, daemon=True)
        self._thread.start()
        ready.wait()

    def _serve(self, ready: threading.Event) -> None:
        loop = self._loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        ready.set()
        try:
            loop.run_forever()
            # Whatever was handed over and is still running (a renewal in flight at stop) ends here.
            left = asyncio.all_tasks(loop)
            for task in left:
                task.cancel()
            loop.run_until_complete(asyncio.gather(*left, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            loop.close()

    @property
    def thread(self) -> threading.Thread | None:
        return self._thread

    async def run(self, work: Coroutine[Any, Any, T]) -> T:
        """`work` run on this loop to its end; its result or exception is the caller's."""
        if self._loop is None or self._loop.is_closed():
            work.close()
            raise RuntimeError(f"the {self.name} loop is not running")
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(work, self._loop))

    async def stop(self) -> None:
        """End the loop (cancelling what still runs there) and wait for its thread, for a while."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None or loop.is_closed():
            return
        loop.call_soon_threadsafe(loop.stop)
        await asyncio.to_thread(thread.join, STOP_SECONDS)
        if thread.is_alive():
            log.warning("the %s thread did not end within %.0fs; exiting without it", self.name, STOP_SECONDS)


async def run_on(lease_loop: LeaseLoop | None, work: Coroutine[Any, Any, T]) -> T:
    """`work` on `lease_loop` if there is one (its client's connections belong to it), else here."""
    return await (work if lease_loop is None else lease_loop.run(work))


__all__ = ["LeaseLoop", "run_on"]
