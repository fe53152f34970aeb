"""Kubernetes API requests, counted and timed by verb, resource, answer code and target (the
management cluster or a member), as client-go's `rest_client_requests_total` and
`rest_client_request_duration_seconds` are.

Labels are bounded: the verb from the method (and `watch`, `list`), the resource's plural (and its
subresource) from the path, never an object's name or namespace, and the code's class for codes
outside a short list. Watches are counted but not timed (they last as long as the server lets them).

At DEBUG each request is also logged once it is answered: method, target, path, code and how long it
took (`bench/trace_rollout.py --controller-log` merges these into a rollout's timeline). The path
names an object, never its content; the query string (selectors, watch bookmarks) is left out.
"""

from __future__ import annotations

import logging
import time

import httpx2
from prometheus_client import CollectorRegistry, Counter, Histogram

REGISTRY = CollectorRegistry(auto_describe=True)
REQUESTS = Counter(
    "fleetwave_api_requests",
    "Kubernetes API requests by verb, resource, HTTP code and target (management or member).",
    ["verb", "resource", "code", "target"],
    registry=REGISTRY,
)
LATENCY = Histogram(
    "fleetwave_api_request_duration_seconds",
    "Kubernetes API request latency (headers received) by verb and target; watches are not timed.",
    ["verb", "target"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0),
    registry=REGISTRY,
)
log = logging.getLogger(__name__)
_KNOWN_CODES = frozenset({200, 201, 204, 400, 401, 403, 404, 409, 410, 422, 429, 500, 503, 504})


def _parts(path: str) -> tuple[str, bool, str] | None:
    """(resource, names one object, subresource) of an API path, or None for another path."""
    parts = [p for p in path.split("/") if p]
    if parts[:1] == ["api"]:
        rest = parts[2:]
    elif parts[:1] == ["apis"]:
        rest = parts[3:]
    else:
        return None
    if len(rest) >= 3 and rest[0] == "namespaces":
        rest = rest[2:]  # a namespaced resource; namespaces/<name> alone is the Namespace itself
    if not rest:
        return None
    return rest[0], len(rest) >= 2, rest[2] if len(rest) >= 3 else ""


def resource_of(path: str) -> str:
    """The resource a path names (`pods`, `clustersummaries/status`); `other` for anything else."""
    found = _parts(path)
    if found is None:
        return "other"
    resource, _, sub = found
    return f"{resource}/{sub}" if sub else resource


def verb_of(request: httpx2.Request) -> str:
    method = request.method.lower()
    if method != "get":
        return {"post": "create", "put": "update", "patch": "patch", "delete": "delete"}.get(method, method)
    if request.url.params.get("watch") in ("true", "1"):
        return "watch"
    found = _parts(request.url.path)
    return "get" if found is None or found[1] else "list"


class Measured(httpx2.AsyncBaseTransport):
    """`inner`, with every request counted and timed for `target`."""

    def __init__(self, inner: httpx2.AsyncBaseTransport, target: str) -> None:
        self.inner = inner
        self.target = target

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        verb, started = verb_of(request), time.perf_counter()
        try:
            response = await self.inner.handle_async_request(request)
        except Exception as err:
            REQUESTS.labels(verb, resource_of(request.url.path), "error", self.target).inc()
            self._logged(request, type(err).__name__, started)
            raise
        code = response.status_code
        shown = str(code) if code in _KNOWN_CODES else f"{code // 100}xx"
        REQUESTS.labels(verb, resource_of(request.url.path), shown, self.target).inc()
        if verb != "watch":
            LATENCY.labels(verb, self.target).observe(time.perf_counter() - started)
        self._logged(request, str(code), started)
        return response

    def _logged(self, request: httpx2.Request, answer: str, started: float) -> None:
        if log.isEnabledFor(logging.DEBUG):
            took = (time.perf_counter() - started) * 1000
            path = request.url.path
            log.debug("%s %s %s: %s in %.1f ms", request.method, self.target, path, answer, took)

    async def aclose(self) -> None:
        await self.inner.aclose()
