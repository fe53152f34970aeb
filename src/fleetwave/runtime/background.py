"""A bounded queue drained in order by one task: how Events and notifications leave a reconcile's path.

`put` never waits: past `max_pending` an item is dropped and counted. The draining task lives on the
loop that last put something (a new loop — tests, a restarted controller — gets a new task and queue).
A failing `handle` is logged and the next item goes on. `flush` waits for what was queued; `close`
does so within a time limit, then stops the task.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

log = logging.getLogger(__name__)
T = TypeVar("T")


class BackgroundQueue(Generic[T]):
    def __init__(self, handle: Callable[[T], Awaitable[None]], *, what: str, max_pending: int = 1000) -> None:
        self._handle = handle
        self.what = what
        self.max_pending = max_pending
        self.dropped = 0
        self._pending: asyncio.Queue[T] | None = None
        self._writer: asyncio.Task[None] | None = None

    def put(self, item: T) -> bool:
        """Queue `item`; False (and counted as dropped) when the queue is full."""
        pending = self._queue()
        if pending.qsize() >= self.max_pending:
            self.dropped += 1
            return False
        pending.put_nowait(item)
        return True

    @property
    def left(self) -> int:
        return self._pending.qsize() if self._pending is not None else 0

    async def flush(self) -> None:
        if self._pending is not None:
            await self._pending.join()

    async def close(self, within: float = 5.0) -> None:
        try:
            await asyncio.wait_for(self.flush(), within)
        except TimeoutError:
            log.warning("%d %s not sent within %ss of shutdown", self.left, self.what, within)
        if self._writer is not None:
            self._writer.cancel()
            await asyncio.gather(self._writer, return_exceptions=True)
        self._pending, self._writer = None, None

    def _queue(self) -> asyncio.Queue[T]:
        loop = asyncio.get_running_loop()
        writer = self._writer
        if self._pending is None or writer is None or writer.done() or writer.get_loop() is not loop:
            self._pending = asyncio.Queue()
            self._writer = loop.create_task(self._drain(self._pending), name=f"{self.what} writer")
        return self._pending

    async def _drain(self, pending: asyncio.Queue[T]) -> None:
        while True:
            item = await pending.get()
            try:
                await self._handle(item)
            except Exception:  # one failing item must never stop the writer
                log.exception("%s: sending one failed", self.what)
            finally:
                pending.task_done()
