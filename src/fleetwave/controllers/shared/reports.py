"""Wake-ups for pull members' reports (ADR 0106): a reconcile that found no current report from a
member's agent asks to be woken when that member's work changes."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

from fleetwave.runtime.watching import object_key


class Reports:
    """Who waits for a report: a reconcile that read no current report (or one not yet final) asks to
    be woken when the work changes; the MemberWork informer's events wake it (once)."""

    def __init__(self) -> None:
        self._waiting: dict[str, dict[Hashable, tuple[Hashable, Callable[[], None]]]] = {}
        self._reported: dict[str, str] = {}  # work key -> its status as last seen

    def forget(self, work_key: str) -> None:
        """The work is gone: nobody waits for it any more."""
        self._waiting.pop(work_key, None)
        self._reported.pop(work_key, None)

    def wait(self, work_key: str, key: Hashable, call: Callable[[], None]) -> None:
        """`call()` once, at the next change of the work `namespace/name`."""
        self._waiting.setdefault(work_key, {})[key] = (key, call)

    def on_change(self, event: str, obj: Any) -> None:
        """Wake the waiters on a new report (or the work's removal); the events of the hub's own
        writes of the work leave its status as it was and wake nobody."""
        key = object_key(obj)
        if event == "DELETED":
            self._reported.pop(key, None)
        else:
            status = repr(getattr(obj, "status", None))
            if self._reported.get(key) == status:
                return
            self._reported[key] = status
        for _key, call in self._waiting.pop(key, {}).values():
            call()

    def __len__(self) -> int:
        return sum(len(w) for w in self._waiting.values())
