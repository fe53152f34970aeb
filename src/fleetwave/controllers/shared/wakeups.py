"""How one controller wakes another (ADR 0102): the ports `Context` refers to, each with one writer
per message and one reader.

`Queues`: the work queues of one API family's controllers by the kind each reconciles, filled in by
the composition root once the controllers exist (`app`, `kubefleet.register`); a reconcile asks
`Context.wake` for a wake-up of a key of any of them.

`Wakeups`: what the Sveltos-style controllers leave for a ClusterProfile's next watch event. A
promotion that wrote a stage profile without writing its summaries ahead expects the version it wrote
(`expect_version`): the event of exactly that version wakes the profile's pass at once instead of
`watches.STAGE_PROFILE_AHEAD` later (`arrived`, asked by the composition root's profile watch). A
summary that found its profile not yet as it needs it waits for that profile (`await_profile`): the
profile's next event wakes it (`take_waiting`, asked by the summaries' profile watch).

A promotion's write of a stage profile is also left here as the API server returned it
(`profile_written`): until the profile's watch shows that version (`profile_event`), a summary judges
itself against it (`as_written`), and the summaries waiting on the profile are woken when the write
returns, not when its event comes. Under load the profile watch ran seconds behind the writes, and
the summaries the promotion wrote with the profile waited for it that long. A profile the promotion
created stands for itself the same way while the cache does not show it yet, for at most
`UNSEEN_CREATION_TRUSTED` seconds: its summaries are written after the creation returns, and found
it missing from the cache, retrying with backoff until its creation event came (ADR 0128).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from fleetwave.controllers.shared.keys import SummaryKey
from fleetwave.controllers.shared.own_writes import later_version

Enqueue = Callable[[str], None]

# Seconds a promotion's write of a profile stands in for it while the cache does not show the profile
# at all. The profile's events end it sooner; the bound is for a profile deleted before its watch
# showed it (a relist in between shows neither its creation nor its deletion): its summaries, whose
# owner is gone, are garbage collected meanwhile.
UNSEEN_CREATION_TRUSTED = 60.0


class Queues:
    def __init__(self) -> None:
        self._enqueue: dict[str, Enqueue] = {}

    def add(self, kind: str, enqueue: Enqueue) -> None:
        """`enqueue(key)` puts a key on the queue of the controller of `kind` (once per kind)."""
        if kind in self._enqueue:
            raise ValueError(f"the work queue of {kind} is wired already")
        self._enqueue[kind] = enqueue

    def of(self, kind: str) -> Enqueue | None:
        """The enqueue of `kind`'s controller; None before the controllers exist, or for a kind no
        controller of this family reconciles."""
        return self._enqueue.get(kind)


class Wakeups:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._expected: dict[str, str] = {}  # profile name -> the version a promotion wrote
        self._waiting: dict[str, set[SummaryKey]] = {}  # profile name -> summaries waiting on it
        # profile name -> the stage profile as a promotion's write returned it, and when (clock), until
        # its event comes
        self._written: dict[str, tuple[Mapping[str, Any], float]] = {}

    def expect_version(self, profile: str, version: str) -> None:
        """A promotion wrote `version` of stage profile `profile`: its event is due a pass at once."""
        self._expected[profile] = version

    def arrived(self, profile: str, version: str | None) -> bool:
        """Whether the event of `version` of `profile` is the one a promotion expects (once: a later
        event of it is an ordinary change again)."""
        if version is None or self._expected.get(profile) != version:
            return False
        del self._expected[profile]
        return True

    def await_profile(self, profile: str, summary: SummaryKey) -> None:
        """`summary` found `profile` not yet as it needs it: the profile's next event wakes it."""
        self._waiting.setdefault(profile, set()).add(summary)

    def take_waiting(self, profile: str) -> list[SummaryKey]:
        """The summaries waiting on `profile`'s next event, in key order (once: they wait no longer)."""
        return sorted(self._waiting.pop(profile, ()), key=lambda s: s.key)

    def profile_written(self, profile: str, stored: Mapping[str, Any]) -> list[SummaryKey]:
        """A promotion's write of stage profile `profile` returned `stored`: summaries judge
        themselves against it until the profile's watch shows it; those waiting on the profile, to be
        woken now (once)."""
        self._written[profile] = (stored, self._clock())
        return self.take_waiting(profile)

    def as_written(self, profile: str, cached: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
        """`profile` as a summary should judge itself against: `cached` (the cache's version), or the
        version a promotion's write returned when that is the same object (uid) and newer, or when
        the cache does not show the profile yet and the write is less than `UNSEEN_CREATION_TRUSTED`
        seconds old. A deletion the watch showed ends the write's say (`profile_event`)."""
        entry = self._written.get(profile)
        if entry is None:
            return cached
        written, when = entry
        if cached is None:
            return written if self._clock() - when < UNSEEN_CREATION_TRUSTED else None
        if _uid(written) != _uid(cached):
            return cached
        return written if later_version(_version(written), _version(cached)) else cached

    def profile_event(self, profile: str, version: str | None) -> list[SummaryKey]:
        """The profile's watch showed `version` of it (its deletion included): a written version it
        has caught up with is forgotten. The summaries waiting on the profile, to be woken (once)."""
        entry = self._written.get(profile)
        if entry is not None and not later_version(_version(entry[0]), version):
            del self._written[profile]
        return self.take_waiting(profile)


def _uid(obj: Mapping[str, Any]) -> object:
    return (obj.get("metadata") or {}).get("uid")


def _version(obj: Mapping[str, Any]) -> str | None:
    version = (obj.get("metadata") or {}).get("resourceVersion")
    return str(version) if version is not None else None
