"""The metric queries of one health check (`metricSource`, `metricQueries`; ADR 0079).

Each query is a Prometheus instant query that must answer exactly one number; the numbers, by query
name, are what Lua sees as the global `metrics` table and CEL as the `metrics` map. The credentials
come from a Secret in the member cluster (as upstream Sveltos reads them), through the same reader
as the check's resources: key `token` gives `Authorization: Bearer`, keys `username` and `password`
give Basic. Any failure (refused source, unreadable Secret, unreachable server, HTTP or Prometheus
error, no single value, NaN) is a `problem`, which fails the check. The Secret's values never appear
in a problem: every message is scrubbed of them before it leaves this module.
"""

from __future__ import annotations

import base64
import binascii
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fleetwave.api.sveltos import MetricQuery, SecretRef, ValidateHealth
from fleetwave.health.model import Limits
from fleetwave.health.reader import ResourceReader
from fleetwave.promapi import client, guards
from fleetwave.promapi.results import QueryFailed

MAX_QUERY_CHARS = 4096
_REDACTED = "[redacted]"

# (endpoint, Authorization header or None, (name, query) pairs, limits) -> value by name, or QueryFailed
RunQueries = Callable[[guards.Endpoint, str | None, Sequence[tuple[str, str]], Limits], dict[str, float]]


@dataclass(frozen=True, slots=True)
class Metrics:
    values: dict[str, float] = field(default_factory=dict)
    problem: str = ""  # set: the check fails with this message


class MetricsRefused(ValueError):
    """The check's metric settings or credentials cannot be used; the message never holds a secret."""


def run_queries(
    target: guards.Endpoint, authorization: str | None, queries: Sequence[tuple[str, str]], limits: Limits
) -> dict[str, float]:
    """Every query in order, through one session; the first failure ends the check's queries."""
    values: dict[str, float] = {}
    deadline = time.monotonic() + limits.metric_check_seconds
    with client.Session(
        target,
        authorization=authorization,
        deadline=deadline,
        query_seconds=limits.metric_query_seconds,
        max_bytes=limits.metric_response_bytes,
    ) as session:
        for name, text in queries:
            try:
                values[name] = session.query(text)
            except QueryFailed as e:
                raise QueryFailed(f"metric query {name!r} failed: {e}") from None
    return values


def read(
    check: ValidateHealth, reader: ResourceReader, limits: Limits, *, run: RunQueries = run_queries
) -> Metrics:
    """The check's metric values (empty without queries), or the problem that fails the check."""
    queries = check.metric_queries or []
    if not queries:
        return Metrics()
    secrets: tuple[str, ...] = ()
    try:
        if check.metric_source is None:
            raise MetricsRefused("metricQueries are set but metricSource is not")
        _check_queries(queries, limits)
        try:
            target = guards.endpoint(check.metric_source.url, check.metric_source.path)
        except guards.Refused as e:
            raise MetricsRefused(str(e)) from None
        authorization = None
        if check.metric_source.secret_ref is not None:
            authorization, secrets = _authorization(check.metric_source.secret_ref, reader)
        values = run(target, authorization, [(q.name, q.query) for q in queries], limits)
    except (MetricsRefused, QueryFailed) as e:
        return Metrics(problem=redact(str(e), secrets))
    except Exception as e:  # the contract: a problem, never an exception, and never a secret
        return Metrics(problem=redact(f"metric queries could not run: {type(e).__name__}: {e}", secrets))
    return Metrics(values)


def authorization_header(data: Mapping[str, Any], where: str) -> tuple[str, tuple[str, ...]]:
    """The Authorization header a Secret's `data` (base64 values) gives, and every string derived
    from it that must never be shown. `where` names the Secret in messages."""
    token = _value(data, "token", where).strip()
    if token:
        if not all("!" <= c <= "~" for c in token):
            raise MetricsRefused(f"the token in {where} has characters a bearer token cannot have")
        header = f"Bearer {token}"
        return header, (header, token, _value(data, "token", where))
    username, password = _value(data, "username", where), _value(data, "password", where)
    if not username or not password:
        raise MetricsRefused(f"{where} has neither a 'token' key nor both 'username' and 'password'")
    if ":" in username or not all(c.isprintable() for c in username + password):
        raise MetricsRefused(f"the username or password in {where} cannot be used for Basic authentication")
    pair = base64.b64encode(f"{username}:{password}".encode()).decode("ascii")
    return f"Basic {pair}", (f"Basic {pair}", pair, username, password)


def redact(text: str, secrets: Sequence[str]) -> str:
    """`text` with every secret replaced, longest first (one may contain another)."""
    for secret in sorted({s for s in secrets if s}, key=len, reverse=True):
        text = text.replace(secret, _REDACTED)
    return text


def _check_queries(queries: Sequence[MetricQuery], limits: Limits) -> None:
    if len(queries) > limits.metric_queries:
        most = limits.metric_queries
        raise MetricsRefused(f"{len(queries)} metricQueries; a check may have at most {most}")
    seen: set[str] = set()
    for q in queries:
        if not q.name:
            raise MetricsRefused("a metric query has no name")
        if q.name in seen:
            raise MetricsRefused(f"metric query name {q.name!r} is used twice")
        seen.add(q.name)
        if not q.query.strip():
            raise MetricsRefused(f"metric query {q.name!r} is empty")
        if len(q.query) > MAX_QUERY_CHARS:
            raise MetricsRefused(f"metric query {q.name!r} is longer than {MAX_QUERY_CHARS} characters")


def _authorization(ref: SecretRef, reader: ResourceReader) -> tuple[str, tuple[str, ...]]:
    if not ref.namespace:
        raise MetricsRefused(
            "metricSource.secretRef needs a namespace (the Secret is read from the member cluster)"
        )
    where = f"Secret {ref.namespace}/{ref.name}"
    try:
        secret = reader.get("v1", "Secret", namespace=ref.namespace, name=ref.name)
    except Exception as e:  # the API's refusal names the object, never its data
        raise MetricsRefused(f"cannot read {where}: {type(e).__name__}: {e}") from None
    if secret is None:
        raise MetricsRefused(f"{where} (metricSource.secretRef) does not exist in the cluster")
    data = secret.get("data")
    return authorization_header(data if isinstance(data, dict) else {}, where)


def _value(data: Mapping[str, Any], key: str, where: str) -> str:
    raw = data.get(key)
    if raw is None:
        return ""
    try:
        return base64.b64decode(str(raw), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise MetricsRefused(f"key {key!r} of {where} is not base64-encoded UTF-8 text") from None
