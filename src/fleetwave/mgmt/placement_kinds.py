"""Kinds a placement may select besides the built-in ones (`--placement-kind`, ADR 0091).

Named as `group/version/Kind` (`v1/Kind` for the core group), resolved through the management
cluster's discovery into a plural and a scope, which the controller needs for its informers and the
install for its RBAC (read only: get, list, watch). fleetwave's own API groups (and its upstreams'),
and the management cluster's own machinery (leases, events, certificates, auth reviews, nodes, pods)
are never placeable.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from fleetwave.kube import kinds

# fleetwave's and its upstreams' own kinds are reconciled, never copied to members as content.
_REFUSED_GROUPS = frozenset(
    {
        "fleetwave.io",
        "config.projectsveltos.io",
        "lib.projectsveltos.io",
        "placement.kubernetes-fleet.io",
        "cluster.kubernetes-fleet.io",
        # Cluster-wide authority over the management cluster itself: no content a member should get
        # from a hub by accident, and no reason for the controller to read them.
        "authentication.k8s.io",
        "authorization.k8s.io",
        "certificates.k8s.io",
        "coordination.k8s.io",
        "events.k8s.io",
    }
)


class PlacementKindError(ValueError):
    """A --placement-kind that cannot be placed; the message says why and what to write."""


def parse(text: str) -> kinds.GVK:
    """`group/version/Kind` or `v1/Kind` (core) as a GVK; refuses fleetwave's own groups."""
    parts = text.strip().split("/")
    if len(parts) == 2:
        group, version, kind = "", parts[0], parts[1]
    elif len(parts) == 3:
        group, version, kind = parts
    else:
        raise PlacementKindError(
            f"--placement-kind {text[:80]!r}: write group/version/Kind (v1/Kind for core)"
        )
    if not version or not kind or not kind[0].isupper() or not kind.isalnum():
        raise PlacementKindError(
            f"--placement-kind {text[:80]!r}: write group/version/Kind (v1/Kind for core)"
        )
    if group in _REFUSED_GROUPS or group.endswith(".fleetwave.io"):
        raise PlacementKindError(f"--placement-kind {text[:80]!r}: kinds of {group} are never placed")
    if not group and kind in ("Event", "Node", "Pod", "Binding", "ComponentStatus"):
        raise PlacementKindError(f"--placement-kind {text[:80]!r}: {kind} is not content to place")
    return kinds.GVK(f"{group}/{version}" if group else version, kind)


def resolve(client: Any, texts: Iterable[str]) -> tuple[kinds.KindInfo, ...]:
    """Each kind's plural and scope from the management cluster's discovery, in the given order
    without repeats (a built-in placeable kind is accepted and changes nothing); a kind the cluster
    does not serve is an error (the install needs its plural)."""
    found, missing = resolve_served(client, texts)
    if missing:
        raise PlacementKindError(missing[0])
    return found


def resolve_served(client: Any, texts: Iterable[str]) -> tuple[tuple[kinds.KindInfo, ...], list[str]]:
    """(the kinds the cluster serves, a message for each it does not): the controller runs with what
    it can read instead of failing to start (its placements name what is missing)."""
    table = kinds.SyncKinds(client)
    out: list[kinds.KindInfo] = []
    missing: list[str] = []
    for text in texts:
        gvk = parse(text)
        info = table.find(gvk)
        if info is None:
            missing.append(
                f"--placement-kind {text.strip()}: the management cluster does not serve {gvk.kind} in "
                f"{gvk.api_version} (install its CRD, then restart the controller)"
            )
        elif info not in out:
            out.append(info)
    return tuple(out), missing
