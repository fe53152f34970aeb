"""The controllers' ports to member clusters, backed by the real helm and the health checks.

Health evaluation is synchronous (Lua's getResource reads the cluster from inside the script), so it
runs in a worker thread with its own sync client, keeping the event loop free.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from typing import Any

from fleetwave.api.sveltos import HelmChart, ValidateHealth
from fleetwave.controllers.context import HealthOutcome, HelmOutcome
from fleetwave.delivery import helm
from fleetwave.delivery.target import MemberTarget
from fleetwave.health import checks, readiness
from fleetwave.health.reader import KindNotServed, KubeResourceReader
from fleetwave.kube import client as kubeclient
from fleetwave.kube import ops

ObjectId = tuple[str, str, str | None, str]


def _outcome(report: helm.HelmReleaseReport) -> HelmOutcome:
    if not report.ok:
        return HelmOutcome(
            False, "Failed", report.chart_version, report.values_hash, report.error or "", False
        )
    status = "Uninstalled" if report.action in ("uninstalled", "absent") else "Managing"
    return HelmOutcome(True, status, report.chart_version, report.values_hash, "", report.changed)


class HelmAdapter:
    def __init__(self, binary: str) -> None:
        self.binary = binary

    async def install_or_upgrade(
        self, target: MemberTarget, chart: HelmChart, *, values: Mapping[str, Any], dry_run: bool
    ) -> HelmOutcome:
        report = await helm.install_or_upgrade(
            target, chart, helm=self.binary, values=values, dry_run=dry_run
        )
        return _outcome(report)

    async def uninstall(self, target: MemberTarget, *, release: str, namespace: str) -> HelmOutcome:
        report = await helm.uninstall(
            target, helm=self.binary, release_name=release, release_namespace=namespace
        )
        return _outcome(report)


class HealthAdapter:
    async def check(
        self, target: MemberTarget, checks_: Iterable[ValidateHealth], *, objects: Iterable[ObjectId]
    ) -> HealthOutcome:
        return await asyncio.to_thread(_check, target, list(checks_), list(objects))


def _check(target: MemberTarget, user_checks: list[ValidateHealth], objects: list[ObjectId]) -> HealthOutcome:
    try:
        return _check_on(target, user_checks, objects)
    except (ops.HTTPError, OSError) as e:
        return HealthOutcome(False, f"cluster {target.name} unreachable: {type(e).__name__}: {e}")


def _check_on(
    target: MemberTarget, user_checks: list[ValidateHealth], objects: list[ObjectId]
) -> HealthOutcome:
    with kubeclient.client(kubeclient.config_from_bytes(target.kubeconfig)) as client:
        reader = KubeResourceReader(client)
        for api_version, kind, namespace, name in objects:
            try:
                live = reader.get(api_version, kind, namespace=namespace, name=name)
            except KindNotServed as e:
                return HealthOutcome(False, f"{kind} {name}: {e}")
            if live is None:
                return HealthOutcome(False, f"{kind} {namespace + '/' if namespace else ''}{name} not found")
            ok, message = readiness.is_ready(live)
            if not ok:
                return HealthOutcome(False, f"{kind} {namespace + '/' if namespace else ''}{name}: {message}")
        for result in checks.evaluate_all(user_checks, reader):
            if not result.ok:
                return HealthOutcome(False, f"health check {result.check or ''} failing: {result.message}")
    names = ", ".join(c.name for c in user_checks)
    return HealthOutcome(True, f"ready; health checks passing: {names}" if names else "ready")
