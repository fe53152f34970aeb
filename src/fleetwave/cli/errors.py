"""What a person reads when a command fails for a reason outside fleetwave: one or two lines naming
the server or file and what to do next, and one exit code per kind of failure, the same for every
command (`cli.exit_codes`). `--debug` (or `FLEETWAVE_DEBUG=1`) shows the traceback instead, for a
bug report.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass

from fleetwave.api import yamlsafe
from fleetwave.cli.exit_codes import EXIT_API, EXIT_CODES, EXIT_FORBIDDEN, EXIT_USAGE
from fleetwave.kube import client as kubeclient
from fleetwave.kube import ops

__all__ = ["EXIT_API", "EXIT_CODES", "EXIT_FORBIDDEN", "EXIT_USAGE", "Explained", "explain"]

# The API groups of fleetwave's own kinds: a 404 naming one of them means its CRDs are missing.
_OWN_GROUPS = ("fleetwave.io", "projectsveltos.io", "kubernetes-fleet.io")


@dataclass(frozen=True, slots=True)
class Explained:
    message: str
    code: int


def explain(error: BaseException) -> Explained | None:
    """The person-readable form of an error outside fleetwave's control; None for anything else
    (a bug: its traceback is worth reading)."""
    if isinstance(error, BaseExceptionGroup) and error.exceptions:
        return explain(error.exceptions[0])
    if isinstance(error, ops.StatusError):
        return _answer(error)
    if isinstance(error, ops.TransportError):
        return _transport(error)
    if isinstance(error, kubeclient.ConfigError | yamlsafe.YamlError):
        return Explained(f"the kubeconfig cannot be used: {error}", EXIT_USAGE)
    if isinstance(error, TimeoutError):
        return Explained("the API server did not answer in time: try again, or check the cluster", EXIT_API)
    return None


def generic(error: ops.StatusError) -> bool:
    """An answer that means the same whatever the command asked (credentials, rights, throttling, a
    failing server, fleetwave's CRDs missing): `explain` says it better than the command could."""
    code = ops.code_of(error)
    return code in (401, 403, 429) or code >= 500 or (code == 404 and _crds_missing(error))


def _server(error: ops.HTTPError) -> str:
    try:
        url = error.request.url
    except RuntimeError:  # an error raised before any request was made
        return "the API server"
    return f"the API server at {url.scheme}://{url.host}{f':{url.port}' if url.port else ''}"


_TLS = (
    "refused the TLS handshake, or its certificate is not trusted: check the kubeconfig's server "
    "and certificate-authority-data"
)
_DNS = "has a name that does not resolve: check the kubeconfig's server and your DNS"
_SLOW = "did not answer in time: is the cluster up, and reachable from here (proxy, VPN)?"
_DOWN = (
    "cannot be reached: is the cluster running, and is this the kubeconfig and context you meant "
    "(--kubeconfig, --context)?"
)


def _transport(error: ops.TransportError) -> Explained:
    server, text = _server(error), str(error)
    if isinstance(error.__context__, ssl.SSLError) or "CERTIFICATE_VERIFY_FAILED" in text or "SSL" in text:
        why = _TLS
    elif "Name or service not known" in text or "nodename nor servname" in text or "getaddrinfo" in text:
        why = _DNS
    elif isinstance(error, ops.TimeoutException):
        why = _SLOW
    else:
        why = _DOWN
    return Explained(f"{server} {why}", EXIT_API)


def _answer(error: ops.StatusError) -> Explained:
    code, server = ops.code_of(error), _server(error)
    said = ops.message_of(error)
    if code == 401:
        return Explained(
            f"{server} did not accept your credentials (401): renew the kubeconfig's token or certificate",
            EXIT_FORBIDDEN,
        )
    if code == 403:
        return Explained(f"{server} refused the request (403): {said}", EXIT_FORBIDDEN)
    if code == 404 and _crds_missing(error):
        return Explained(
            f"the fleetwave CRDs are not installed in the cluster behind {server}: run `fleetwave install`",
            EXIT_API,
        )
    if code == 429:
        return Explained(f"{server} is throttling requests (429): try again in a moment", EXIT_API)
    if code >= 500:
        return Explained(f"{server} failed ({code}): {said}; try again, or check the API server", EXIT_API)
    return Explained(f"{server} refused the request ({code}): {said}", EXIT_API)


def _crds_missing(error: ops.StatusError) -> bool:
    """A 404 for a whole resource type of fleetwave's groups (plain text, or a Status without a
    name), not for one object."""
    try:
        path = error.request.url.path
    except RuntimeError:
        return False
    return any(group in path for group in _OWN_GROUPS) and ops.is_unserved(error)
