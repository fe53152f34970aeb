"""Writes whose own watch event need not wake their writer (ADR 0068).

A controller that writes an object (a rollout its status, a profile its summaries, a promotion its
stage profiles) is woken by that object's changes, and the event of its own write brings it nothing
new: every other change the object holds came with an event of its own, and the writer knows what it
wrote. That event usually comes in before the write's response has been read, so a wake for the
writer that comes while the write is in flight is held until the write returns: dropped when it is
the write's own version, let through otherwise (a failed write lets every held wake through). An
echo that comes after the response is dropped the same way. Versions are compared for equality only.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Hashable
from typing import TypeVar

T = TypeVar("T")
Wake = Callable[[], None]
_Slot = tuple[Hashable, str]  # (the written object's key, the writing controller's kind)


class Echoes:
    def __init__(self, horizon: float = 10.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.horizon = horizon  # a write whose event has not come by then is forgotten
        self._clock = clock
        self._writing: dict[_Slot, int] = {}
        self._held: dict[_Slot, list[tuple[str | None, Wake]]] = {}
        self._returned: dict[_Slot, list[str]] = {}  # versions written while others are in flight
        self._written: dict[_Slot, tuple[str, float]] = {}  # written, its event not come yet

    def begin(self, key: Hashable, by: str) -> None:
        slot = (key, by)
        self._writing[slot] = self._writing.get(slot, 0) + 1

    def end(self, key: Hashable, by: str, version: str | None) -> None:
        """The write `begin` announced returned `version` (None: it failed or wrote nothing)."""
        slot = (key, by)
        left = self._writing.get(slot, 1) - 1
        if version:
            self._returned.setdefault(slot, []).append(version)
        if left > 0:
            self._writing[slot] = left
            return
        self._writing.pop(slot, None)
        versions = self._returned.pop(slot, [])
        held = self._held.pop(slot, [])
        came = {v for v, _ in held}
        for version_held, wake in held:
            if version_held not in versions:
                wake()
        now = self._clock()
        if len(self._written) >= _PRUNE_AT:  # events that never came (a watch that was down)
            self._written = {s: w for s, w in self._written.items() if now - w[1] <= self.horizon}
        for written in versions:
            if written not in came:
                self._written[slot] = (written, now)

    def arrived(self, key: Hashable, by: str, version: str | None, wake: Wake) -> bool:
        """An event of `key` at `version` would wake the `by` controller with `wake`: whether it is
        taken care of here (an echo, or held until the write in flight returns)."""
        slot = (key, by)
        if slot in self._writing:
            self._held.setdefault(slot, []).append((version, wake))
            return True
        written = self._written.get(slot)
        if written is None or written[0] != version:
            return False
        del self._written[slot]
        return self._clock() - written[1] <= self.horizon


async def tracked(
    echoes: Echoes, key: Hashable, by: str, write: Awaitable[T], version: Callable[[T], str | None]
) -> T:
    """Await `write` of `key`'s object by the `by` controller, its echo known as one."""
    echoes.begin(key, by)
    written: str | None = None
    try:
        result = await write
        written = version(result)
        return result
    finally:
        echoes.end(key, by, written)


_PRUNE_AT = 4096
