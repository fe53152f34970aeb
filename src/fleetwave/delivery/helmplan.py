"""Pure decisions for Helm releases: where the chart comes from, the values, the helm arguments,
whether the deployed release is already the desired one, and how to recover from a failed attempt.

`helm` runs the binary with what this module decides; nothing here performs I/O.

Names that come from a profile never reach helm unchecked: release names, namespaces, chart names,
versions, OCI references and timeouts are validated first (`ContentError` naming the field, never a
shell or a flag), every flag value travels as the next argument of its flag (helm's flag parser
takes it verbatim, even when it begins with `-`), and positional arguments come after `--`, so
nothing a profile author writes can be read as a flag. Inline `values` are parsed with the bounded
loader (`api.yamlsafe`). A chart repository's host (http, https or oci) written as an address is
held to the outbound rules of every URL a user chooses (`promapi.guards`): never link-local, cloud
metadata or unspecified, loopback only with the operator's opt-in; `helm` resolves a name's
addresses and checks them before helm runs (ADR 0096).
"""

from __future__ import annotations

import hashlib
import json
import re
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fleetwave.api import yamlsafe
from fleetwave.api.sveltos import HelmChart
from fleetwave.delivery import helmoptions
from fleetwave.delivery.content import ContentError, canonical_json
from fleetwave.promapi import guards

# Phrases helm prints when it never reached the API server (as opposed to a server-side refusal).
_UNREACHABLE = (
    "kubernetes cluster unreachable",
    "connection refused",
    "no such host",
    "i/o timeout",
    "tls handshake timeout",
    "network is unreachable",
)
_GOOD_STATUSES = ("deployed", "superseded")
VALUES_BUDGET = yamlsafe.Budget(max_bytes=1024 * 1024, max_nodes=200_000)
CHART_METADATA_BUDGET = yamlsafe.Budget(max_bytes=256 * 1024, max_nodes=20_000)

# DNS-1123: a label (namespaces), a subdomain (helm's rule for release names, at most 53 characters).
_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS_LABEL = re.compile(rf"^{_LABEL}$")
_DNS_SUBDOMAIN = re.compile(rf"^{_LABEL}(\.{_LABEL})*$")
# A chart (or repository) name as helm accepts it: no path separators, no leading dot or dash.
_CHART_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
# One semantic version, possibly with a comparison or a wildcard (what `helm --version` accepts).
_OPERATOR = r"(=|!=|>=|<=|>|<|~>?|\^)"
_SEMVER = re.compile(
    "^" + _OPERATOR + r"?v?(0|[1-9][0-9]*|[xX*])(\.(0|[1-9][0-9]*|[xX*])){0,2}"
    r"(-[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?(\+[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?$"
)
_OPERATOR_SPACE = re.compile(rf"{_OPERATOR}\s+")
_CONSTRAINT_SPLIT = re.compile(r"\|\||,|\s+")
_OCI = re.compile(r"^oci://[A-Za-z0-9][A-Za-z0-9.-]*(:[0-9]+)?(/[A-Za-z0-9][A-Za-z0-9._-]*)+$")
_RELEASE_MAX, _NAMESPACE_MAX, _NAME_MAX, _VERSION_MAX = 53, 63, 250, 128
_DEFAULT_PORTS = {"http": 80, "https": 443, "oci": 443}


def _refuse(where: str, field: str, value: str, rule: str) -> ContentError:
    shown = value if len(value) <= 80 else f"{value[:77]}..."
    return ContentError(f"helm chart {where}: {field} {shown!r} is not {rule}")


def check_release(release_name: str, namespace: str) -> None:
    """A release name helm accepts (DNS-1123 subdomain, at most 53 characters) and a namespace
    name (DNS-1123 label)."""
    where = release_name if _DNS_SUBDOMAIN.fullmatch(release_name) else "?"
    if len(release_name) > _RELEASE_MAX or where == "?":
        raise _refuse(where, "releaseName", release_name, "a DNS-1123 name of at most 53 characters")
    if len(namespace) > _NAMESPACE_MAX or not _DNS_LABEL.fullmatch(namespace):
        raise _refuse(where, "releaseNamespace", namespace, "a DNS-1123 label (a namespace name)")


def check_version(where: str, version: str) -> None:
    """An exact semantic version, or a constraint of them (`^1.2`, `>=1.0 <2.0`, `1.x`)."""
    parts = [p for p in _CONSTRAINT_SPLIT.split(_OPERATOR_SPACE.sub(r"\1", version)) if p]
    well_formed = version.isprintable() and parts and all(_SEMVER.fullmatch(p) for p in parts)
    if len(version) > _VERSION_MAX or not well_formed:
        raise _refuse(where, "chartVersion", version, "a semantic version or version constraint")


