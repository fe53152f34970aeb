"""Collect the content snapshots nothing names any more (ADR 0084).

A snapshot (`fw-content-<hash>`, a ConfigMap; `fw-content-s-<hash>`, a Secret owned by an anchor
ConfigMap of the same name) is named by:
- a ClusterSummary's content annotation (what a member runs, or is being given),
- a stage profile's pinned-content annotation (what its promotion pinned for the stage),
- a ClusterProfile's current content (the hash of its engine record, either kind of snapshot),
- a ClusterPromotion's `status.revisions` (its history, the newest ten: what a rollback returns to).
One that nothing names and that is older than the grace period is collected: its ConfigMap (the
snapshot, or the anchor of a Secret snapshot, which Kubernetes' garbage collector then deletes) is
deleted. The grace covers a snapshot a profile has just made and not named in a summary yet; were one
collected that is wanted again, the profile that wants it makes it again (its deletion wakes it).

`named` and `wait` are pure; `Collector.reconcile` is the shell, keyed by snapshot name.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from fleetwave.api.objects import Obj
from fleetwave.controllers.shared.context import Context
from fleetwave.controllers.sveltos import content, promotion_history
from fleetwave.controllers.sveltos.rollout_common import PINNED_ANNOTATION
from fleetwave.controllers.sveltos.summary_status import CONTENT_ANNOTATION
from fleetwave.core import timestamps
from fleetwave.kube import kinds, ops
from fleetwave.runtime.controller import Result

log = logging.getLogger(__name__)

GRACE_SECONDS = 600.0  # an unnamed snapshot younger than this is kept
SWEEP_SECONDS = 600.0  # a named one is looked at again after this (names move without waking us)


def _annotation(obj: Obj, key: str) -> str | None:
    value = ((obj.get("metadata") or {}).get("annotations") or {}).get(key)
    return str(value) if value else None


def _of_hash(content_hash: str) -> set[str]:
    return {
        prefix + content_hash[:40] for prefix in (content.SNAPSHOT_PREFIX, content.SECRET_SNAPSHOT_PREFIX)
    }


def named_by_summary(summary: Obj) -> set[str]:
    """The snapshot a ClusterSummary's member runs, or is being given."""
    return {_annotation(summary, CONTENT_ANNOTATION) or ""} - {""}


def named_by_profile(profile: Obj) -> set[str]:
    """The snapshot a stage profile's promotion pinned, and a profile's current content's."""
    out = {_annotation(profile, PINNED_ANNOTATION) or ""}
    current = ((profile.get("status") or {}).get("rollout") or {}).get("contentHash")
    if current:
        out |= _of_hash(str(current))
    return out - {""}


def named_by_promotion(promotion: Obj) -> set[str]:
    """The snapshots of a ClusterPromotion's history (what a rollback returns to)."""
    history = promotion_history.entries(promotion.get("status") or {})
    return {str(entry.get("snapshot") or "") for entry in history} - {""}


# What names a snapshot, by the kind that names it (each read through an index of the kind's cache).
NAMED_BY = {
    "ClusterSummary": named_by_summary,
    "ClusterProfile": named_by_profile,
    "ClusterPromotion": named_by_promotion,
}


def named(profiles: Iterable[Obj], summaries: Iterable[Obj], promotions: Iterable[Obj]) -> frozenset[str]:
    """Every snapshot name something still needs."""
    out: set[str] = set()
    for objs, names_of in (
        (summaries, named_by_summary),
        (profiles, named_by_profile),
        (promotions, named_by_promotion),
    ):
        for obj in objs:
            out |= names_of(obj)
    return frozenset(out)


def wait(
    created: datetime | None, is_named: bool, now: datetime, grace: float, sweep: float = SWEEP_SECONDS
) -> float | None:
    """Seconds until the snapshot is looked at again, or None: collect it now."""
    if is_named:
        return sweep
    if created is None:  # no creation time: never judged old enough
        return grace
    age = (now - created).total_seconds()
    return None if age >= grace else max(grace - age, 1.0)


@dataclass
class Collector:
    """The content-gc controller: `contexts` are every API family's (their caches say what is named);
    the first one's client and namespace are where snapshots live."""

    contexts: Sequence[Context]
    grace: float = GRACE_SECONDS
    sweep: float = SWEEP_SECONDS

    @property
    def _home(self) -> Context:
        return self.contexts[0]

    def names(self) -> list[str]:
        """Every snapshot ConfigMap (or anchor) in the controller's namespace."""
        home = self._home
        return sorted(
            str(o["metadata"]["name"])
            for o in home.cache.list("ConfigMap")
            if (o.get("metadata") or {}).get("namespace") == home.namespace
            and content.is_snapshot_name(str((o.get("metadata") or {}).get("name") or ""))
        )

    def names_of(self, obj: Any) -> list[str]:
        meta = obj.metadata
        if meta.namespace == self._home.namespace and content.is_snapshot_name(str(meta.name)):
            return [str(meta.name)]
        return []

    def is_named(self, name: str) -> bool:
        """Whether anything names the snapshot `name`: a lookup in each family's index of what its
        objects name, kept from informer events. Scanning every summary per snapshot instead held
        the event loop for seconds at 35,000 summaries (a hundred snapshots fell due together), long
        enough to lose the leader lease."""
        for ctx in self.contexts:
            for kind, names_of in NAMED_BY.items():
                if kind in ctx.family.kinds and ctx.cache.index(kind, "content-gc", names_of).keys_of(name):
                    return True
        return False

    async def reconcile(self, name: str) -> Result:
        home = self._home
        found = home.cache.get("ConfigMap", home.namespace, name)
        labels = ((found or {}).get("metadata") or {}).get("labels") or {}
        if found is None or labels.get(content.SNAPSHOT_LABEL) != "snapshot":
            return Result()  # gone, or not ours to judge
        created = timestamps.parse_optional(found["metadata"].get("creationTimestamp"))
        after = wait(created, self.is_named(name), home.clock(), self.grace, self.sweep)
        if after is not None:
            return Result(requeue_after=after)
        config_maps = kinds.builtin_resource("v1", "ConfigMap")
        if await ops.delete_if_exists(home.client, config_maps, name, namespace=home.namespace):
            what = "its Secret goes with it" if _annotation(found, content.ANCHOR_ANNOTATION) else "deleted"
            log.info("content snapshot %s collected: nothing names it any more (%s)", name, what)
        return Result()
