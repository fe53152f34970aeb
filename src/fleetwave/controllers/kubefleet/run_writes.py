"""A staged update run's status writes of this process, remembered.

A reconcile woken before the informer cache shows our last write waits for it (`run.reconcile`):
deciding from the older record would deliver again what the write recorded as done, and its own
write would be refused. Progress-only changes are held back for a while after a write
(`run_execute`).
"""

from __future__ import annotations

import time

from fleetwave.controllers.kubefleet import naming as nm
from fleetwave.controllers.shared.context import Context
from fleetwave.kube.status import Versioned


def key_of(scope: nm.Scope, namespace: str | None, name: str) -> tuple[str, str]:
    return scope.run, scope.key(namespace, name)


def wrote(ctx: Context, scope: nm.Scope, namespace: str | None, name: str, after: Versioned) -> None:
    key = key_of(scope, namespace, name)
    ctx.own_writes.record(key, after.resource_version)
    ctx.status_written[key] = time.monotonic()


def behind(ctx: Context, scope: nm.Scope, namespace: str | None, name: str, cached: str | None) -> bool:
    return ctx.own_writes.behind(key_of(scope, namespace, name), cached)


def caught_up(ctx: Context, scope: nm.Scope, namespace: str | None, name: str, cached: str | None) -> bool:
    return ctx.own_writes.caught_up(key_of(scope, namespace, name), cached)
