"""The controllers' ports to member clusters, backed by the real helm and the health-check sandbox.

Every health judgement with a user's check in it (Sveltos validateHealths, promotion
postDelayHealthChecks) runs in the sandbox's worker processes (`fleetwave.sandbox.pool.CheckPool`,
ADR 0041): user Lua and CEL never run on the controller's threads, and a check over its budget is a
failed check naming the limit. Readiness of delivered objects alone (KubeFleet availability, a
profile without validateHealths) runs no user code: it is judged on the event loop through the
member's pooled client (`delivery.availability`, ADR 0068).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable, Mapping, Sequence
from functools import partial
from typing import Any

from fleetwave.api.sveltos import HelmChart, ValidateHealth
from fleetwave.controllers.fleet.member_watches import Interest, MemberWatches
from fleetwave.controllers.fleet.sightings import Sightings
from fleetwave.controllers.shared.context import HealthOutcome, HelmOutcome, Wake
from fleetwave.delivery import availability, helm
from fleetwave.delivery.helmplan import Ownership
from fleetwave.delivery.registry import Access
from fleetwave.delivery.target import MemberTarget
from fleetwave.health import readiness
from fleetwave.runtime.metrics import RolloutMetrics
from fleetwave.sandbox.pool import CheckPool

ObjectId = tuple[str, str, str | None, str]


def _outcome(report: helm.HelmReleaseReport) -> HelmOutcome:
    before = report.installed_version
    if not report.ok:
        return HelmOutcome(
            False,
            "Failed",
            report.chart_version,
            report.values_hash,
            report.error or "",
            False,
            "failed",
            before,
        )
    status = "Uninstalled" if report.action in ("uninstalled", "absent") else "Managing"
    return HelmOutcome(
        True,
        status,
        report.chart_version,
        report.values_hash,
        "",
        report.changed,
        report.action,
        before,
        report.resources,
    )


class HelmAdapter:
    """helm for the controllers; `kustomize` is the binary helm's post-renderer patches with."""

    def __init__(self, binary: str, kustomize: str = "kustomize") -> None:
        self.binary = binary
        # The post-renderer runs kustomize with an empty PATH: it must be told where it is.
        self.kustomize = kustomize if os.sep in kustomize else (shutil.which(kustomize) or kustomize)

    async def install_or_upgrade(
        self,
        target: MemberTarget,
        chart: HelmChart,
        *,
        values: Mapping[str, Any],
        dry_run: bool,
        ownership: Ownership | None = None,
        access: Access | None = None,
        patches: Sequence[Mapping[str, Any]] = (),
    ) -> HelmOutcome:
        private = helm.Private(access, tuple(patches), self.kustomize)
        report = await helm.install_or_upgrade(
            target,
            chart,
            helm=self.binary,
            values=values,
            dry_run=dry_run,
            ownership=ownership,
            private=private,
        )
        return _outcome(report)

    async def uninstall(
        self,
        target: MemberTarget,
        *,
        release: str,
        namespace: str,
        owner: str | tuple[str, ...] | None = None,
        owned_only: bool = False,
    ) -> HelmOutcome:
        report = await helm.uninstall(
            target,
            helm=self.binary,
            release_name=release,
            release_namespace=namespace,
            owner=owner,
            owned_only=owned_only,
        )
        return _outcome(report)


