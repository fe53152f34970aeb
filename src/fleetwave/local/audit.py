"""Audit logs of the local fleet's member API servers, and a reader of them for tests.

Each member's kube-apiserver logs every request at the Metadata level (who, what, which verb and
object, never a body) as JSON lines in `<state>/<member>/audit.log`. This is what tells, on the
member's side, who acted on it: a pull member's agent has an identity of its own there, so a test
can show that its requests are the agent's and that the hub made none.
"""

from __future__ import annotations

import collections
import datetime as dt
import json
from collections.abc import Iterable
from pathlib import Path

# Metadata for every request; RequestReceived is dropped: each request is still logged when its
# response completes (and, for a watch, when its response starts), at half the lines.
POLICY = """\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
  - level: Metadata
"""
MAX_SIZE_MB = 50  # a log is rotated past this size (rotated files beside it: audit-<time>.log)
MAX_BACKUPS = 2
LOG_NAME = "audit.log"
COMPLETE = "ResponseComplete"


def write_policy(path: Path) -> Path:
    """The policy file every member's API server reads (one per fleet)."""
    path.write_text(POLICY, encoding="utf-8")
    return path


def flags(policy: Path, log: Path) -> list[str]:
    """The kube-apiserver flags that turn the log on: JSON lines, written as each request ends
    (the blocking mode, so a test reads an event as soon as the response was sent)."""
    return [
        f"--audit-policy-file={policy}",
        f"--audit-log-path={log}",
        "--audit-log-format=json",
        f"--audit-log-maxsize={MAX_SIZE_MB}",
        f"--audit-log-maxbackup={MAX_BACKUPS}",
    ]


def completed_user(line: str, since: dt.datetime) -> str | None:
    """The username of one log line's event when it is a completed request received at or after
    `since` (timezone-aware); None for any other event or a line that is not one (a torn last line)."""
    try:
        event = json.loads(line)
        if not isinstance(event, dict) or event.get("stage") != COMPLETE:
            return None
        received = dt.datetime.fromisoformat(event["requestReceivedTimestamp"])
        username = event["user"]["username"]
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
    return username if received >= since and isinstance(username, str) else None


def users(path: Path, since: dt.datetime) -> collections.Counter[str]:
    """How many completed requests each user made on the member since `since`, from its audit log
    and the rotated logs beside it. Read whole: for tests, not for a long-running fleet's history."""
    if since.tzinfo is None:
        raise ValueError("since must be timezone-aware: the log's timestamps are UTC")
    counts: collections.Counter[str] = collections.Counter()
    for file in _logs(path):
        counts.update(user for line in _lines(file) if (user := completed_user(line, since)))
    return counts


def _logs(path: Path) -> list[Path]:
    rotated = sorted(path.parent.glob(f"{path.stem}-*{path.suffix}"))
    return [*rotated, path] if path.exists() else rotated


def _lines(file: Path) -> Iterable[str]:
    try:
        with file.open(encoding="utf-8", errors="replace") as f:
            yield from f
    except FileNotFoundError:
        return  # rotated away between listing and reading
