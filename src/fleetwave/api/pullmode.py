"""Pull-mode names (ADR 0106): where a pull member's work and agent live on the hub, and the labels
and annotations that tie them to the member. Pure: the controller, the agent and registration
agree on them."""

from __future__ import annotations

import hashlib

from fleetwave.api.families import CONTROLLER_NAMESPACE

NAMESPACE_PREFIX = "fleet-member-"
PULL_ANNOTATION = "fleetwave.io/pull-mode"  # "true" on a KubeFleet-group member joined by its agent
MEMBER_LABEL = "fleetwave.io/pull-member"  # on a member's namespace, work and lease: "<ns>.<name>"
LEASE_NAME = "fleetwave-agent"  # the agent's lease in its hub namespace: one agent acts, and lives
LEASE_LABEL = "fleetwave.io/agent-lease"  # "true": the hub's informer lists these leases alone
VERSION_ANNOTATION = "fleetwave.io/kubernetes-version"  # on the lease: the member's version
NODES_ANNOTATION = "fleetwave.io/node-count"  # on the lease: the member's node count
AGENT_NAME = "fleetwave-agent"  # the agent's ServiceAccount, Role and RoleBinding on the hub


def hub_namespace(cluster_key: str) -> str:
    """The member's namespace on the hub. KubeFleet's name (`fleet-member-<name>`) for members in the
    controller's namespace; `fleet-member-<namespace>-<name>` for others, shortened with a digest when
    over 63 characters. Registration refuses a namespace already labelled for another member."""
    namespace, _, name = cluster_key.partition("/")
    base = name if namespace == CONTROLLER_NAMESPACE else f"{namespace}-{name}"
    full = NAMESPACE_PREFIX + base
    if len(full) <= 63:
        return full
    digest = hashlib.sha256(cluster_key.encode()).hexdigest()[:10]
    return f"{full[:52].rstrip('-')}-{digest}"


def member_label(cluster_key: str) -> str:
    """A member key as a label value (a namespace has no dot, so the first one splits it back)."""
    return cluster_key.replace("/", ".", 1)


def member_of_label(value: str) -> str:
    return value.replace(".", "/", 1)


def work_name(prefix: str, owner_key: str) -> str:
    """A work's name: readable prefix, digest of what it is for (names of any length fit)."""
    return f"{prefix}-{hashlib.sha256(owner_key.encode()).hexdigest()[:20]}"
