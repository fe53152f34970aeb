"""Drift noticed through member watches (ADR 0114): a summary that detects drift is woken when one of
the objects it deployed (its resources, its helm releases' objects) changes on the member.

The watches are the member watches judgements use (`member_watches`): one stream per (kind,
namespace), never per object, shared with every other subscriber there. A summary's objects in more
than MAX_STREAMS kind/namespace pairs are watched per kind in every namespace instead (not for a
tenant admin, who may not list outside its namespaces); past that, or past the member's bound, the
summary is not watched and its caller polls. An event wakes the summary only when it is about one of
its objects and changed something besides status and server bookkeeping (a Deployment's replicas
turning ready is no drift).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from fleetwave.controllers.fleet.member_watches import Interest, MemberWatches
from fleetwave.delivery import content as ct
from fleetwave.delivery.target import MemberTarget

ObjectId = tuple[str, str, str | None, str]
MAX_STREAMS = 8  # per summary: half of a member's default bound, the rest stays for judgements
_Ident = tuple[str, str, str | None, str]  # (group, kind, namespace, name): any served version


def _ident(api_version: str, kind: str, namespace: str | None, name: str) -> _Ident:
    return (api_version.rpartition("/")[0], kind, namespace or None, name)


def plan(
    objects: Iterable[ObjectId], *, limit: int = MAX_STREAMS, everywhere: bool = True
) -> list[Interest] | None:
    """The streams that cover `objects`: per kind and namespace, or per kind in every namespace
    (`everywhere` allowed) when that is what stays within `limit`; None when nothing does."""
    namespaces: dict[tuple[str, str], set[str | None]] = {}
    for api_version, kind, namespace, _name in objects:
        namespaces.setdefault((api_version, kind), set()).add(namespace or None)
    if sum(len(n) for n in namespaces.values()) <= limit:
        return sorted(
            (Interest(a, k, ns) for (a, k), spread in namespaces.items() for ns in spread),
            key=lambda i: (i.api_version, i.kind, i.namespace or ""),
        )
    if not everywhere or len(namespaces) > limit:
        return None
    return sorted((Interest(a, k, None) for a, k in namespaces), key=lambda i: (i.api_version, i.kind))


def fingerprint(obj: Mapping[str, Any]) -> str:
    """What a drift is a change of: the object less status and server bookkeeping."""
    return hashlib.sha256(ct.canonical_json(ct.comparable(obj)).encode()).hexdigest()


@dataclass(slots=True)
class _Followed:
    idents: frozenset[_Ident]
    watched: bool
    seen: dict[_Ident, str] = field(default_factory=dict)  # fingerprint last seen, by object

    def changed(self, obj: Mapping[str, Any]) -> bool:
        """Whether `obj` is one of ours and differs from how it was last seen (first sight: yes)."""
        meta = obj.get("metadata") or {}
        ident = _ident(
            str(obj.get("apiVersion", "")), str(obj.get("kind")), meta.get("namespace"), str(meta.get("name"))
        )
        # Content that names no namespace is deployed to the default one: it matches any.
        if ident not in self.idents and (*ident[:2], None, ident[3]) not in self.idents:
            return False
        digest = fingerprint(obj)
        if self.seen.get(ident) == digest:
            return False
        self.seen[ident] = digest
        return True


class DriftWatches:
    """The DriftWatchPort over the member watches (the Context's `drift_watches`)."""

    def __init__(self, watches: MemberWatches, *, limit: int = MAX_STREAMS) -> None:
        self.watches = watches
        self.limit = limit
        self._followed: dict[Hashable, _Followed] = {}

    def now(self) -> float:
        return self.watches.now()

    def follow(
        self,
        target: MemberTarget,
        key: Hashable,
        objects: Iterable[ObjectId],
        wake: Callable[[], None],
        *,
        since: float | None = None,
    ) -> bool:
        ids = list(objects)
        interests = plan(ids, limit=self.limit, everywhere=not target.tenant)
        if not ids or interests is None:
            self.forget(key)
            if ids:
                self._followed[key] = _Followed(frozenset(), watched=False)
            return False
        before = self._followed.get(key)
        followed = _Followed(frozenset(_ident(*i) for i in ids), watched=True)
        if before is not None:  # what was seen of objects still followed stays the baseline
            followed.seen = {k: v for k, v in before.seen.items() if k in followed.idents}
        self._followed[key] = followed
        followed.watched = self.watches.subscribe(
            target, interests, ("drift", key), wake, since=since, only=followed.changed
        )
        if not followed.watched:  # partly covered is polled all the same: hold no stream for it
            self.watches.release(("drift", key))
        return followed.watched

    def watched(self, key: Hashable) -> bool:
        followed = self._followed.get(key)
        return followed is not None and followed.watched

    def forget(self, key: Hashable) -> None:
        if self._followed.pop(key, None) is not None:
            self.watches.release(("drift", key))
