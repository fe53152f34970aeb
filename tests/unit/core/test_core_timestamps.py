"""RFC 3339 in and out, in the one module that does it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as s

from fleetwave.core import timestamps

INSTANTS = s.datetimes(min_value=datetime(1970, 1, 1), max_value=datetime(9999, 1, 1), timezones=s.just(UTC))


@given(INSTANTS)
def test_precise_form_round_trips_exactly(t: datetime) -> None:
    assert timestamps.parse(timestamps.fmt_precise(t)) == t


@given(INSTANTS)
def test_api_form_is_whole_seconds_in_utc(t: datetime) -> None:
    text = timestamps.fmt(t)
    assert text.endswith("Z")
    assert timestamps.parse(text) == t.replace(microsecond=0)


def test_offsets_and_naive_values_become_utc() -> None:
    east = datetime(2026, 3, 29, 3, 30, tzinfo=timezone(timedelta(hours=2)))
    assert timestamps.fmt(east) == "2026-03-29T01:30:00Z"
    assert timestamps.fmt(datetime(2026, 1, 2, 3, 4, 5)) == "2026-01-02T03:04:05Z"
    assert timestamps.parse("2026-01-02T03:04:05+01:00") == datetime(2026, 1, 2, 2, 4, 5, tzinfo=UTC)


def test_malformed_values_are_refused_and_empty_ones_are_none() -> None:
    with pytest.raises(ValueError, match="Invalid isoformat"):
        timestamps.parse("yesterday")
    assert timestamps.parse_optional("") is None
    assert timestamps.parse_optional(None) is None
