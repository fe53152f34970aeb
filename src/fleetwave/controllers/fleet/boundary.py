"""Where content may be read from, and what Local content may write (ADR 0046, ADR 0064).

Guards the members' credentials: their kubeconfig Secrets, fleetwave's own namespace and pull
members' hub namespaces are never content, whichever family's rollout or gate reads it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fleetwave.api import pullmode
from fleetwave.controllers.fleet import local_boundary, members
from fleetwave.controllers.shared.context import Context
from fleetwave.controllers.shared.watch_scope import unwatched


@dataclass(frozen=True, slots=True)
class Boundary:
    """Where a profile may read content from.

    `controller_namespace`: fleetwave's own namespace, never a source. `own_namespace`: set for a
    namespaced profile, which reads only there. `kubeconfig_secrets`: (namespace, name) of every
    Secret a MemberCluster references and of every Cluster API cluster's kubeconfig (ADR 0109),
    never a source whatever its type or labels. `watched`: the
    namespaces the controller reads (`--watch-namespace`), None for all.
    """

    controller_namespace: str | None = None
    own_namespace: str | None = None
    kubeconfig_secrets: frozenset[tuple[str, str]] = field(default_factory=frozenset)
    watched: frozenset[str] | None = None
    # The kinds the operator allows for Local content (`--local-content-kind`), None: any not denied.
    local_kinds: frozenset[str] | None = None

    def local_problem(self, obj: Mapping[str, Any]) -> str | None:
        return local_boundary.problem(
            obj,
            controller_namespace=self.controller_namespace,
            kubeconfig_secrets=self.kubeconfig_secrets,
            allowed_kinds=self.local_kinds,
        )

    def namespace_problem(self, namespace: str) -> str:
        if self.own_namespace is not None and namespace != self.own_namespace:
            return f"a namespaced profile reads only its own namespace ({self.own_namespace})"
        if namespace == self.controller_namespace:
            return "fleetwave's own namespace is never a content source"
        if namespace.startswith(pullmode.NAMESPACE_PREFIX):
            # A pull member's hub namespace holds its agent's account and work (ADR 0106).
            return f"{pullmode.NAMESPACE_PREFIX}* namespaces belong to pull members' agents, never content"
        return unwatched(namespace, self.watched)


def content_boundary(ctx: Context) -> Boundary:
    """What a cluster-scoped profile or a gate may read: anything but fleetwave's namespace and
    members' kubeconfigs."""
    return Boundary(
        controller_namespace=ctx.namespace,
        kubeconfig_secrets=members.credential_secrets(ctx.cache),
        watched=ctx.watched,
        local_kinds=ctx.local_content_kinds,
    )
