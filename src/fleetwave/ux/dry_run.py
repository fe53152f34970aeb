"""What a profile in `syncMode: DryRun` would change, as rows (`fleetwave status profile NAME
--dry-run-report`), read from its ClusterReports (ADR 0113). The columns follow `sveltosctl show
dryrun`: cluster, resource type, namespace, name, action, message, profile."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

COLUMNS = ("CLUSTER", "RESOURCE TYPE", "NAMESPACE", "NAME", "ACTION", "MESSAGE", "PROFILE")
PROFILE_LABEL = "fleetwave.io/cluster-profile"
HELM_RELEASE = "helm release"
_LISTS = ("resourceReports", "kustomizeResourceReports", "helmResourceReports")


def rows(reports: Iterable[Mapping[str, Any]]) -> list[dict[str, str]]:
    """One row per object and release of every report, ordered by cluster."""
    out: list[dict[str, str]] = []
    for report in sorted(reports, key=_cluster):
        cluster, profile = _cluster(report), _profile(report)
        status = report.get("status") or {}
        for entry in status.get("releaseReports") or []:
            out.append(
                _row(
                    cluster,
                    HELM_RELEASE,
                    str(entry.get("releaseNamespace") or ""),
                    str(entry.get("chartName") or ""),
                    entry,
                    profile,
                    _release_message(entry),
                )
            )
        for field in _LISTS:
            for entry in status.get(field) or []:
                resource = entry.get("resource") or {}
                out.append(
                    _row(
                        cluster,
                        _resource_type(resource),
                        str(resource.get("namespace") or ""),
                        str(resource.get("name") or ""),
                        entry,
                        profile,
                        str(entry.get("message") or ""),
                    )
                )
    return out


def _row(
    cluster: str, kind: str, namespace: str, name: str, entry: Mapping[str, Any], profile: str, message: str
) -> dict[str, str]:
    values = (cluster, kind, namespace, name, str(entry.get("action") or ""), message, profile)
    return dict(zip(COLUMNS, values, strict=True))


def _cluster(report: Mapping[str, Any]) -> str:
    spec = report.get("spec") or {}
    return f"{spec.get('clusterNamespace', '')}/{spec.get('clusterName', '')}"


def _profile(report: Mapping[str, Any]) -> str:
    labels = (report.get("metadata") or {}).get("labels") or {}
    return f"ClusterProfile/{labels.get(PROFILE_LABEL, '')}"


def _resource_type(resource: Mapping[str, Any]) -> str:
    group = str(resource.get("group") or "")
    version, kind = str(resource.get("version") or ""), str(resource.get("kind") or "")
    return f"{group}/{version}:{kind}" if group else f"{version}:{kind}"


def _release_message(entry: Mapping[str, Any]) -> str:
    version = str(entry.get("chartVersion") or "")
    message = str(entry.get("message") or "")
    parts = [f"chart version {version}" if version else "", message]
    return "; ".join(p for p in parts if p)