def _check_chart_name(where: str, name: str) -> None:
    segments = name.split("/")
    # Sveltos writes "<repositoryName>/<chart>"; nothing deeper.
    if len(name) > _NAME_MAX or len(segments) > 2 or not all(_CHART_NAME.fullmatch(s) for s in segments):
        raise _refuse(where, "chartName", name, "a chart name ([A-Za-z0-9._-], optionally repo/chart)")


def check_chart(chart: HelmChart) -> None:
    """Every name of `chart` that reaches helm's command line, checked before anything runs."""
    check_release(chart.release_name, chart.release_namespace)
    where = chart.release_name
    if chart.chart_name:
        _check_chart_name(where, chart.chart_name)
    if chart.chart_version:
        check_version(where, chart.chart_version)
    try:
        helmoptions.check(chart.options, f"helm chart {where}")
    except helmoptions.OptionError as e:
        raise ContentError(str(e)) from None


@dataclass(frozen=True, slots=True)
class ChartSource:
    """What to pass to helm: `ref` (chart name, OCI reference or local path) plus repo/version."""

    ref: str
    repo: str | None = None
    version: str | None = None
    named: bool = False  # `ref` is "<repository>/<chart>" of helm's private repositories file

    @property
    def local(self) -> bool:
        return self.repo is None and not self.named and not self.ref.startswith("oci://")

    def via_repository_file(self, name: str) -> ChartSource:
        """The same chart, found through the repositories file's entry `name` instead of `--repo`:
        how helm takes an http(s) repository's credentials without a command-line password."""
        if self.repo is None:
            return self
        return ChartSource(f"{name}/{self.ref}", version=self.version, named=True)

    @property
    def remote(self) -> tuple[str, int] | None:
        """The host and port helm fetches the chart from; None for a local chart."""
        url = self.repo or (self.ref if self.ref.startswith("oci://") else "")
        if not url:
            return None
        parts = urllib.parse.urlsplit(url)
        port = parts.port  # ValueError when it is no port: `check_repository_host` says so
        return parts.hostname or "", port or _DEFAULT_PORTS.get(parts.scheme.lower(), 443)


@dataclass(frozen=True, slots=True)
class Release:
    """What helm reports about the latest revision of a release."""

    name: str
    namespace: str
    revision: int
    status: str
    chart_name: str
    chart_version: str
    values: dict[str, Any]
    labels: dict[str, str] = field(default_factory=dict)  # release labels (helm --labels)


# Who installed a release, as release labels (ADR 0063): tiers decide between two profiles that
# install the same release, as they do for objects.
OWNER_LABEL = "fleetwave.io/deployed-by"
TIER_LABEL = "fleetwave.io/tier"
DEFAULT_TIER = 100
# The fingerprint of the patches a release was post-rendered with (ADR 0105): same chart and values
# but other patches is not up to date. Absent when there were none.
POST_RENDER_LABEL = "fleetwave.io/post-render"


@dataclass(frozen=True, slots=True)
class Ownership:
    owner: str  # a label-safe inventory key
    tier: int = DEFAULT_TIER
    formerly: tuple[str, ...] = ()  # keys the same owner labelled releases with before (upgrades)

    def labels(self) -> dict[str, str]:
        return {OWNER_LABEL: self.owner, TIER_LABEL: str(self.tier)}

    def owners(self) -> tuple[str, ...]:
        return (self.owner, *self.formerly)


def removable(current: Release, owner: str | tuple[str, ...] | None, owned_only: bool) -> bool:
    """Whether the installed release may be removed for `owner`: never when another owner's label is
    on it; one without a label only when the caller knows the release as its own (not `owned_only`:
    its name came from somewhere that cannot prove that, such as a status others can write)."""
    owners = (owner,) if isinstance(owner, str) else owner
    label = current.labels.get(OWNER_LABEL)
    if not owners:
        return not owned_only  # no owner to prove it by
    return label in owners or (label is None and not owned_only)


