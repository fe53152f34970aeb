"""A Helm chart's `registryCredentialsConfig` within the content boundary (ADR 0105).

When the revision is resolved only the references are checked (nothing is read, so a Secret
created later or rotated never needs a new revision): the options must mean something to helm
together, each Secret must be named with its namespace, never in fleetwave's own namespace (or
outside the watched ones), and never a member cluster's kubeconfig. At each delivery the Secrets are
read from the informer cache, held to the same rules again (a pinned snapshot is held to today's
rules) and to the credential rules of `delivery.registry`: which Secret types hold credentials, and
which host they may go to. Every refusal names the field, the Secret and the rule, never a value.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from fleetwave.api.sveltos import HelmChart, SecretRef
from fleetwave.controllers.fleet import members
from fleetwave.controllers.fleet.boundary import Boundary
from fleetwave.delivery import registry
from fleetwave.delivery.registry import RegistryError

FIELD = "registryCredentialsConfig"
_SNAPSHOT_LABEL = "fleetwave.io/content"  # a content snapshot (content.SNAPSHOT_LABEL) is no source


class Lookup(Protocol):
    def get(self, kind: str, namespace: str, name: str) -> Mapping[str, Any] | None: ...


def check(chart: HelmChart, boundary: Boundary, path: str) -> None:
    """What is refused without reading anything: options helm would not honour together, and a
    Secret reference outside the boundary. `RegistryError` names the rule."""
    config = chart.registry_credentials_config
    if config is None:
        return
    where = f"{path}.{FIELD}" if path else FIELD
    registry.check_config(
        chart.repository_url,
        ca=config.ca is not None,
        insecure=bool(config.insecure_skip_tls_verify),
        plain_http=bool(config.plain_http),
        where=where,
    )
    if config.key and config.credentials is None:
        raise RegistryError(f"{where}.key: only meaningful with credentials")
    for name, ref in (("credentials", config.credentials), ("ca", config.ca)):
        if ref is not None:
            _where(boundary, ref, f"{where}.{name}")


def _where(boundary: Boundary, ref: SecretRef, path: str) -> None:
    if not ref.namespace:
        raise RegistryError(f"{path}.namespace: required (fleetwave does not default it to the cluster's)")
    problem = boundary.namespace_problem(ref.namespace)
    if problem:
        raise RegistryError(f"{path}: Secret {ref.namespace}/{ref.name}: {problem}")
    if (ref.namespace, ref.name) in boundary.kubeconfig_secrets:
        raise RegistryError(f"{path}: Secret {ref.namespace}/{ref.name} is a member cluster's kubeconfig")


def _read(lookup: Lookup, ref: SecretRef, path: str) -> Mapping[str, Any]:
    namespace = ref.namespace or ""
    secret = lookup.get("Secret", namespace, ref.name)
    if secret is None:
        raise RegistryError(f"{path}: Secret {namespace}/{ref.name} not found")
    labels = (secret.get("metadata") or {}).get("labels") or {}
    if members.SECRET_LABEL in labels:
        raise RegistryError(f"{path}: Secret {namespace}/{ref.name} is a member cluster's kubeconfig")
    if labels.get(_SNAPSHOT_LABEL) == "snapshot":
        raise RegistryError(f"{path}: Secret {namespace}/{ref.name} is a fleetwave content snapshot")
    return secret


def access(chart: HelmChart, lookup: Lookup, boundary: Boundary) -> registry.Access | None:
    """What helm needs to reach the chart's registry, read now from the cache (None without a
    `registryCredentialsConfig`); `RegistryError` naming the field and the rule otherwise."""
    config = chart.registry_credentials_config
    if config is None:
        return None
    check(chart, boundary, "")
    username = password = ""
    if config.credentials is not None:
        secret = _read(lookup, config.credentials, f"{FIELD}.credentials")
        try:
            username, password = registry.credentials(secret, chart.repository_url, key=config.key)
        except RegistryError as e:
            raise RegistryError(f"{FIELD}.credentials: {e}") from None
    ca = b""
    if config.ca is not None:
        try:
            ca = registry.ca_bundle(_read(lookup, config.ca, f"{FIELD}.ca"))
        except RegistryError as e:
            raise RegistryError(f"{FIELD}.ca: {e}") from None
    return registry.Access(
        url=chart.repository_url,
        username=username,
        password=password,
        ca_pem=ca,
        insecure=bool(config.insecure_skip_tls_verify),
        plain_http=bool(config.plain_http),
    )
