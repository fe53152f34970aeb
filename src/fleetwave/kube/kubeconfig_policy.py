"""What a member kubeconfig may contain before fleetwave uses it (a pure check; nothing is run or read).

A kubeconfig is data written by someone else. Several of its features make the *reader* act: an
`exec` plugin or `auth-provider` runs a program in the controller; `tokenFile`, `client-certificate`,
`client-key` and `certificate-authority` read local files (in a pod: the controller's own service
account token, sent as a bearer token to a server the kubeconfig chooses); `proxy-url` routes the
credentials through a host of the author's choosing. fleetwave therefore accepts only:

- the current context's cluster with an `https://` server and inline `certificate-authority-data`
  (or none: the system trust store);
- its user with an inline `token`, or inline `client-certificate-data` + `client-key-data`.

`insecure-skip-tls-verify: true` and `http://` servers need an explicit opt-in (`allow_insecure`),
which the caller must make visible (a flag on `cluster register`, an annotation on the
MemberCluster). Problems name the field, never its value.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fleetwave.api import yamlsafe

__all__ = ["KubeconfigRefused", "Verdict", "check", "load"]

_RUNS_OR_READS = {
    "exec": "runs a program",
    "auth-provider": "runs an auth provider",
    "tokenFile": "reads a local file",
    "client-certificate": "reads a local file",
    "client-key": "reads a local file",
    "username": "uses basic auth",
    "password": "uses basic auth",
}
_MAX_BYTES = 256 * 1024


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
    """Parse (bounded) and check; the parsed kubeconfig, or KubeconfigRefused."""
    try:
        parsed = yamlsafe.load(data, budget=yamlsafe.Budget(max_bytes=_MAX_BYTES), what="kubeconfig")
    except yamlsafe.YamlError as e:
        raise KubeconfigRefused(str(e)) from None
    if not isinstance(parsed, dict):
        raise KubeconfigRefused("kubeconfig: expected a mapping with clusters, users and contexts")
    verdict = check(parsed, allow_insecure=allow_insecure)
    if not verdict.ok:
        raise KubeconfigRefused("kubeconfig refused: " + "; ".join(verdict.problems))
    return parsed


def check(config: Mapping[str, Any], *, allow_insecure: bool = False) -> Verdict:
    context, problems = _current_context(config)
    if context is None:
        return Verdict(tuple(problems), insecure=False)
    cluster = _named(config, "clusters", "cluster", context.get("cluster"))
    user = _named(config, "users", "user", context.get("user"))
    if cluster is None:
        problems.append("the current context's cluster is not defined in clusters")
    if user is None:
        problems.append("the current context's user is not defined in users")
    insecure = False
    if cluster is not None:
        cluster_problems, insecure = _cluster(cluster, allow_insecure)
        problems += cluster_problems
    if user is not None:
        problems += _user(user)
    return Verdict(tuple(problems), insecure=insecure and not problems)


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
    problems: list[str] = []
    insecure = False
    server = cluster.get("server")
    if not isinstance(server, str) or not server:
        problems.append("cluster.server is missing")
    elif server.startswith("http://"):
        insecure = True
        if not allow_insecure:
            problems.append("cluster.server uses http:// (plain text): opt in to insecure servers explicitly")
    elif not server.startswith("https://"):
        problems.append("cluster.server must be an https:// URL")
    if cluster.get("insecure-skip-tls-verify") is True:
        insecure = True
        if not allow_insecure:
            problems.append("cluster.insecure-skip-tls-verify is set: opt in to insecure servers explicitly")
    if "certificate-authority" in cluster:
        problems.append("cluster.certificate-authority reads a local file: use certificate-authority-data")
    if cluster.get("proxy-url"):
        problems.append("cluster.proxy-url routes credentials through another host: not supported")
    return problems, insecure


def _user(user: Mapping[str, Any]) -> list[str]:
    problems = [
        f"user.{key} {why}: use an inline token or client certificate data"
        for key, why in _RUNS_OR_READS.items()
        if user.get(key)
    ]
    has_token = isinstance(user.get("token"), str) and bool(user.get("token"))
    has_cert = bool(user.get("client-certificate-data")) and bool(user.get("client-key-data"))
    if not problems and not (has_token or has_cert):
        problems.append(
            "user has no inline credentials: set token, or client-certificate-data and client-key-data"
        )
    return problems
