"""What a member kubeconfig may contain before fleetwave uses it (a pure check; nothing is run or read).

A kubeconfig is data written by someone else. Several of its features make the *reader* act: an
`exec` plugin or `auth-provider` runs a program in the controller; `tokenFile`, `client-certificate`,
`client-key` and `certificate-authority` read local files (in a pod: the controller's own service
account token, sent as a bearer token to a server the kubeconfig chooses); `proxy-url` routes the
credentials through a host of the author's choosing. fleetwave therefore accepts only:

- the current context's cluster with an `https://` server and inline `certificate-authority-data`
  (or none: the system trust store);
- its user with an inline `token`, or inline `client-certificate-data` + `client-key-data`, and
  optionally `as`/`as-groups` (impersonation: what fleetwave writes to deliver as a tenant, ADR 0111;
  the credential's own rights bound what it can impersonate).

`insecure-skip-tls-verify: true` and `http://` servers need an explicit opt-in (`allow_insecure`),
which the caller must make visible (a flag on `cluster register`, an annotation on the
MemberCluster). Problems name the field, never its value.

Readers disagree on which entry a repeated name means (this check once read the first, lightkube
reads the last), so a kubeconfig whose clusters, users or contexts repeat a name, or whose contexts
name entries that do not exist, is refused whole. And nothing downstream reads the author's document:
`load` returns a *canonical* kubeconfig built only from the fields this module checked (one cluster,
one user, one context), which is what clients and helm are given.
"""

from __future__ import annotations

import base64
import binascii
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fleetwave.api import yamlsafe

__all__ = ["KubeconfigRefused", "Verdict", "canonical", "check", "impersonation", "load"]

_RUNS_OR_READS = {
    "exec": "runs a program",
    "auth-provider": "runs an auth provider",
    "tokenFile": "reads a local file",
    "client-certificate": "reads a local file",
    "client-key": "reads a local file",
    "username": "uses basic auth",
    "password": "uses basic auth",
}
_SECTIONS = (("clusters", "cluster"), ("users", "user"), ("contexts", "context"))
# The only fields a canonical kubeconfig carries; everything else the author wrote is dropped.
_CLUSTER_FIELDS = ("server", "certificate-authority-data", "insecure-skip-tls-verify")
_USER_FIELDS = ("token", "client-certificate-data", "client-key-data", "as", "as-groups")
# Impersonation (`as`, `as-groups`, sent as Impersonate-User/-Group headers): fleetwave writes it for
# a tenant's deliveries (ADR 0111); an author's own can do no more than the credential it rides on.
_MAX_IMPERSONATION_CHARS = 256
_MAX_IMPERSONATED_GROUPS = 16
_MAX_BYTES = 256 * 1024
_MAX_SERVER_CHARS = 2048
_MAX_TOKEN_CHARS = 64 * 1024
# The one name the canonical document uses for its cluster, user and context.
CANONICAL_NAME = "member"


class KubeconfigRefused(ValueError):
    """The kubeconfig is not acceptable; the message lists every problem by field, with no values."""


@dataclass(frozen=True, slots=True)
class Verdict:
    problems: tuple[str, ...]
    insecure: bool  # accepted only because the caller opted in

    @property
    def ok(self) -> bool:
        return not self.problems


def load(data: bytes | str, *, allow_insecure: bool = False) -> dict[str, Any]:
    """Parse (bounded) and check; the canonical kubeconfig (`canonical`), or KubeconfigRefused."""
    try:
        parsed = yamlsafe.load(data, budget=yamlsafe.Budget(max_bytes=_MAX_BYTES), what="kubeconfig")
    except yamlsafe.YamlError as e:
        raise KubeconfigRefused(str(e)) from None
    if not isinstance(parsed, dict):
        raise KubeconfigRefused("kubeconfig: expected a mapping with clusters, users and contexts")
    verdict = check(parsed, allow_insecure=allow_insecure)
    if not verdict.ok:
        raise KubeconfigRefused("kubeconfig refused: " + "; ".join(verdict.problems))
    return canonical(parsed)


def check(config: Mapping[str, Any], *, allow_insecure: bool = False) -> Verdict:
    problems = _structure(config)
    if problems:
        return Verdict(tuple(problems), insecure=False)
    context, problems = _current_context(config)
    if context is None:
        return Verdict(tuple(problems), insecure=False)
    cluster = _named(config, "clusters", "cluster", context.get("cluster"))
    user = _named(config, "users", "user", context.get("user"))
    if cluster is None or user is None:  # `_structure` refused dangling names; a context without a user
        return Verdict(("the current context names no user",), insecure=False)
    cluster_problems, insecure = _cluster(cluster, allow_insecure)
    problems = cluster_problems + _user(user) + _context(context)
    return Verdict(tuple(problems), insecure=insecure and not problems)


