"""An instant query's answer, as bytes, to one number, or the reason there is none (pure).

Prometheus answers `{"status": "success", "data": {"resultType": ..., "result": ...}}` or
`{"status": "error", "errorType": ..., "error": ...}` (with a 4xx/5xx code). A metric check needs one
value: a scalar, or a vector with exactly one sample. Anything else fails the query, and so does a
NaN (a comparison with NaN is false either way round, so a script could pass on a missing value).
Infinities are values (`histogram_quantile` returns +Inf) and pass through.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable
from typing import Any

MAX_DEPTH = 32  # a one-sample answer nests 6 deep; anything deeper is not Prometheus
_MAX_TEXT = 200  # characters of a server's own error text kept in a message


class QueryFailed(Exception):
    """The query gave no usable value; the message says why (server text shortened)."""


def read_capped(
    chunks: Iterable[bytes], *, max_bytes: int, deadline: float, clock: Callable[[], float]
) -> bytes:
    """The body from `chunks`, refused once it passes `max_bytes` or once `deadline` has passed."""
    body = bytearray()
    for chunk in chunks:
        body += chunk
        if len(body) > max_bytes:
            raise QueryFailed(f"the response is larger than {max_bytes} bytes")
        if clock() > deadline:
            raise QueryFailed("the response took too long to arrive")
    return bytes(body)


def value_of(status_code: int, body: bytes) -> float:
    """The one value an instant query answered with, or QueryFailed."""
    document = _parse(body)
    if isinstance(document, dict) and document.get("status") == "error":
        error_type = _text(document.get("errorType")) or "error"
        raise QueryFailed(f"Prometheus answered {error_type}: {_text(document.get('error'))}")
    if 300 <= status_code < 400:
        raise QueryFailed(f"HTTP {status_code} (redirects are not followed)")
    if status_code != 200:
        raise QueryFailed(f"HTTP {status_code}")
    if document is None:
        raise QueryFailed("the response is not JSON")
    if not isinstance(document, dict) or document.get("status") != "success":
        raise QueryFailed("the response is not a Prometheus query answer")
    data = document.get("data")
    if not isinstance(data, dict):
        raise QueryFailed("the response has no data")
    kind, result = data.get("resultType"), data.get("result")
    if kind == "scalar":
        return _sample(result)
    if kind == "vector":
        if not isinstance(result, list):
            raise QueryFailed("the vector result is not a list")
        if len(result) != 1:
            found = "no series" if not result else f"{len(result)} series"
            raise QueryFailed(f"the result has {found}; a metric check needs exactly one")
        series = result[0]
        if not isinstance(series, dict):
            raise QueryFailed("the vector's sample is not an object")
        return _sample(series.get("value"))
    shown = _text(kind) or "missing"
    raise QueryFailed(f"the result type is {shown}; a scalar or a one-sample vector is needed")


def _parse(body: bytes) -> Any:
    """The JSON document, or None when the body is not JSON. Depth is bounded twice: the parser's
    own recursion limit, then an explicit walk (no recursion here)."""
    try:
        document = json.loads(body)
    except RecursionError:
        raise QueryFailed(f"the response nests deeper than {MAX_DEPTH} levels") from None
    except ValueError:  # includes UnicodeDecodeError
        return None
    stack: list[tuple[Any, int]] = [(document, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise QueryFailed(f"the response nests deeper than {MAX_DEPTH} levels")
        children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else ()
        stack.extend((child, depth + 1) for child in children)
    return document


def _sample(pair: object) -> float:
    """`[timestamp, "value"]`: Prometheus sends the value as a string ("1", "NaN", "+Inf")."""
    if not isinstance(pair, list) or len(pair) != 2 or not isinstance(pair[1], str):
        raise QueryFailed("the sample is not a [timestamp, value] pair")
    text = pair[1]
    try:
        # Python's float() also reads "1_000"; Prometheus never writes it, so it is not a number here.
        if len(text) > 64 or "_" in text:
            raise ValueError(text)
        value = float(text)
    except ValueError:
        raise QueryFailed(f"the value {_text(text)!r} is not a number") from None
    if math.isnan(value):
        raise QueryFailed("the value is NaN")
    return value


def _text(value: object) -> str:
    text = value if isinstance(value, str) else "" if value is None else str(value)
    text = "".join(c if c.isprintable() else " " for c in text)
    return text if len(text) <= _MAX_TEXT else text[: _MAX_TEXT - 3] + "..."
