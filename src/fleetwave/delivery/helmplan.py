"""Pure decisions for Helm releases: where the chart comes from, the values, the helm arguments,
whether the deployed release is already the desired one, and how to recover from a failed attempt.

`helm` runs the binary with what this module decides; nothing here performs I/O.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from fleetwave.api.sveltos import HelmChart
from fleetwave.delivery.content import ContentError, canonical_json

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


@dataclass(frozen=True, slots=True)
class ChartSource:
    """What to pass to helm: `ref` (chart name, OCI reference or local path) plus repo/version."""

    ref: str
    repo: str | None = None
    version: str | None = None

    @property
    def local(self) -> bool:
        return self.repo is None and not self.ref.startswith("oci://")


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


def chart_source(chart: HelmChart) -> ChartSource:
    """http(s) repository + chart name, an oci:// registry, or a local chart (directory or .tgz)."""
    url = chart.repository_url
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
        return ChartSource(ref, version=chart.chart_version)
    if url.startswith("file://"):
        url = url.removeprefix("file://")
    if not url.startswith("/"):
        raise ContentError(f"helm chart {chart.release_name}: unsupported repositoryURL {url!r}")
    return ChartSource(url, version=chart.chart_version)


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
        inline = yaml.safe_load(chart.values or "") or {}
    except yaml.YAMLError as err:
        raise ContentError(f"helm chart {chart.release_name}: values are not valid YAML: {err}") from err
    if not isinstance(inline, dict):
        raise ContentError(f"helm chart {chart.release_name}: values must be a YAML mapping")
    return deep_merge(inline, resolved or {})


def _opt(chart: HelmChart, *path: str) -> Any:
    node: Any = chart.options or {}
    for key in path:
        node = node.get(key) if isinstance(node, Mapping) else None
    return node


def option_flags(chart: HelmChart) -> list[str]:
    """The subset of Sveltos `options` that maps onto helm flags."""
    flags: list[str] = []
    if _opt(chart, "installOptions", "createNamespace") is not False:
        flags.append("--create-namespace")
    for key, flag in (
        ("wait", "--wait"),
        ("waitForJobs", "--wait-for-jobs"),
        ("skipCRDs", "--skip-crds"),
        ("disableHooks", "--no-hooks"),
        ("skipSchemaValidation", "--skip-schema-validation"),
    ):
        if _opt(chart, key) is True:
            flags.append(flag)
    if isinstance(timeout := _opt(chart, "timeout"), str):
        flags += ["--timeout", timeout]
    return flags


def source_flags(source: ChartSource) -> list[str]:
    flags = ["--repo", source.repo] if source.repo else []
    return flags + (["--version", source.version] if source.version else [])


def upgrade_argv(chart: HelmChart, source: ChartSource, values_file: str, *, dry_run: bool) -> list[str]:
    argv = ["upgrade", "--install", chart.release_name, source.ref, "--namespace", chart.release_namespace]
    argv += [*source_flags(source), "--values", values_file, "--reset-values", "--output", "json"]
    argv += option_flags(chart)
    return argv + (["--dry-run=server"] if dry_run else [])


def parse_release(text: str, metadata: str | None = None) -> Release:
    """A release from `helm upgrade ... -o json`, or from `helm status -o json` (which omits the
    chart) together with `helm get metadata -o json`."""
    data = json.loads(text)
    chart = (data.get("chart") or {}).get("metadata") or {}
    if metadata is not None:
        extra = json.loads(metadata)
        chart = {"name": extra.get("chart", ""), "version": extra.get("version", "")}
    return Release(
        name=str(data["name"]),
        namespace=str(data.get("namespace", "")),
        revision=int(data.get("version", 0)),
        status=str((data.get("info") or {}).get("status", "unknown")),
        chart_name=str(chart.get("name", "")),
        chart_version=str(chart.get("version", "")),
        values=dict(data.get("config") or {}),
    )


def is_up_to_date(
    current: Release | None, *, chart_name: str, chart_version: str, values: Mapping[str, Any]
) -> bool:
    """The deployed revision already runs this chart version with exactly these values."""
    return (
        current is not None
        and current.status == "deployed"
        and current.chart_name == chart_name
        and current.chart_version == chart_version
        and canonical_json(current.values) == canonical_json(dict(values))
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
