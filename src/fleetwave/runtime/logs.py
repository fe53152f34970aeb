"""What the controller's process may log, whoever started it (the CLI, the demo, a test), and how.

The HTTP libraries log what the controller must not: httpx each request's full URL at INFO (a
webhook's or notification sink's token sits in its path or query), httpcore each response's headers
at DEBUG. Their loggers say only warnings, whatever level fleetwave's own loggers run at.

`--log-format json` writes one JSON object a line — time, level, logger, message, and the object's
kind, namespace and name when the line is about one (`extra={"kind": ..., "namespace": ...,
"object_name": ...}`) — for log pipelines, as
Argo Rollouts' and cert-manager's JSON formats do.
"""

from __future__ import annotations

import datetime as dt
import json
import logging

HTTP_LIBRARY_LOGGERS = ("httpx", "httpcore", "httpx2", "httpcore2")
# Record attributes (given as `extra=`) -> JSON keys; `name` is the logger's own on a LogRecord.
OBJECT_FIELDS = {"kind": "kind", "namespace": "namespace", "object_name": "name"}
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def quiet_http_libraries() -> None:
    for name in HTTP_LIBRARY_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)


class JsonFormatter(logging.Formatter):
    """One JSON object a line; an exception's traceback goes in `error`, never across lines."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "time": dt.datetime.fromtimestamp(record.created, dt.UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for attribute, key in OBJECT_FIELDS.items():
            value = getattr(record, attribute, None)
            if isinstance(value, str) and value:
                line[key] = value
        if record.exc_info:
            line["error"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False)


def configure(level: str, log_format: str = "text") -> None:
    """The process's logging: `level` for fleetwave, text or JSON lines on stderr."""
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if log_format == "json" else logging.Formatter(TEXT_FORMAT))
    logging.basicConfig(level=level.upper(), handlers=[handler], force=True)
    quiet_http_libraries()
