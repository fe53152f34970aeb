"""The fleet as the controllers see it: MemberCluster objects -> engine clusters and delivery targets.

A member is identified as `namespace/name` everywhere (engine plans, ClusterSummary specs, status
messages), so two clusters with one name in different namespaces never collide.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from fleetwave.core import model as m
from fleetwave.delivery.target import MemberTarget
from fleetwave.translate import NAME_LABEL

Obj = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Member:
    key: str  # namespace/name
    namespace: str
    name: str
    labels: Mapping[str, str]
    ready: bool
    paused: bool
    secret: tuple[str, str, str | None]  # namespace, name, key of the kubeconfig Secret


def member_key(namespace: str, name: str) -> str:
    return f"{namespace}/{name}"


def from_object(obj: Obj) -> Member:
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    ns, name = str(meta.get("namespace") or "default"), str(meta["name"])
    ref = spec.get("kubeconfigSecretRef") or {}
    secret = (str(ref.get("namespace") or ns), str(ref.get("name") or f"{name}-kubeconfig"), ref.get("key"))
    return Member(
        key=member_key(ns, name),
        namespace=ns,
        name=name,
        labels=dict(meta.get("labels") or {}),
        ready=bool(status.get("ready", False)),
        paused=bool(spec.get("paused", False)),
        secret=secret,
    )


def fleet(members: Iterable[Member]) -> m.Fleet:
    """Paused members stay in the fleet (their place in the plan is kept) but count as not ready."""
    return m.Fleet.of(
        m.Cluster(mb.key, {**mb.labels, NAME_LABEL: mb.name}, ready=mb.ready and not mb.paused)
        for mb in members
    )


def kubeconfig_from_secret(secret: Obj, key: str | None) -> bytes | None:
    """Sveltos convention: the named key, else `kubeconfig`, else the Secret's only key."""
    data: Mapping[str, str] = secret.get("data") or {}
    chosen = key if key else ("kubeconfig" if "kubeconfig" in data else next(iter(sorted(data)), None))
    if chosen is None or chosen not in data:
        return None
    return base64.b64decode(data[chosen])


def target(member: Member, secret: Obj | None) -> MemberTarget | None:
    if secret is None:
        return None
    raw = kubeconfig_from_secret(secret, member.secret[2])
    return None if raw is None else MemberTarget(name=member.key, kubeconfig=raw)


class Lookup(Protocol):
    def get(self, kind: str, namespace: str, name: str) -> Mapping[str, Any] | None: ...


def target_for(cache: Lookup, cluster: str) -> MemberTarget | None:
    """The delivery target of a registered member (`namespace/name`); None if it or its Secret is gone."""
    namespace, _, name = cluster.partition("/")
    mc = cache.get("MemberCluster", namespace, name)
    if mc is None:
        return None
    member = from_object(mc)
    return target(member, cache.get("Secret", member.secret[0], member.secret[1]))
