"""How helm reaches a private chart registry or repository (Sveltos' `registryCredentialsConfig`),
decided without I/O: which Secret forms are credentials, for which host, and the files and flags
one helm process gets (ADR 0105).

A credential is only ever sent to the host it was given for: a docker config contributes the one
entry for the chart's host, and a basic-auth Secret must name its hosts in an annotation (its
creator's word), so whoever writes a profile cannot point a chart at a server of their own and
collect another team's password. Credentials reach helm as files (a docker config for `oci://`, a
repositories file for http(s)), never as arguments or environment; `helm` writes them for one
process at a time. No message here quotes a value: Secrets are named by namespace/name and key.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from fleetwave.api import yamlsafe

DOCKER_CONFIG_TYPE = "kubernetes.io/dockerconfigjson"
DOCKER_CONFIG_KEY = ".dockerconfigjson"
BASIC_AUTH_TYPE = "kubernetes.io/basic-auth"
HOSTS_ANNOTATION = "fleetwave.io/registry-hosts"
CA_KEY = "ca.crt"
# The name of the one entry of the private repositories file: never text from a profile.
REPOSITORY_NAME = "fleetwave-private"
MAX_VALUE_BYTES = 64 * 1024  # a docker config, a password or a CA bundle: far more than any needs
_DOCKER_BUDGET = yamlsafe.Budget(max_bytes=MAX_VALUE_BYTES, max_depth=8, max_nodes=10_000)
_DEFAULT_PORTS = {"http": 80, "https": 443, "oci": 443}
_PEM_CERTIFICATE = re.compile(
    rb"-----BEGIN CERTIFICATE-----\r?\n[A-Za-z0-9+/=\r\n]+-----END CERTIFICATE-----\r?\n?"
)


class RegistryError(ValueError):
    """The registry configuration or a Secret it names cannot be used; the message names the rule."""


@dataclass(frozen=True, slots=True)
class Access:
    """What one chart's helm needs to reach its registry. The values never show in a repr."""

    url: str  # repositoryURL as written (http, https or oci)
    username: str = field(default="", repr=False)
    password: str = field(default="", repr=False)
    ca_pem: bytes = field(default=b"", repr=False)
    insecure: bool = False
    plain_http: bool = False

    @property
    def oci(self) -> bool:
        return self.url.startswith("oci://")

    @property
    def has_credentials(self) -> bool:
        return bool(self.username or self.password)

    @property
    def named_repository(self) -> bool:
        """An http(s) repository with credentials goes through a repositories file: helm takes
        credentials for `--repo` only as `--username/--password`, which would put them on its
        command line."""
        return self.has_credentials and not self.oci

    def secrets(self) -> tuple[str, ...]:
        """Texts that must never leave helm's files: scrubbed from anything helm prints."""
        if not self.has_credentials:
            return ()
        basic = base64.b64encode(f"{self.username}:{self.password}".encode()).decode()
        return tuple(s for s in (self.password, basic) if len(s) >= 4)


def host_of(url: str) -> str:
    """`host` or `host:port` of an http(s) or oci URL, lowercase, the port only when not the default."""
    parts = urllib.parse.urlsplit(url)
    host = (parts.hostname or "").lower()
    port = parts.port
    if ":" in host:
        host = f"[{host}]"
    return host if port in (None, _DEFAULT_PORTS.get(parts.scheme.lower())) else f"{host}:{port}"


def _normal_host(text: str, scheme: str) -> str:
    """A docker config key or an annotation entry (`host`, `host:port`, `https://host/v1/`) as
    `host_of` writes hosts."""
    text = text.strip()
    if "://" not in text:
        text = f"{scheme}://{text}"
    try:
        return host_of(text)
    except ValueError:  # a port that is no number: matches nothing
        return ""


