"""Notifications (issue 13): what a rollout does, sent to one sink configured for the controller.

The sink is a Secret in the controller's namespace (`--notify-secret NAME`): `url` (http or https,
without credentials), `format` (`json`, `slack` or `cloudevents`; default json) and optional
`headers` (a YAML map, e.g. an Authorization header, read with the bounded loader). A Secret because
a webhook URL often is the credential (Slack's is). It is read from the informer cache at each send,
so editing it needs no restart; what is wrong with it is logged once per version, never its values.

Where a notification may go is decided as for webhook gates (`runtime.webhook`, `promapi.guards`):
the host is resolved at each send, every address checked (link-local, metadata and unspecified
addresses never, loopback only with `--allow-loopback-targets`), and the POST connects to a checked
address, so a second lookup cannot lead elsewhere.

Sent: a stage started, a rollout waits for an approval (with the command that gives it), a stage
succeeded, a rollout failed (a cluster failed, its deadline or its failure budget ran out). Like
Events, notifications are queued and written by one background task, bounded (past it they are
dropped and counted) and never on a reconcile's path; a failed POST is retried twice with backoff,
then logged (scheme, host and port only: the path and query may hold a token) and counted.
"""

from __future__ import annotations

import asyncio
import base64
import collections
import datetime as dt
import json
import logging
import re
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx2

from fleetwave.api import yamlsafe
from fleetwave.runtime import webhook
from fleetwave.runtime.background import BackgroundQueue

log = logging.getLogger(__name__)

FORMATS = ("json", "slack", "cloudevents")
# Event reason -> notification kind. Reasons not listed are not sent.
KINDS = {
    "StageStarted": "StageStarted",
    "ApprovalRequired": "WaitingForApproval",
    "StageSucceeded": "StageSucceeded",
    "ClusterFailed": "Failed",
    "ProgressDeadlineExceeded": "Failed",
    "FailureBudgetExceeded": "Failed",
    "RollingBack": "RollingBack",
    "RolledBack": "RolledBack",
}
# A new revision of a rollout: what was notified for the previous one may be notified again.
NEW_REVISION = frozenset({"RolloutStarted", "Restarted"})
MAX_URL = 2048
MAX_HEADERS = 16
_HEADER_NAME = re.compile(r"^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,64}$")
_SECONDS = 5.0
_TIMEOUT = httpx2.Timeout(_SECONDS)
_RETRIES = 3
# A handful of headers: nothing that needs the default budget's megabytes.
_HEADERS_BUDGET = yamlsafe.Budget(max_bytes=64 * 1024, max_depth=4, max_nodes=1000)


class SinkError(ValueError):
    """The notification Secret cannot be used; the message names the key, never a value."""


@dataclass(frozen=True, slots=True)
class Sink:
    url: str
    format: str = "json"
    headers: Mapping[str, str] = field(default_factory=dict)

    @property
    def where(self) -> str:
        """What may be logged of the URL: scheme, host and port."""
        try:
            return _endpoint(self.url).display
        except webhook.Refused:
            return f"{urlsplit(self.url).scheme}://?"


def _endpoint(url: str) -> webhook.Endpoint:
    return webhook.endpoint(url, field="key url", headers="key headers")


def sink_from_secret(data: Mapping[str, str] | None) -> Sink:
    """A Sink from a Secret's base64 `data`."""
    values: dict[str, str] = {}
    for key, raw in (data or {}).items():
        try:
            values[key] = base64.b64decode(raw, validate=True).decode("utf-8")
        except (ValueError, UnicodeDecodeError):
            raise SinkError(f"key {key}: not base64 of UTF-8 text") from None
    url = values.get("url", "").strip()
    if not url:
        raise SinkError("key url: missing")
    parts = urlsplit(url)
    if len(url) > MAX_URL or parts.scheme not in ("http", "https") or not parts.hostname:
        raise SinkError(f"key url: must be an http(s) URL of at most {MAX_URL} characters")
    try:
        _endpoint(url)  # its literal address, credentials and path: refused now, not at each send
    except webhook.Refused as e:
        raise SinkError(str(e)) from None
    fmt = values.get("format", "json").strip() or "json"
    if fmt not in FORMATS:
        raise SinkError(f"key format: must be one of {', '.join(FORMATS)}")
    return Sink(url, fmt, _headers(values.get("headers")))


def _headers(text: str | None) -> dict[str, str]:
    if not text:
        return {}
    try:
        parsed = yamlsafe.load(text, budget=_HEADERS_BUDGET, what="headers")
    except yamlsafe.YamlError:  # its message names a line and column only; still, none is shown
        raise SinkError("key headers: not YAML (or larger than a few headers)") from None
    if not isinstance(parsed, dict) or len(parsed) > MAX_HEADERS:
        raise SinkError(f"key headers: must be a map of at most {MAX_HEADERS} headers")
    out: dict[str, str] = {}
    for name, value in parsed.items():
        if not isinstance(name, str) or not _HEADER_NAME.match(name):
            raise SinkError("key headers: a header name is not a valid HTTP token")
        if isinstance(value, dict | list):
            raise SinkError(f"key headers: the value of {name} is not text")
        text_value = str(value)
        if "\r" in text_value or "\n" in text_value or len(text_value) > 4096:
            raise SinkError(f"key headers: the value of {name} has a line break or is too long")
        out[name] = text_value
    return out


