"""What the controller's process may log, whoever started it (the CLI, the demo, a test).

The HTTP libraries log what the controller must not: httpx each request's full URL at INFO (a
webhook's or notification sink's token sits in its path or query), httpcore each response's headers
at DEBUG. Their loggers say only warnings, whatever level fleetwave's own loggers run at.
"""

from __future__ import annotations

import logging

HTTP_LIBRARY_LOGGERS = ("httpx", "httpcore", "httpx2", "httpcore2")


def quiet_http_libraries() -> None:
    for name in HTTP_LIBRARY_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)
