"""What a status write sends: only real differences, and nothing when the stored status is the same."""

from __future__ import annotations

import datetime as dt
import enum
import json
from typing import Any

import pytest

from fleetwave.kube.status import merge_patch, normalized


def test_a_null_the_server_dropped_is_no_difference() -> None:
    stored = normalized({"phase": "Progressing", "stages": [{"name": "dev", "started": ["a"]}]})
    wanted = normalized(
        {
            "phase": "Progressing",
            "approvals": None,
            "stages": [{"name": "dev", "started": ["a"], "deliveredAt": None}],
        }
    )
    assert merge_patch(stored, wanted) is None


def test_a_field_that_became_null_is_removed() -> None:
    stored = normalized({"phase": "Failed", "failureMessage": "boom"})
    wanted = normalized({"phase": "Progressing", "failureMessage": None})
    assert merge_patch(stored, wanted) == {"phase": "Progressing", "failureMessage": None}


def test_a_list_item_that_changed_replaces_the_list() -> None:
    stored = normalized({"stages": [{"name": "dev", "deliveredAt": "t1"}]})
    wanted = normalized({"stages": [{"name": "dev", "deliveredAt": None}]})
    assert merge_patch(stored, wanted) == {"stages": [{"name": "dev"}]}


def test_normalised_values_are_the_json_the_server_stores() -> None:
    class Phase(enum.StrEnum):
        RUNNING = "Running"

    class Level(enum.IntEnum):
        HIGH = 3

    class Model:
        def to_dict(self) -> dict[str, Any]:
            return {"kept": 1, "dropped": None}

    at = dt.datetime(2026, 11, 26, 10, 0, 0, tzinfo=dt.UTC)
    value = {
        "phase": Phase.RUNNING,
        "level": Level.HIGH,
        "at": at,
        "day": dt.date(2026, 11, 26),
        "pair": ("a", None, {"x": None, "y": 1.5}),
        1: True,
        "model": Model(),
        "gone": None,
    }
    out = normalized(value)
    assert out == {
        "phase": "Running",
        "level": 3,
        "at": "2026-11-26T10:00:00Z",
        "day": "2026-11-26",
        "pair": ["a", None, {"y": 1.5}],
        "1": True,
        "model": {"kept": 1},
    }
    # Plain types only: an enum member compares equal to its text but is not what the server sends.
    assert type(out["phase"]) is str
    assert type(out["level"]) is int
    assert json.loads(json.dumps(out)) == out


def test_what_cannot_be_json_is_refused() -> None:
    with pytest.raises(TypeError, match="not JSON serialisable: object"):
        normalized({"x": object()})