def owned_elsewhere(current: Release | None, ours: Ownership | None) -> str:
    """Why `ours` must not install over the release (empty when it may): another owner keeps it
    unless our tier is strictly lower; a release without an owner label is taken over."""
    theirs = current.labels.get(OWNER_LABEL) if current is not None else None
    if ours is None or current is None or not theirs or theirs == ours.owner or theirs in ours.formerly:
        return ""
    try:
        their_tier = int(current.labels.get(TIER_LABEL) or DEFAULT_TIER)
    except ValueError:
        their_tier = DEFAULT_TIER
    if ours.tier < their_tier:
        return ""
    return (
        f"conflict: release {current.namespace}/{current.name} is deployed by {theirs} (tier {their_tier}); "
        f"tier {ours.tier} does not take it over, only a lower tier does"
    )


def chart_source(chart: HelmChart) -> ChartSource:
    """http(s) repository + chart name, an oci:// registry, or a local chart (directory or .tgz);
    `ContentError` for anything else, for names helm must not see (`check_chart`) and for a
    repository host that is a forbidden address (`check_repository_host`)."""
    check_chart(chart)
    url = chart.repository_url
    if not url.isprintable() or any(c.isspace() for c in url):
        raise _refuse(chart.release_name, "repositoryURL", url, "a URL or path without spaces or controls")
    source = _source(chart, url)
    check_repository_host(chart.release_name, source)
    return source


def _source(chart: HelmChart, url: str) -> ChartSource:
    name = chart.chart_name or ""
    # Sveltos writes chartName as "<repositoryName>/<chart>"; with --repo helm wants the bare chart.
    bare = name.rsplit("/", 1)[-1]
    if url.startswith(("http://", "https://")):
        if not bare:
            raise ContentError(f"helm chart {chart.release_name}: chartName is required with {url}")
        return ChartSource(bare, repo=url, version=chart.chart_version)
    if url.startswith("oci://"):
        ref = (
            url.rstrip("/")
            if not bare or url.rstrip("/").endswith(f"/{bare}")
            else f"{url.rstrip('/')}/{bare}"
        )
        if not _OCI.fullmatch(ref):
            raise _refuse(chart.release_name, "repositoryURL", url, "an oci://host/path reference")
        return ChartSource(ref, version=chart.chart_version)
    if url.startswith("file://"):
        url = url.removeprefix("file://")
    if not url.startswith("/"):
        raise ContentError(f"helm chart {chart.release_name}: unsupported repositoryURL {url!r}")
    return ChartSource(url, version=chart.chart_version)


def check_repository_host(where: str, source: ChartSource) -> None:
    """A repository host written as an address is refused when helm must not reach it; the message
    names the field and the address, never the URL (it may carry credentials)."""
    try:
        found = source.remote
    except ValueError:  # urlsplit's port: not a number or out of range
        raise ContentError(f"helm chart {where}: repositoryURL has an invalid port") from None
    if found is None:
        return
    host = found[0]
    if not host:
        raise ContentError(f"helm chart {where}: repositoryURL has no host")
    literal = guards.ip_literal(host)
    problem = guards.address_problem(literal) if literal is not None else ""
    if problem:
        raise ContentError(f"helm chart {where}: repositoryURL refused: {problem}")


def deep_merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in override.items():
        current = out.get(key)
        if isinstance(current, Mapping) and isinstance(value, Mapping):
            out[key] = deep_merge(current, value)
        else:
            out[key] = value
    return out


