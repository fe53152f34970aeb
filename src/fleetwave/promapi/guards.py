"""What a metric source may be and where it may connect.

A URL is `http` or `https`, carries no credentials, no query and no fragment, and its path plus the
source's `path` stay a plain path. The host is resolved once here; every address it resolves to is
checked (a name that resolves to a metadata address anywhere is refused, not raced) and the client
then connects to those very addresses, so a second lookup cannot lead elsewhere (DNS rebinding).
Refused: link-local networks (169.254.0.0/16, fe80::/10, which hold the cloud metadata services)
and AWS' IPv6 metadata address fd00:ec2::254, also when written as an IPv4-mapped IPv6 address or
reached through a numeric host form such as `2852039166` that only the resolver decodes.
"""

from __future__ import annotations

import ipaddress
import re
import socket
import threading
import urllib.parse
from dataclasses import dataclass

MAX_URL_CHARS = 2048
_DEFAULT_PORTS = {"http": 80, "https": 443}
_FORBIDDEN = tuple(ipaddress.ip_network(n) for n in ("169.254.0.0/16", "fe80::/10", "fd00:ec2::254/128"))
_FORBIDDEN_TEXT = "a link-local or cloud-metadata address, never contacted"
# Path characters that need no escaping; `%` is out so nothing is decoded into `..` or `?` later.
_PATH = re.compile(r"^[A-Za-z0-9._~!$&'()*+,;=:@/-]*$")
_HOSTNAME = re.compile(r"^(?=.{1,253}$)[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,62})(?:\.[A-Za-z0-9_-]{1,63})*\.?$")


class Refused(ValueError):
    """The metric source may not be used; the message says why (it never holds credentials)."""


@dataclass(frozen=True, slots=True)
class Endpoint:
    scheme: str
    host: str  # a DNS name or an IP literal (without brackets)
    port: int
    path: str  # absolute, the query endpoint itself (e.g. /api/v1/query)

    @property
    def display(self) -> str:
        """The endpoint for messages: no credentials can be in it (refused by `endpoint`)."""
        return f"{self.scheme}://{bracketed(self.host)}:{self.port}{self.path}"

    def url_to(self, address: str) -> str:
        """The endpoint's URL with its host replaced by one checked address."""
        return f"{self.scheme}://{bracketed(address)}:{self.port}{self.path}"

    @property
    def host_header(self) -> str:
        default = _DEFAULT_PORTS[self.scheme] == self.port
        return bracketed(self.host) if default else f"{bracketed(self.host)}:{self.port}"


def endpoint(url: str, path: str) -> Endpoint:
    """The query endpoint of `metricSource{url, path}`, or Refused."""
    if len(url) > MAX_URL_CHARS or len(path) > MAX_URL_CHARS:
        raise Refused(f"metricSource is longer than {MAX_URL_CHARS} characters")
    try:
        parts = urllib.parse.urlsplit(url.strip())
        port = parts.port
    except ValueError as e:
        raise Refused(f"metricSource.url is not a valid URL ({e})") from None
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS:
        raise Refused("metricSource.url must start with http:// or https://")
    if "@" in parts.netloc:
        raise Refused("metricSource.url must not carry credentials: use metricSource.secretRef")
    if parts.query or parts.fragment or url.rstrip().endswith(("?", "#")):
        raise Refused("metricSource.url must not have a query or a fragment")
    host = parts.hostname or ""
    if not host:
        raise Refused("metricSource.url has no host")
    literal = ip_literal(host)
    if literal is None and not _HOSTNAME.match(host):
        raise Refused("metricSource.url's host is not a valid DNS name or IP address")
    if literal is not None:
        problem = address_problem(literal)
        if problem:
            raise Refused(f"metricSource.url: {problem}")
    full = parts.path.rstrip("/") + "/" + path.strip().lstrip("/")
    if not _PATH.match(full) or ".." in full.split("/") or "//" in full:
        raise Refused("metricSource.path (with the URL's path) is not a plain path")
    return Endpoint(scheme, host, port or _DEFAULT_PORTS[scheme], full)


def address_problem(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str:
    """Why a connection to `address` is refused ("" if it is not)."""
    candidates = [address]
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        candidates.append(address.ipv4_mapped)
    if any(candidate in network for candidate in candidates for network in _FORBIDDEN):
        return f"{address} is {_FORBIDDEN_TEXT}"
    return ""


def resolve(target: Endpoint, *, timeout: float) -> list[str]:
    return resolve_host(target.host, target.port, timeout=timeout)


def resolve_host(host: str, port: int, *, timeout: float) -> list[str]:
    """Every address `host` resolves to, in the resolver's order, each checked; Refused if one is
    forbidden, the name does not resolve, or the resolver takes longer than `timeout`. Shared by
    every outbound call a rollout's author chooses the destination of (metric sources, webhooks)."""
    found = _getaddrinfo(host, port, timeout)
    addresses: list[str] = []
    for address in found:
        if address_problem(ipaddress.ip_address(address)):
            raise Refused(f"{host} resolves to {address}, {_FORBIDDEN_TEXT}")
        if address not in addresses:
            addresses.append(address)
    if not addresses:
        raise Refused(f"{host} resolves to no address")
    return addresses


def _getaddrinfo(host: str, port: int, timeout: float) -> list[str]:
    """getaddrinfo has no timeout of its own: it runs on a daemon thread that is abandoned if slow."""
    box: dict[str, object] = {}

    def lookup() -> None:
        try:
            box["found"] = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except (OSError, UnicodeError) as e:
            box["error"] = e

    worker = threading.Thread(target=lookup, name="outbound-dns", daemon=True)
    worker.start()
    worker.join(max(0.0, timeout))
    if worker.is_alive():
        raise Refused(f"resolving {host} took longer than {timeout:g}s")
    if "error" in box:
        raise Refused(f"cannot resolve {host}: {box['error']}")
    infos = box.get("found")
    assert isinstance(infos, list)
    # The address without an IPv6 zone ("fe80::1%eth0"): the zone does not change what it is.
    return [str(info[4][0]).split("%", 1)[0] for info in infos]


def ip_literal(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return None


def bracketed(host: str) -> str:
    return f"[{host}]" if ":" in host else host