@dataclass(frozen=True, slots=True)
class Notification:
    kind: str  # StageStarted, WaitingForApproval, StageSucceeded, Failed, RolledBack
    rollout_kind: str
    name: str
    namespace: str | None
    reason: str
    message: str
    time: dt.datetime
    hint: str = ""  # what to do next (the approve command)


def hint_for(rollout_kind: str, name: str, namespace: str | None, reason: str, message: str) -> str:
    """The command that moves a waiting rollout on."""
    if reason != "ApprovalRequired":
        return ""
    stage = re.match(r"stage (\S+) ", message)
    if rollout_kind == "ClusterPromotion" and stage:
        return f"fleetwave approve promotion {name} --stage {stage.group(1)}"
    if rollout_kind in ("ClusterStagedUpdateRun", "StagedUpdateRun") and stage:
        where = f" -n {namespace}" if namespace else ""
        return f"fleetwave approve run {name} --stage {stage.group(1)}{where}"
    return ""


def body(n: Notification, fmt: str, source: str) -> tuple[dict[str, Any], str]:
    """The request body and its content type, in the sink's format."""
    data = {
        "kind": n.kind,
        "rollout": {"kind": n.rollout_kind, "name": n.name, "namespace": n.namespace},
        "reason": n.reason,
        "message": n.message,
        "time": n.time.strftime("%Y-%m-%dT%H:%M:%SZ"),
        **({"hint": n.hint} if n.hint else {}),
    }
    if fmt == "slack":
        where = f"{n.namespace}/{n.name}" if n.namespace else n.name
        text = f"*{n.kind}* {n.rollout_kind} `{where}`: {n.message}"
        if n.hint:
            text += f"\n`{n.hint}`"
        return {"text": text}, "application/json"
    if fmt == "cloudevents":  # structured mode, CloudEvents 1.0
        event = {
            "specversion": "1.0",
            "type": f"io.fleetwave.rollout.{n.kind[0].lower()}{n.kind[1:]}",
            "source": source,
            "subject": f"{n.rollout_kind}/{n.namespace + '/' if n.namespace else ''}{n.name}",
            "id": str(uuid.uuid4()),
            "time": data["time"],
            "datacontenttype": "application/json",
            "data": data,
        }
        return event, "application/cloudevents+json"
    return data, "application/json"


class Notifier:
    """Queues notifications and posts them to the sink `sink()` returns (None: not configured)."""

    def __init__(
        self,
        sink: Callable[[], Sink | None],
        *,
        source: str = "fleetwave",
        max_pending: int = 1000,
        transport: httpx2.AsyncBaseTransport | None = None,
    ) -> None:
        self._sink = sink
        self.source = source
        self._transport = transport
        self.sent = self.failed = 0
        # Per rollout, what was already notified for its current revision: a rollout waiting for
        # an approval says so at every pass, a notification says it once.
        self._told: collections.OrderedDict[tuple[str, str | None, str], set[tuple[str, str]]] = (
            collections.OrderedDict()
        )
        self._queue: BackgroundQueue[Notification] = BackgroundQueue(
            self._send, what="notifications", max_pending=max_pending
        )

    @property
    def dropped(self) -> int:
        return self._queue.dropped

    def seen(self, rollout_kind: str, namespace: str | None, name: str, reason: str, message: str) -> bool:
        """Record an Event of a rollout; True when it is not worth a notification (again)."""
        key = (rollout_kind, namespace, name)
        told = self._told.setdefault(key, set())
        self._told.move_to_end(key)
        while len(self._told) > 4096:
            self._told.popitem(last=False)
        if reason in NEW_REVISION:
            told.clear()
        if reason not in KINDS or (reason, message) in told:
            return True
        told.add((reason, message))
        return False

    def notify(self, n: Notification) -> None:
        self._queue.put(n)

    async def flush(self) -> None:
        await self._queue.flush()

    async def close(self, within: float = 5.0) -> None:
        await self._queue.close(within)

    async def _send(self, n: Notification) -> None:
        sink = self._sink()
        if sink is None:
            return
        problem = await self._post(sink, *body(n, sink.format, self.source))
        if not problem:
            self.sent += 1
            return
        self.failed += 1
        log.warning("notifications: %s to %s not delivered: %s", n.kind, sink.where, problem)

    async def _post(self, sink: Sink, payload: Mapping[str, Any], content_type: str) -> str:
        """ "" once the sink took the notification, else why not (never a path, query or header)."""
        try:
            target = _endpoint(sink.url)
            addresses = await asyncio.to_thread(webhook.resolve, target, timeout=_SECONDS)
        except webhook.Refused as e:
            return f"refused: {e}"
        headers = {**sink.headers, "Content-Type": content_type, "Host": target.host_header}
        extensions = {"sni_hostname": target.host} if target.scheme == "https" else {}
        content = json.dumps(payload).encode()
        problem = ""
        # A client per notification: it connects to the address checked for this one.
        async with httpx2.AsyncClient(
            timeout=_TIMEOUT, transport=self._transport, follow_redirects=False
        ) as http:
            for attempt in range(_RETRIES):
                if attempt:
                    await asyncio.sleep(0.5 * 2 ** (attempt - 1))
                url = target.url_to(addresses[attempt % len(addresses)])
                try:
                    response = await http.post(url, content=content, headers=headers, extensions=extensions)
                except httpx2.HTTPError as e:
                    problem = type(e).__name__
                    continue
                if response.status_code < 300:
                    return ""
                problem = f"HTTP {response.status_code}"
                if response.status_code < 500 and response.status_code != 429:
                    break  # the sink refuses this request: retrying will not change its mind
        return problem