def check_config(
    url: str,
    *,
    ca: bool,
    insecure: bool,
    plain_http: bool,
    where: str,
) -> None:
    """The combinations that mean something to helm; the others are refused by name, not ignored."""
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    if scheme not in ("http", "https", "oci"):
        raise RegistryError(f"{where}: only for an oci:// registry or an http(s):// chart repository")
    if plain_http and scheme == "https":
        raise RegistryError(f"{where}.plainHTTP: repositoryURL is https://; plainHTTP applies to oci://")
    if scheme == "http" and (ca or insecure):
        field_name = "ca" if ca else "insecureSkipTLSVerify"
        raise RegistryError(f"{where}.{field_name}: repositoryURL is http://, there is no TLS to verify")
    if plain_http and (ca or insecure):
        raise RegistryError(f"{where}.plainHTTP: plain HTTP has no TLS; remove ca/insecureSkipTLSVerify")
    if ca and insecure:
        raise RegistryError(f"{where}.insecureSkipTLSVerify: ca is given; verify with it or skip, not both")


def _value(secret: Mapping[str, Any], key: str, name: str) -> bytes:
    data = secret.get("data") or {}
    raw = data.get(key) if isinstance(data, Mapping) else None
    if not isinstance(raw, str) or not raw:
        raise RegistryError(f"Secret {name} has no key {key}")
    too_large = RegistryError(f"Secret {name}: {key} is larger than {MAX_VALUE_BYTES} bytes")
    if len(raw) > MAX_VALUE_BYTES * 4 // 3 + 4:  # decoding it would cost what it claims
        raise too_large
    try:
        value = base64.b64decode(raw, validate=True)
    except (binascii.Error, ValueError):
        raise RegistryError(f"Secret {name}: {key} is not base64-encoded") from None
    if len(value) > MAX_VALUE_BYTES:
        raise too_large
    return value


def _text(secret: Mapping[str, Any], key: str, name: str) -> str:
    try:
        return _value(secret, key, name).decode()
    except UnicodeDecodeError:
        raise RegistryError(f"Secret {name}: {key} is not UTF-8 text") from None


def secret_name(secret: Mapping[str, Any]) -> str:
    meta = secret.get("metadata") or {}
    return f"{meta.get('namespace')}/{meta.get('name')}"


def credentials(secret: Mapping[str, Any], url: str, *, key: str | None) -> tuple[str, str]:
    """(username, password) for the host of `url` from a credential Secret, by its type's rules."""
    name = secret_name(secret)
    kind = str(secret.get("type") or "Opaque")
    if kind == DOCKER_CONFIG_TYPE:
        return _from_docker_config(_text(secret, key or DOCKER_CONFIG_KEY, name), url, name)
    if kind == BASIC_AUTH_TYPE:
        if key:
            raise RegistryError(f"key: only for a Secret of type {DOCKER_CONFIG_TYPE}; {name} is basic-auth")
        _check_hosts(secret, url, name)
        return _text(secret, "username", name), _text(secret, "password", name)
    raise RegistryError(
        f"Secret {name} has type {kind[:100]}; registry credentials are read only from Secrets of type "
        f"{DOCKER_CONFIG_TYPE} or {BASIC_AUTH_TYPE}"
    )


def _check_hosts(secret: Mapping[str, Any], url: str, name: str) -> None:
    """A basic-auth Secret goes only to the hosts its annotation names."""
    annotations = (secret.get("metadata") or {}).get("annotations") or {}
    listed = str(annotations.get(HOSTS_ANNOTATION) or "")
    scheme = url.split("://", 1)[0].lower()
    host = host_of(url)
    if not listed:
        raise RegistryError(
            f"Secret {name} does not name the hosts it may be sent to: annotate it "
            f"{HOSTS_ANNOTATION}={host} (comma-separated hosts), or use a {DOCKER_CONFIG_TYPE} Secret"
        )
    if host not in {_normal_host(h, scheme) for h in listed.split(",") if h.strip()}:
        raise RegistryError(f"Secret {name} is not for {host}: its {HOSTS_ANNOTATION} does not name it")


