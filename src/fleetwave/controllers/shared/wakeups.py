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
"""

from __future__ import annotations

from collections.abc import Callable

from fleetwave.controllers.shared.keys import SummaryKey

Enqueue = Callable[[str], None]


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
    def __init__(self) -> None:
        self._expected: dict[str, str] = {}  # profile name -> the version a promotion wrote
        self._waiting: dict[str, set[SummaryKey]] = {}  # profile name -> summaries waiting on it

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
