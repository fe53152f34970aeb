"""ClusterSet and Set reconcile (ADR 0108): keep each set's choice of member clusters in its status.

One pass: the set from the cache -> which members it matches and whether each is ready (the fleet
as rollouts see it: a paused member is not ready) -> `core.cluster_sets.select` (pure) over what the
status says the set chose -> one status write, guarded by the version decided from -> an Event when
the choice changed. ClusterProfiles that name the set follow its status (`watches`); a member change
that a set reads wakes every set (`watches._wire_members`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fleetwave.api import codec
from fleetwave.api.families import Family
from fleetwave.api.sets import ClusterSet, Set, SetSpec
from fleetwave.controllers.shared.context import Context, as_dict
from fleetwave.controllers.shared.status_writer import Whose
from fleetwave.controllers.sveltos import rollout_common as common
from fleetwave.controllers.sveltos import rollout_facts as rf
from fleetwave.core import cluster_sets
from fleetwave.core import model as m
from fleetwave.kube.status import StatusWrite, Versioned
from fleetwave.runtime.controller import Result
from fleetwave.translate import sets

log = logging.getLogger(__name__)

MODELS: Mapping[str, type[ClusterSet] | type[Set]] = {"ClusterSet": ClusterSet, "Set": Set}
KINDS = tuple(MODELS)
CHANGED = "SelectionChanged"
_NAMED = 10  # clusters an Event names before it counts the rest


@dataclass(frozen=True, slots=True)
class Choice:
    """One set's decision: what it matches (member key -> ready), what it chose before and now."""

    matching: Mapping[str, bool]
    before: tuple[str, ...]
    chosen: tuple[str, ...]

    @property
    def changed(self) -> bool:
        return set(self.before) != set(self.chosen)


def decide(spec: SetSpec, namespace: str | None, fleet: m.Fleet, before: Sequence[str]) -> Choice:
    """Pure: the set's choice over the fleet now (`namespace`: a Set's; None for a ClusterSet)."""
    matching = sets.matching(spec, namespace, fleet)
    return Choice(matching, tuple(before), cluster_sets.select(spec.max_replicas, matching, before))


def status_body(choice: Choice, family: Family) -> dict[str, Any]:
    """The status in upstream's shape: references to members as the family serves them."""
    matching = [rf.cluster_ref(k, family) for k in sorted(choice.matching)]
    chosen = [rf.cluster_ref(k, family) for k in choice.chosen]
    return {"matchingClusterRefs": matching or None, "selectedClusterRefs": chosen or None}


def describe(choice: Choice, fleet: m.Fleet, max_replicas: int) -> str:
    """What changed, in words: what was let go and why, what was chosen, and a shortfall."""
    dropped, added = cluster_sets.replaced(choice.before, choice.chosen)
    parts = []
    if dropped:
        parts.append("let go of " + ", ".join(_why(c, choice, fleet) for c in dropped[:_NAMED]))
    if added:
        parts.append("chose " + ", ".join(added[:_NAMED]))
    hidden = max(len(dropped) - _NAMED, 0) + max(len(added) - _NAMED, 0)
    text = "; ".join(parts) + (f" (and {hidden} more)" if hidden else "")
    if len(choice.chosen) < max_replicas:
        ready = sum(choice.matching.values())
        text += f"; {len(choice.chosen)} of maxReplicas {max_replicas} chosen ({ready} matching ready)"
    return text


def _why(key: str, choice: Choice, fleet: m.Fleet) -> str:
    if key not in fleet.by_name:
        return f"{key} (gone)"
    if key not in choice.matching:
        return f"{key} (no longer matches)"
    why = fleet.by_name[key].why
    return f"{key} (not ready: {why[:200]})" if why else f"{key} (not ready)"


async def reconcile(ctx: Context, kind: str, key: str) -> Result:
    namespace, _, name = key.rpartition("/")
    obj = ctx.cache.obj(kind, namespace or None, name)
    if obj is None or obj.metadata.deletionTimestamp:
        return Result()  # nothing to let go of: profiles naming a deleted set follow its deletion
    raw = as_dict(obj)
    if ctx.statuses.behind(Whose(kind, key), raw["metadata"].get("resourceVersion")):
        return Result(requeue_after=1.0)  # deciding from an older choice than ours: its event wakes us
    try:
        parsed = common.parse_as(raw, kind, MODELS[kind])
    except codec.ManifestError as e:  # the CRD's schema refuses what the model would
        log.warning("%s %s cannot be read, its choice is left as it is: %s", kind, key, e)
        return Result()
    for problem in sets.ref_problems(parsed.spec)[:_NAMED]:  # such a ref matches nothing
        await ctx.event(obj, True, "ClusterRefInvalid", problem)
    fleet = common.fleet_of(ctx.cache)
    choice = decide(parsed.spec, namespace or None, fleet, sets.chosen(raw))
    written, _ = await ctx.write_status(kind, Versioned.of_cached(obj), status_body(choice, ctx.family))
    if written is StatusWrite.CONFLICT:
        return Result(requeue=True)
    if written is StatusWrite.WRITTEN and choice.changed:
        await ctx.event(obj, False, CHANGED, describe(choice, fleet, parsed.spec.max_replicas))
    return Result()
