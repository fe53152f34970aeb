"""A version that moves on every change, and a wait for it to move: how the web page's board source
tells each open page's event stream that there is something new (no polling)."""

from __future__ import annotations

import asyncio


class Changes:
    def __init__(self) -> None:
        self.version = 0
        self._moved = asyncio.Event()

    def bump(self) -> None:
        """Count a change and wake every waiter (each waits on the event of the version it saw)."""
        self.version += 1
        self._moved.set()
        self._moved = asyncio.Event()

    async def wait_change(self, seen: int) -> int:
        """Return the version once it differs from `seen`."""
        while self.version == seen:
            await self._moved.wait()
        return self.version