class HealthAdapter:
    """The HealthPort: one member's judgement in a sandbox worker (the pool's life is the manager's).
    With `watches`, a judgement that is not ok is re-run as soon as a kind it reads changes there,
    on what it saw and what the watch delivered since while that is fresh (`Sightings`)."""

    def __init__(
        self, pool: CheckPool, watches: MemberWatches | None = None, metrics: RolloutMetrics | None = None
    ) -> None:
        self.pool = pool
        self.watches = watches
        self.metrics = metrics  # counts judgements by result (ADR 0082)
        self.sightings = Sightings()

    async def webhook_condition(
        self, rule: str, status: int, body: object, *, owner: str = ""
    ) -> tuple[bool, str]:
        verdict = await self.pool.webhook_condition(rule, status, body, owner=owner)
        return verdict.ok, verdict.message

    async def analysis_measurement(
        self, url: str, path: str, query: str, rule: str, *, owner: str = ""
    ) -> tuple[bool, str]:
        verdict = await self.pool.analysis_measurement(url, path, query, rule, owner=owner)
        return verdict.ok, verdict.message

    async def check(
        self,
        target: MemberTarget,
        checks_: Iterable[ValidateHealth],
        *,
        objects: Iterable[ObjectId],
        wake: Wake | None = None,
        seen: Mapping[ObjectId, Mapping[str, Any]] | None = None,
        delivered: bool = False,
        owner: str = "",
    ) -> HealthOutcome:
        listed, ids = list(checks_), list(objects)
        began = self.watches.now() if self.watches is not None else None
        # Sightings stand in for reads only where the member watch keeps them current.
        sighted = wake is not None and self.watches is not None and not listed
        fresh: dict[ObjectId, Any] = dict(seen or {})
        if delivered and wake is not None:
            self.sightings.forget(wake.key)
        if listed:
            verdict = await self.pool.check(
                target.kubeconfig, listed, ids, allow_insecure=target.allow_insecure, owner=owner
            )
            ok, message = verdict.ok, verdict.message
        else:
            wall = self.pool.budget.wall_seconds
            known = {**self.sightings.usable(wake.key, ids), **fresh} if sighted and wake else fresh
            ok, message = await availability.judge(target, ids, wall_seconds=wall, seen=known, read=fresh)
        if message.startswith("cluster unreachable"):  # the worker does not know the member's name
            message = f"cluster {target.name} unreachable" + message.removeprefix("cluster unreachable")
        if wake is not None and self.watches is not None:
            self._follow(self.watches, target, wake, ok, (listed, ids), (began, sighted, fresh))
        if self.metrics is not None:
            self.metrics.health_checks.labels("healthy" if ok else "unhealthy").inc()
        return HealthOutcome(ok, message)

    def _follow(
        self,
        watches: MemberWatches,
        target: MemberTarget,
        wake: Wake,
        ok: bool,
        read: tuple[list[ValidateHealth], list[ObjectId]],
        judged: tuple[float | None, bool, dict[ObjectId, Any]],
    ) -> None:
        """After a judgement: a passed one needs no more wake-ups; a failed one is woken by what it
        read changing. `read`: the user's checks and the objects judged; `judged`: when it began
        reading, whether sightings stood in, and what the delivery's applies returned."""
        (listed, ids), (began, sighted, fresh) = read, judged
        if ok:
            watches.release(wake.key)
            self.sightings.forget(wake.key)
            return
        # Built-in readiness alone: only an object turning ready can change the verdict, so the
        # rollout's steps on the way (a new ReplicaSet, one replica of two) wake nothing; the poll
        # keeps the message from going stale. A user's check may read anything.
        only, note = None, None
        if sighted:
            self.sightings.remember(wake.key, ids, fresh)
            only, note = _ready, partial(self.sightings.note, wake.key)
        watches.subscribe(
            target, interests(listed, ids), wake.key, wake.call, since=began, only=only, note=note
        )


def _ready(obj: Mapping[str, Any]) -> bool:
    return readiness.is_ready(dict(obj))[0]


def interests(checks_: Iterable[ValidateHealth], objects: Iterable[ObjectId]) -> list[Interest]:
    """What a judgement reads: each check's kind (in its namespace, or everywhere), and the kinds
    of delivered objects whose readiness can lag their existence (Deployments, Jobs, ...)."""
    out = [
        Interest(f"{c.group}/{c.version}" if c.group else c.version, c.kind, c.namespace or None)
        for c in checks_
        if c.kind and c.version
    ]
    out += [Interest(a, k, ns) for a, k, ns, _name in objects if readiness.judged(a, k)]
    return out
