"""Instant queries against one metric source, guarded (ADR 0079).

A `Session` resolves the source's host once, refuses it if any address is forbidden
(`guards.resolve`), and connects to those addresses only, with the original name as the TLS server
name and `Host` header. Each query is a GET of `<path>?query=...` that:
- follows no redirect and takes no proxy, certificate bundle or netrc from the environment;
- must finish by its deadline: every network operation waits at most the time left when the query
  began, and reading stops once the deadline has passed (so a query lasts at most twice its budget);
- may answer at most `max_bytes`, uncompressed (it asks for no compression and decodes none).
"""

from __future__ import annotations

import functools
import ssl
import time
from collections.abc import Callable
from types import TracebackType

import httpx2

from fleetwave.promapi import guards
from fleetwave.promapi.results import QueryFailed, read_capped, value_of

USER_AGENT = "fleetwave-metric-check"


@functools.cache
def _tls() -> ssl.SSLContext:
    """The system's trust store (SSL_CERT_FILE/SSL_CERT_DIR through OpenSSL), built once."""
    return ssl.create_default_context()


class Session:
    """Queries to one endpoint until `deadline` (a `clock()` time). Not thread-safe."""

    def __init__(
        self,
        target: guards.Endpoint,
        *,
        authorization: str | None,
        deadline: float,
        query_seconds: float,
        max_bytes: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.target = target
        self._authorization = authorization
        self._deadline = deadline
        self._query_seconds = query_seconds
        self._max_bytes = max_bytes
        self._clock = clock
        self._addresses: list[str] | None = None
        self._http = httpx2.Client(
            trust_env=False,
            follow_redirects=False,
            verify=_tls(),
            limits=httpx2.Limits(max_connections=1, max_keepalive_connections=1),
        )

    def __enter__(self) -> Session:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def query(self, text: str) -> float:
        """The query's one value, or QueryFailed naming the reason."""
        start = self._clock()
        budget = min(self._query_seconds, self._deadline - start)
        if budget <= 0:
            raise QueryFailed("the check's time for metric queries is spent")
        deadline = start + budget
        if self._addresses is None:
            try:
                self._addresses = guards.resolve(self.target, timeout=budget)
            except guards.Refused as e:
                raise QueryFailed(str(e)) from None
        failure = ""
        for address in self._addresses:
            left = deadline - self._clock()
            if left <= 0:
                break
            try:
                return self._get(address, text, left, deadline)
            except (httpx2.ConnectError, httpx2.ConnectTimeout) as e:  # the next address may answer
                failure = f"cannot connect to {self.target.display}: {_reason(e)}"
            except httpx2.TimeoutException:
                raise QueryFailed(f"no answer from {self.target.display} within {budget:g}s") from None
            except httpx2.HTTPError as e:
                raise QueryFailed(f"{self.target.display}: {type(e).__name__}: {_reason(e)}") from None
        raise QueryFailed(failure or f"no answer from {self.target.display} within {budget:g}s")

    def _get(self, address: str, text: str, left: float, deadline: float) -> float:
        headers = {
            "Host": self.target.host_header,
            "Accept": "application/json",
            "Accept-Encoding": "identity",
            "User-Agent": USER_AGENT,
        }
        if self._authorization is not None:
            headers["Authorization"] = self._authorization
        extensions = {"sni_hostname": self.target.host} if self.target.scheme == "https" else {}
        with self._http.stream(
            "GET",
            self.target.url_to(address),
            params={"query": text},
            headers=headers,
            timeout=httpx2.Timeout(left),
            extensions=extensions,
        ) as response:
            declared = response.headers.get("content-length", "")
            if declared.isdigit() and int(declared) > self._max_bytes:
                raise QueryFailed(f"the response is larger than {self._max_bytes} bytes")
            body = read_capped(
                response.iter_raw(), max_bytes=self._max_bytes, deadline=deadline, clock=self._clock
            )
            return value_of(response.status_code, body)


def _reason(error: Exception) -> str:
    return str(error) or type(error).__name__
