"""Promotion windows: open from each `from` cron fire until the first `to` fire after it.

Cron is evaluated in the window's explicit IANA time zone (default UTC) and every comparison is
made in UTC, because aware datetimes sharing one ZoneInfo compare by wall clock, which is wrong
across a DST change. In the spring-forward gap croniter fires at the first valid instant after
the gap; in the fall-back overlap it may fire twice, which only re-opens an already-open window.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter

from fleetwave.core import model as m

_EPSILON = timedelta(microseconds=1)


@dataclass(frozen=True, slots=True)
class WindowState:
    open: bool
    # when closed: the next opening; when open: the coming close; None if unknown/invalid
    changes_at: datetime | None
    error: str = ""


def _fire(expr: str, start: datetime, *, forward: bool) -> datetime:
    it = croniter(expr, start)
    fire: datetime = it.get_next(datetime) if forward else it.get_prev(datetime)
    return fire.astimezone(UTC)


def window_state(window: m.Window, now: datetime) -> WindowState:
    """Open iff from_fire <= now < first to_fire after from_fire (inclusive at the opening)."""
    try:
        tz = ZoneInfo(window.tz)
    except (ZoneInfoNotFoundError, ValueError):
        return WindowState(False, None, f"unknown time zone {window.tz!r}")
    for expr in (window.from_cron, window.to_cron):
        if not croniter.is_valid(expr):
            return WindowState(False, None, f"invalid cron expression {expr!r}")
    local = now.astimezone(tz)
    try:
        opened = _fire(window.from_cron, local + _EPSILON, forward=False)
        closes = _fire(window.to_cron, opened.astimezone(tz), forward=True)
        if now < closes:
            return WindowState(True, closes)
        return WindowState(False, _fire(window.from_cron, local, forward=True))
    except ValueError as exc:  # croniter's errors derive from ValueError
        return WindowState(False, None, f"cannot evaluate promotion window: {exc}")
