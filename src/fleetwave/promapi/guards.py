"""What an outbound URL chosen by a user may be and where it may connect.

Every URL the controller calls on a user's behalf goes through here: metric sources (ADR 0079),
webhook gates (ADR 0080), the notification sink, and the hosts of Helm chart repositories (ADR 0096).

A metric source URL is `http` or `https`, carries no credentials, no query and no fragment, and its
path plus the source's `path` stay a plain path. The host is resolved once here; every address it
resolves to is checked (a name that resolves to a forbidden address anywhere is refused, not raced)
and the client then connects to those very addresses, so a second lookup cannot lead elsewhere
(DNS rebinding).

Never contacted: link-local networks (169.254.0.0/16, fe80::/10, which hold the cloud metadata
services), the other cloud metadata addresses (fd00:ec2::254, 100.100.100.200, 168.63.129.16) and
the unspecified addresses (0.0.0.0/8, ::), which Linux connects to this very host. Loopback
(127.0.0.0/8, ::1) only with the operator's opt-in, `--allow-loopback-targets`: the local fleet and
the tests run their Prometheus, webhook receivers and chart repositories there, a cluster's
controller has no business there. Each rule also holds for an IPv4 address embedded in an IPv6 one
(IPv4-mapped and -translated, IPv4-compatible, NAT64 64:ff9b::/96 and 64:ff9b:1::/48, 6to4,
Teredo) and for numeric host forms such as `2852039166` that only the resolver decodes.

The opt-in is process-wide and lives in the environment (`FLEETWAVE_ALLOW_LOOPBACK_TARGETS=1`) so
that the sandbox's worker processes, which run the metric queries, inherit it.
"""

from __future__ import annotations

import ipaddress
import os
import re
import socket
import threading
import urllib.parse
from dataclasses import dataclass

MAX_URL_CHARS = 2048
_DEFAULT_PORTS = {"http": 80, "https": 443}
ALLOW_LOOPBACK_ENV = "FLEETWAVE_ALLOW_LOOPBACK_TARGETS"
_LINK_LOCAL_TEXT = "a link-local or cloud-metadata address, never contacted"
_UNSPECIFIED_TEXT = "an unspecified address (this host), never contacted"
_LOOPBACK_TEXT = "a loopback address, contacted only with --allow-loopback-targets"
_Network = ipaddress.IPv4Network | ipaddress.IPv6Network
_Address = ipaddress.IPv4Address | ipaddress.IPv6Address


def _networks(*cidrs: str) -> tuple[_Network, ...]:
    return tuple(ipaddress.ip_network(c) for c in cidrs)


# Checked in this order: the first network an address is in says why it is refused.
_NEVER: tuple[tuple[tuple[_Network, ...], str], ...] = (
    (_networks("169.254.0.0/16", "fe80::/10", "fd00:ec2::254/128"), _LINK_LOCAL_TEXT),
    (_networks("100.100.100.200/32", "168.63.129.16/32"), _LINK_LOCAL_TEXT),  # Alibaba, Azure
    (_networks("0.0.0.0/8", "::/128"), _UNSPECIFIED_TEXT),
)
_LOOPBACK = _networks("127.0.0.0/8", "::1/128")
# IPv6 networks whose addresses carry an IPv4 address that the traffic reaches in the end.
_COMPATIBLE = ipaddress.IPv6Network("::/96")  # IPv4-compatible (deprecated), besides :: and ::1
_TRANSLATED = ipaddress.IPv6Network("::ffff:0:0:0/96")  # SIIT's IPv4-translated
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_NAT64_LOCAL = ipaddress.IPv6Network("64:ff9b:1::/48")
# Path characters that need no escaping; `%` is out so nothing is decoded into `..` or `?` later.
_PATH = re.compile(r"^[A-Za-z0-9._~!$&'()*+,;=:@/-]*$")
_HOSTNAME = re.compile(r"^(?=.{1,253}$)[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,62})(?:\.[A-Za-z0-9_-]{1,63})*\.?$")


class Refused(ValueError):
    """The URL may not be used; the message says why (it never holds credentials)."""


class Unresolved(Refused):
    """The host did not resolve (in time): nothing was found forbidden, nothing can be called."""


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


def loopback_allowed() -> bool:
    """The operator's opt-in, read at every check (the sandbox workers inherit it with the
    environment, so a worker started before or after the controller's settings agrees with them)."""
    return os.environ.get(ALLOW_LOOPBACK_ENV, "") == "1"


def allow_loopback_targets() -> None:
    """Turn the opt-in on for this process and for every process it starts from now on."""
    os.environ[ALLOW_LOOPBACK_ENV] = "1"


def address_problem(address: _Address) -> str:
    """Why a connection to `address` is refused ("" if it is not)."""
    shown, why = _problem(address)
    return f"{shown} is {why}" if why else ""


def _problem(address: _Address) -> tuple[str, str]:
    """(the address as shown, why it is refused), the reason empty when it is not."""
    why = _why(address)
    if why:
        return str(address), why
    for inner, strict in _embedded(address):
        why = _why(inner, unspecified=strict)
        if why:
            return f"{address} (embedding {inner})", why
    return str(address), ""


def _why(address: _Address, *, unspecified: bool = True) -> str:
    for networks, text in _NEVER:
        if (unspecified or text != _UNSPECIFIED_TEXT) and any(address in n for n in networks):
            return text
    if any(address in n for n in _LOOPBACK) and not loopback_allowed():
        return _LOOPBACK_TEXT
    return ""


def _embedded(address: _Address) -> list[tuple[ipaddress.IPv4Address, bool]]:
    """The IPv4 addresses an IPv6 address leads to, each with whether the unspecified rule applies
    to it (it does not to a position that may be a longer NAT64 prefix's zeros)."""
    if not isinstance(address, ipaddress.IPv6Address):
        return []
    raw = address.packed
    found = [a for a in (address.ipv4_mapped, address.sixtofour) if a is not None]
    found += list(address.teredo or ())  # (server, client), the client's bits decoded
    if address in _NAT64 or address in _TRANSLATED or (address in _COMPATIBLE and int(address) > 1):
        found.append(ipaddress.IPv4Address(raw[12:]))
    embedded = [(a, True) for a in found]
    if address in _NAT64_LOCAL:
        # RFC 6052: where the IPv4 address sits depends on the operator's prefix length (/48 to
        # /96; byte 8 is always skipped). Unknowable from here, so every position is read.
        for length in (48, 56, 64, 96):
            octets = bytes(raw[i] for i in range(length // 8, 16) if i != 8)[:4]
            embedded.append((ipaddress.IPv4Address(octets), False))
    return embedded


def resolve(target: Endpoint, *, timeout: float) -> list[str]:
    return resolve_host(target.host, target.port, timeout=timeout)


def resolve_host(host: str, port: int, *, timeout: float) -> list[str]:
    """Every address `host` resolves to, in the resolver's order, each checked; Refused if one is
    forbidden, Unresolved if the name does not resolve or the resolver takes longer than `timeout`.
    Shared by every outbound call whose destination a user chooses."""
    found = _getaddrinfo(host, port, timeout)
    addresses: list[str] = []
    for address in found:
        shown, why = _problem(ipaddress.ip_address(address))
        if why:
            raise Refused(f"{host} resolves to {shown}, {why}")
        if address not in addresses:
            addresses.append(address)
    if not addresses:
        raise Unresolved(f"{host} resolves to no address")
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
        raise Unresolved(f"resolving {host} took longer than {timeout:g}s")
    if "error" in box:
        raise Unresolved(f"cannot resolve {host}: {box['error']}")
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