def canonical(config: Mapping[str, Any]) -> dict[str, Any]:
    """The kubeconfig fleetwave uses, from one that passed `check`: the current context, its cluster
    and its user, each with only the fields checked here, under one fixed name."""
    context = _named(config, "contexts", "context", config.get("current-context")) or {}
    cluster = _named(config, "clusters", "cluster", context.get("cluster")) or {}
    user = _named(config, "users", "user", context.get("user")) or {}
    body = {"cluster": CANONICAL_NAME, "user": CANONICAL_NAME}
    if isinstance(context.get("namespace"), str) and context["namespace"]:
        body["namespace"] = context["namespace"]
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": CANONICAL_NAME, "cluster": _only(cluster, _CLUSTER_FIELDS)}],
        "users": [{"name": CANONICAL_NAME, "user": _only(user, _USER_FIELDS)}],
        "contexts": [{"name": CANONICAL_NAME, "context": body}],
        "current-context": CANONICAL_NAME,
    }


def _only(body: Mapping[str, Any], fields: tuple[str, ...]) -> dict[str, Any]:
    kept = {key: body[key] for key in fields if body.get(key) is not None}
    for key, value in kept.items():
        if key.endswith("-data"):  # base64 without line breaks: every reader decodes that alike
            kept[key] = "".join(value.split())
    return kept


def _structure(config: Mapping[str, Any]) -> list[str]:
    """Every section a list of named entries, every name once, every name a context uses defined."""
    problems: list[str] = []
    names: dict[str, set[str]] = {}
    for section, field in _SECTIONS:
        entries = config.get(section)
        if entries is None:
            entries = []
        if not isinstance(entries, list):
            problems.append(f"{section} must be a list")
            continue
        names[section] = set()
        for index, entry in enumerate(entries):
            problems += _entry_problems(section, field, index, entry, names[section])
    contexts = config.get("contexts")
    if isinstance(contexts, list) and "clusters" in names and "users" in names:
        for index, entry in enumerate(contexts):
            if isinstance(entry, Mapping) and isinstance(entry.get("context"), Mapping):
                problems += _dangling(index, entry["context"], names)
    return problems


def _entry_problems(section: str, field: str, index: int, entry: Any, seen: set[str]) -> list[str]:
    where = f"{section}[{index}]"
    if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str) or not entry["name"]:
        return [f"{where} has no name"]
    if not isinstance(entry.get(field), Mapping):
        return [f"{where}.{field} must be a mapping"]
    if entry["name"] in seen:
        return [f"{where} repeats the name of an earlier entry (each name must be defined once)"]
    seen.add(entry["name"])
    return []


def _dangling(index: int, body: Mapping[str, Any], names: Mapping[str, set[str]]) -> list[str]:
    problems = []
    cluster, user = body.get("cluster"), body.get("user")
    if not isinstance(cluster, str) or cluster not in names.get("clusters", set()):
        problems.append(f"contexts[{index}] names a cluster that is not defined in clusters")
    if user is not None and (not isinstance(user, str) or user not in names.get("users", set())):
        problems.append(f"contexts[{index}] names a user that is not defined in users")
    return problems


def _current_context(config: Mapping[str, Any]) -> tuple[Mapping[str, Any] | None, list[str]]:
    name = config.get("current-context")
    if not isinstance(name, str) or not name:
        return None, ["current-context is not set"]
    context = _named(config, "contexts", "context", name)
    if context is None:
        return None, ["current-context names a context that is not defined in contexts"]
    return context, []


def _named(config: Mapping[str, Any], section: str, field: str, name: Any) -> Mapping[str, Any] | None:
    entries = config.get(section)
    if not isinstance(entries, list) or not isinstance(name, str):
        return None
    for entry in entries:
        if isinstance(entry, Mapping) and entry.get("name") == name:
            body = entry.get(field)
            return body if isinstance(body, Mapping) else None
    return None


def _cluster(cluster: Mapping[str, Any], allow_insecure: bool) -> tuple[list[str], bool]:
    problems, insecure = _server(cluster.get("server"), allow_insecure)
    skip = cluster.get("insecure-skip-tls-verify")
    if skip is not None and not isinstance(skip, bool):
        problems.append("cluster.insecure-skip-tls-verify must be true or false")
    if skip is True:
        insecure = True
        if not allow_insecure:
            problems.append("cluster.insecure-skip-tls-verify is set: opt in to insecure servers explicitly")
    if "certificate-authority" in cluster:
        problems.append("cluster.certificate-authority reads a local file: use certificate-authority-data")
    if cluster.get("proxy-url"):
        problems.append("cluster.proxy-url routes credentials through another host: not supported")
    problems += _base64("cluster.certificate-authority-data", cluster.get("certificate-authority-data"))
    return problems, insecure


