"""Plan freezing and batching: stage membership, deterministic order and in-flight limits."""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Iterable, Mapping

from fleetwave.core import model as m
from fleetwave.core import selectors
from fleetwave.core import status as st


def resolve_max_in_flight(limit: m.MaxInFlight, members: int) -> int:
    """Count or percent of the stage (a percent rounded as `limit.round_up` says, at least 1); 0
    means all."""
    if members <= 0:
        return 0
    if limit.value <= 0:
        return members
    if limit.percent:
        scaled = -(-limit.value * members // 100) if limit.round_up else limit.value * members // 100
        return min(members, max(1, scaled))
    return min(members, limit.value)


def sort_key(cluster: m.Cluster, label: str | None) -> tuple[int, int, str, str]:
    """Numeric label values first (ascending), then other values as strings, then unlabelled."""
    if label is None:
        return (0, 0, "", cluster.name)
    raw = cluster.labels.get(label)
    if raw is None:
        return (2, 0, "", cluster.name)
    try:
        return (0, int(raw), "", cluster.name)
    except ValueError:
        return (1, 0, raw, cluster.name)


def stage_index_for(stages: tuple[m.StageSpec, ...], labels: Mapping[str, str]) -> int:
    """The first stage whose selector matches claims the cluster; -1 when none does."""
    for i, stage in enumerate(stages):
        if selectors.matches(stage.selector, labels):
            return i
    return -1


def order_members(stage: m.StageSpec, clusters: Iterable[m.Cluster]) -> tuple[str, ...]:
    return tuple(c.name for c in sorted(clusters, key=lambda c: sort_key(c, stage.sorting_key)))


def freeze_plan(spec: m.RolloutSpec, fleet: m.Fleet, now: st.Instant) -> st.RolloutStatus:
    """Resolve every stage's member set once; later fleet changes never reshuffle it."""
    buckets: list[list[m.Cluster]] = [[] for _ in spec.stages]
    unmatched = 0
    for cluster in fleet.by_name.values():
        index = stage_index_for(spec.stages, cluster.labels)
        if index < 0:
            unmatched += 1
        else:
            buckets[index].append(cluster)
    stages = []
    stage_of: dict[str, int] = {}
    for i, (stage, bucket) in enumerate(zip(spec.stages, buckets, strict=True)):
        members = order_members(stage, bucket)
        stage_of.update(dict.fromkeys(members, i))
        limit = resolve_max_in_flight(stage.max_in_flight, len(members))
        stages.append(st.StageStatus(name=stage.name, clusters=members, max_in_flight=limit))
    return st.RolloutStatus(
        content_hash=spec.revision.content_hash,
        stages_hash=spec.revision.stages_hash,
        started_at=now,
        stages=tuple(stages),
        stage_of=stage_of,
        members=frozenset(stage_of),
        unmatched=unmatched,
    )


def _selector_json(selector: m.Selection | None) -> object:
    if selector is None:
        return None
    if isinstance(selector, m.AnyOf):  # a plain Selector hashes as it always did
        return {"anyOf": [_selector_json(s) for s in selector.selectors]}
    return {
        "matchLabels": sorted(selector.match_labels),
        "matchExpressions": [[r.key, str(r.operator), sorted(r.values)] for r in selector.match_expressions],
    }


def compute_stages_hash(stages: tuple[m.StageSpec, ...]) -> str:
    """Hash of what defines membership and order: name, selector, sorting key.

    Gates and max-in-flight are left out on purpose: editing a trigger or the pace never restarts.
    """
    return _stages_hash(tuple((s.name, s.selector, s.sorting_key) for s in stages))


@functools.lru_cache(maxsize=1024)
def _stages_hash(defining: tuple[tuple[str, m.Selection | None, str | None], ...]) -> str:
    # Once per definition: a stage profile's selector names up to thousands of clusters, and every
    # pass of it and of its summaries translated it again.
    doc = [{"name": name, "selector": _selector_json(sel), "sort": sort} for name, sel, sort in defining]
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()