def desired_values(chart: HelmChart, resolved: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The chart's inline `values` (YAML) with the caller-resolved `valuesFrom` merged over them,
    like `helm -f inline -f from`: a later source wins key by key."""
    try:
        inline = yamlsafe.load(chart.values or "", budget=VALUES_BUDGET, what="values") or {}
    except yamlsafe.YamlError as err:
        # The loader's message names line and column, never the (possibly secret) text.
        raise ContentError(f"helm chart {chart.release_name}: values are not valid YAML: {err}") from None
    if not isinstance(inline, dict):
        raise ContentError(f"helm chart {chart.release_name}: values must be a YAML mapping")
    return deep_merge(inline, resolved or {})


def option_flags(chart: HelmChart) -> list[str]:
    """The Sveltos `options` fleetwave honours, as helm flags (delivery/helmoptions.py)."""
    return helmoptions.flags(chart.options)


def source_flags(source: ChartSource) -> list[str]:
    flags = ["--repo", source.repo] if source.repo else []
    return flags + (["--version", source.version] if source.version else [])


def post_render_digest(patches: Sequence[Mapping[str, Any]]) -> str:
    """A label-safe fingerprint of the patches a release is post-rendered with ("" for none)."""
    if not patches:
        return ""
    wanted = [{k: p[k] for k in ("patch", "target") if k in p} for p in patches]
    return hashlib.sha256(canonical_json(wanted).encode()).hexdigest()[:40]


def release_labels(
    ownership: Ownership | None, post_render: str = "", current: Release | None = None
) -> dict[str, str]:
    """The release labels an upgrade sets: the owner's, and the patches' fingerprint (helm merges
    labels on upgrade, so one no longer wanted is set to "null", which removes it)."""
    labels = ownership.labels() if ownership is not None else {}
    if post_render:
        labels[POST_RENDER_LABEL] = post_render
    elif current is not None and POST_RENDER_LABEL in current.labels:
        labels[POST_RENDER_LABEL] = "null"
    return labels


def upgrade_argv(
    chart: HelmChart,
    source: ChartSource,
    values_file: str,
    *,
    dry_run: bool,
    ownership: Ownership | None = None,
    labels: Mapping[str, str] | None = None,
) -> list[str]:
    """`helm upgrade --install` with its flags, then `--` and the release name and chart reference.
    `labels` (default: the owner's) replace `ownership`'s when given (`release_labels`)."""
    argv = ["upgrade", "--install", "--namespace", chart.release_namespace]
    argv += [*source_flags(source), "--values", values_file, "--reset-values", "--output", "json"]
    argv += option_flags(chart)
    chosen = dict(labels) if labels is not None else (ownership.labels() if ownership is not None else {})
    if chosen:  # label-safe keys and values: no comma or '=' reaches helm's parser
        argv += ["--labels", ",".join(f"{k}={v}" for k, v in chosen.items())]
    argv += ["--dry-run=server"] if dry_run else []
    return [*argv, "--", chart.release_name, source.ref]


def chart_metadata(text: str) -> tuple[str, str]:
    """(name, version) from `helm show chart` (a chart repository's Chart.yaml), bounded parsing."""
    try:
        meta = yamlsafe.load(text, budget=CHART_METADATA_BUDGET, what="Chart.yaml") or {}
    except yamlsafe.YamlError as err:
        raise ContentError(f"chart metadata is not valid YAML: {err}") from None
    if not isinstance(meta, dict):
        raise ContentError("chart metadata is not a YAML mapping")
    return str(meta.get("name", "")), str(meta.get("version", ""))


def parse_release(text: str, metadata: str | None = None) -> Release:
    """A release from `helm upgrade ... -o json`, or from `helm status -o json` (which omits the
    chart) together with `helm get metadata -o json`."""
    data = json.loads(text)
    chart = (data.get("chart") or {}).get("metadata") or {}
    labels = data.get("labels") or {}
    if metadata is not None:
        extra = json.loads(metadata)
        chart = {"name": extra.get("chart", ""), "version": extra.get("version", "")}
        labels = extra.get("labels") or labels
    return Release(
        name=str(data["name"]),
        namespace=str(data.get("namespace", "")),
        revision=int(data.get("version", 0)),
        status=str((data.get("info") or {}).get("status", "unknown")),
        chart_name=str(chart.get("name", "")),
        chart_version=str(chart.get("version", "")),
        values=dict(data.get("config") or {}),
        labels={str(k): str(v) for k, v in dict(labels).items()},
    )


def is_up_to_date(
    current: Release | None,
    *,
    chart_name: str,
    chart_version: str,
    values: Mapping[str, Any],
    ownership: Ownership | None = None,
    post_render: str = "",
) -> bool:
    """The deployed revision already runs this chart version with exactly these values, was
    post-rendered with the same patches (`post_render_digest`) and, when given, carries these owner
    labels."""
    return (
        current is not None
        and current.status == "deployed"
        and current.chart_name == chart_name
        and current.chart_version == chart_version
        and canonical_json(current.values) == canonical_json(dict(values))
        and current.labels.get(POST_RENDER_LABEL, "") == post_render
        and (ownership is None or all(current.labels.get(k) == v for k, v in ownership.labels().items()))
    )


def last_good_revision(history: Sequence[Mapping[str, Any]], *, below: int) -> int | None:
    """The newest revision older than `below` that was successfully deployed (from `helm history -o json`)."""
    good = [
        int(h["revision"])
        for h in history
        if h.get("status") in _GOOD_STATUSES and int(h["revision"]) < below
    ]
    return max(good, default=None)


def is_unreachable(stderr: str) -> bool:
    text = stderr.lower()
    return any(marker in text for marker in _UNREACHABLE)


def error_text(stderr: str) -> str:
    """helm's own message, without its "Error: " prefix and debug noise."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip() and not line.startswith("WARNING")]
    return "\n".join(line.removeprefix("Error: ") for line in lines) or "helm failed without a message"
