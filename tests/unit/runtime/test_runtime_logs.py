"""The controller's JSON log lines: one object a line, the object a line is about, no traceback
across lines."""

from __future__ import annotations

import json
import logging
import sys

from fleetwave.runtime import logs


def _record(message: str, **extra: object) -> logging.LogRecord:
    record = logging.LogRecord(
        "fleetwave.controllers.sveltos.promotion", logging.WARNING, __file__, 1, message, (), None
    )
    for key, value in extra.items():
        setattr(record, key, value)
    return record


def test_a_json_line_has_time_level_logger_message_and_the_object() -> None:
    line = logs.JsonFormatter().format(
        _record("stage dev held", kind="ClusterPromotion", object_name="kyverno")
    )
    parsed = json.loads(line)
    assert parsed["level"] == "WARNING"
    assert parsed["logger"] == "fleetwave.controllers.sveltos.promotion"
    assert parsed["message"] == "stage dev held"
    assert (parsed["kind"], parsed["name"]) == ("ClusterPromotion", "kyverno")
    assert "namespace" not in parsed  # a cluster-scoped object
    assert parsed["time"].endswith("+00:00")


def test_an_exception_stays_on_one_line() -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        record = _record("failed")
        record.exc_info = sys.exc_info()
    line = logs.JsonFormatter().format(record)
    assert "\n" not in line
    assert "ValueError: boom" in json.loads(line)["error"]


def test_configure_json_keeps_the_http_libraries_quiet() -> None:
    root = logging.getLogger()
    saved = (root.level, list(root.handlers))
    try:
        logs.configure("DEBUG", "json")
        assert isinstance(root.handlers[0].formatter, logs.JsonFormatter)
        assert all(logging.getLogger(n).level == logging.WARNING for n in logs.HTTP_LIBRARY_LOGGERS)
    finally:
        root.setLevel(saved[0])
        root.handlers[:] = saved[1]