def _server(server: Any, allow_insecure: bool) -> tuple[list[str], bool]:
    if not isinstance(server, str) or not server:
        return ["cluster.server is missing"], False
    if len(server) > _MAX_SERVER_CHARS or not server.isprintable() or any(c.isspace() for c in server):
        return ["cluster.server is not a valid URL"], False
    try:
        parts = urllib.parse.urlsplit(server)
        parts.port  # noqa: B018 - raises ValueError for a port out of range
    except ValueError:
        return ["cluster.server is not a valid URL"], False
    if parts.scheme not in ("http", "https"):
        return ["cluster.server must be an https:// URL"], False
    if not parts.hostname or "@" in parts.netloc or parts.query or parts.fragment:
        return ["cluster.server must be https://host[:port][/path], without credentials or a query"], False
    if parts.scheme == "http":
        if not allow_insecure:
            return ["cluster.server uses http:// (plain text): opt in to insecure servers explicitly"], True
        return [], True
    return [], False


def _user(user: Mapping[str, Any]) -> list[str]:
    problems = [
        f"user.{key} {why}: use an inline token or client certificate data"
        for key, why in _RUNS_OR_READS.items()
        if user.get(key) is not None
    ]
    token = user.get("token")
    if token is not None and not _header_safe(token):
        problems.append("user.token must be printable ASCII without spaces")
    for key in ("client-certificate-data", "client-key-data"):
        problems += _base64(f"user.{key}", user.get(key))
    problems += _impersonation(user)
    has_token = isinstance(token, str) and bool(token)
    has_cert = bool(user.get("client-certificate-data")) and bool(user.get("client-key-data"))
    if not has_cert and (user.get("client-certificate-data") or user.get("client-key-data")):
        problems.append("user.client-certificate-data and user.client-key-data must be set together")
    if not problems and not (has_token or has_cert):
        problems.append(
            "user has no inline credentials: set token, or client-certificate-data and client-key-data"
        )
    return problems


def _impersonation(user: Mapping[str, Any]) -> list[str]:
    problems = []
    name, groups = user.get("as"), user.get("as-groups")
    if name is not None and not _impersonated_name(name):
        problems.append(f"user.as must be a name of printable characters, at most {_MAX_IMPERSONATION_CHARS}")
    if groups is not None and not (
        isinstance(groups, list)
        and len(groups) <= _MAX_IMPERSONATED_GROUPS
        and all(_impersonated_name(g) for g in groups)
    ):
        problems.append(f"user.as-groups must be a list of at most {_MAX_IMPERSONATED_GROUPS} names")
    if groups is not None and name is None:
        problems.append("user.as-groups needs user.as")
    return problems


def _impersonated_name(value: Any) -> bool:
    """Sent in an HTTP header: printable ASCII (a space inside is allowed), bounded."""
    return (
        isinstance(value, str)
        and 0 < len(value) <= _MAX_IMPERSONATION_CHARS
        and all(" " <= c <= "~" for c in value)
        and value.strip() == value
    )


def impersonation(canonical_doc: Mapping[str, Any]) -> tuple[str, tuple[str, ...]] | None:
    """The user and groups a canonical kubeconfig (`load`) acts as; None when it acts as itself."""
    user = canonical_doc["users"][0]["user"]
    name = user.get("as")
    return None if name is None else (str(name), tuple(str(g) for g in user.get("as-groups") or ()))


def _context(context: Mapping[str, Any]) -> list[str]:
    namespace = context.get("namespace")
    if namespace is not None and not isinstance(namespace, str):
        return ["context.namespace must be a string"]
    return []


def _header_safe(token: Any) -> bool:
    """A bearer token goes into an HTTP header: visible ASCII only, bounded."""
    return (
        isinstance(token, str) and 0 < len(token) <= _MAX_TOKEN_CHARS and all("!" <= c <= "~" for c in token)
    )


def _base64(field: str, value: Any) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, str) or len(value) > _MAX_BYTES:
        return [f"{field} must be base64 text"]
    try:
        base64.b64decode("".join(value.split()), validate=True)
    except (binascii.Error, ValueError):
        return [f"{field} must be base64 text"]
    return []
