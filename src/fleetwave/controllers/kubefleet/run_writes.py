"""Whether the cache shows a staged update run's last status write by this process.

A reconcile woken before the informer cache shows our last write waits for it (`run.reconcile`):
deciding from the older record would deliver again what the write recorded as done, and its own
write would be refused. The writes themselves are remembered by the one status writer
(`shared.status_writer`, ADR 0101).
"""

from __future__ import annotations

from fleetwave.controllers.kubefleet import naming as nm
from fleetwave.controllers.shared.context import Context
from fleetwave.controllers.shared.status_writer import Whose


def whose(scope: nm.Scope, namespace: str | None, name: str) -> Whose:
    return Whose(scope.run, scope.key(namespace, name))


def behind(ctx: Context, scope: nm.Scope, namespace: str | None, name: str, cached: str | None) -> bool:
    return ctx.statuses.behind(whose(scope, namespace, name), cached)


def caught_up(ctx: Context, scope: nm.Scope, namespace: str | None, name: str, cached: str | None) -> bool:
    return ctx.statuses.caught_up(whose(scope, namespace, name), cached)