def _from_docker_config(text: str, url: str, name: str) -> tuple[str, str]:
    """The one entry of a docker config for the chart's host: its username and password (or `auth`).
    Credential helpers and stores are never run: only inline entries count."""
    try:
        config = yamlsafe.load(text, budget=_DOCKER_BUDGET, what="docker config")
    except yamlsafe.YamlError:
        raise RegistryError(f"Secret {name}: the docker config is not valid JSON") from None
    auths = config.get("auths") if isinstance(config, dict) else None
    if not isinstance(auths, dict):
        raise RegistryError(f"Secret {name}: the docker config has no auths")
    scheme, host = url.split("://", 1)[0].lower(), host_of(url)
    found = [entry for server, entry in auths.items() if _normal_host(str(server), scheme) == host]
    if len(found) != 1 or not isinstance(found[0], dict):
        what = "no entry" if not found else "more than one entry"
        raise RegistryError(f"Secret {name}: the docker config has {what} for {host}")
    return _user_and_password(found[0], host, name)


def _user_and_password(entry: Mapping[str, Any], host: str, name: str) -> tuple[str, str]:
    user, password = entry.get("username"), entry.get("password")
    if not user and not password and isinstance(entry.get("auth"), str):
        try:
            user, _, password = base64.b64decode(entry["auth"], validate=True).decode().partition(":")
        except (binascii.Error, ValueError, UnicodeDecodeError):
            raise RegistryError(f"Secret {name}: the auth of {host} is not base64 of user:password") from None
    if not isinstance(user, str) or not isinstance(password, str) or not user or not password:
        raise RegistryError(f"Secret {name}: the entry for {host} has no username and password")
    return user, password


def ca_bundle(secret: Mapping[str, Any]) -> bytes:
    """The PEM certificates of a CA Secret's `ca.crt`, and nothing else (never a key)."""
    name = secret_name(secret)
    pem = _value(secret, CA_KEY, name).strip() + b"\n"
    if _PEM_CERTIFICATE.sub(b"", pem).strip() or not _PEM_CERTIFICATE.search(pem):
        raise RegistryError(f"Secret {name}: {CA_KEY} must hold PEM certificates only")
    return pem


def docker_config(access: Access) -> bytes:
    """A registry config for helm holding only this chart's host."""
    auth = base64.b64encode(f"{access.username}:{access.password}".encode()).decode()
    return json.dumps({"auths": {host_of(access.url): {"auth": auth}}}).encode()


def repositories_file(access: Access, ca_file: str | None) -> bytes:
    """helm's repositories file with the one entry for this chart's repository. Credentials go only
    to the repository's own host (`pass_credentials_all: false`)."""
    entry: dict[str, Any] = {
        "name": REPOSITORY_NAME,
        "url": access.url,
        "username": access.username,
        "password": access.password,
        "insecure_skip_tls_verify": access.insecure,
        "pass_credentials_all": False,
    }
    if ca_file:
        entry["caFile"] = ca_file
    return yaml.safe_dump({"apiVersion": "", "repositories": [entry]}).encode()


def files(access: Access, directory: str) -> dict[str, bytes]:
    """File name -> content, for the private directory of one helm process."""
    out: dict[str, bytes] = {}
    if access.ca_pem:
        out["ca.crt"] = access.ca_pem
    if access.has_credentials and access.oci:
        out["registry.json"] = docker_config(access)
    if access.named_repository:
        ca_file = f"{directory}/ca.crt" if access.ca_pem else None
        out["repositories.yaml"] = repositories_file(access, ca_file)
    return out


def flags(access: Access, directory: str, *, index: bool = False) -> list[str]:
    """helm's flags for fetching the chart with `files(access, directory)` in place; `index`: for
    `helm repo update` (the repositories file carries the CA and TLS choice itself)."""
    if index:
        return ["--repository-config", f"{directory}/repositories.yaml"] if access.named_repository else []
    out: list[str] = []
    if access.has_credentials and access.oci:
        out += ["--registry-config", f"{directory}/registry.json"]
    if access.named_repository:
        out += ["--repository-config", f"{directory}/repositories.yaml"]
    if access.ca_pem:
        out += ["--ca-file", f"{directory}/ca.crt"]
    if access.insecure:
        out.append("--insecure-skip-tls-verify")
    if access.plain_http:
        out.append("--plain-http")
    return out


def scrub(text: str, access: Access | None) -> str:
    """`text` (helm's output) without any credential, should helm ever print one."""
    for secret in access.secrets() if access is not None else ():
        text = text.replace(secret, "***")
    return text
