"""The summary a placement shows: which clusters it picked, and whether they all hold one snapshot (pure).

Computed from every ledger of the placement (its own, for RollingUpdate, and each of its runs'), so
Available reads the same whether runs or the placement itself carried the content.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from fleetwave.api.conditions import cond
from fleetwave.api.objects import Obj
from fleetwave.controllers.kubefleet import history
from fleetwave.core import model as m
from fleetwave.core import status as st


@dataclass(frozen=True, slots=True)
class Frame:
    kind: str  # ClusterResourcePlacement | ResourcePlacement: the condition type prefix
    external: bool
    fleet: m.Fleet
    names: Mapping[str, str]  # cluster key -> the name shown
    generation: int | None
    report_diff: bool = False  # applyStrategy ReportDiff: nothing is applied, differences are reported
    wanted: int | None = None  # PickN's numberOfClusters: fewer picked leaves the policy unfulfilled


def summary(frame: Frame, held: Mapping[str, history.Held], previous: Obj, now: datetime) -> dict[str, Any]:
    """The placement's status from the newest event per cluster of its ledgers (`history.latest`)."""
    index, available = history.common_index(held, sorted(frame.fleet.names))
    picked = [
        _cluster_status(frame, held[c], frame.names.get(c, c))
        for c in sorted(frame.fleet.names)
        if c in held and held[c].index is not None
    ]
    return {
        "conditions": _conditions(frame, index, available, previous.get("conditions"), st.fmt(now)),
        "placementStatuses": picked,
        "observedResourceIndex": index,
    }


def _cluster_status(frame: Frame, held: history.Held, name: str) -> dict[str, Any]:
    out: dict[str, Any] = {"clusterName": name, "observedResourceIndex": held.index}
    applied = held.overrides or {}
    if applied.get("clusterResourceOverrideSnapshots"):
        out["applicableClusterResourceOverrides"] = list(applied["clusterResourceOverrideSnapshots"])
    if applied.get("resourceOverrideSnapshots"):
        out["applicableResourceOverrides"] = [dict(r) for r in applied["resourceOverrideSnapshots"]]
    out["conditions"] = [_overridden(frame, held, applied)]
    if frame.report_diff:
        out["diffReported"] = held.done
        out["diffedPlacements"] = [dict(d) for d in held.diffs]
    else:
        out["available"] = held.done
    return out


def _overridden(frame: Frame, held: history.Held, applied: Obj) -> dict[str, Any]:
    """Upstream's per-cluster Overridden, as of the cluster's last delivery."""
    if held.override_error:
        return cond(
            None, "Overridden", "False", "OverriddenFailed", held.override_error, frame.generation, held.at
        )
    if applied:
        said = "the applicable override snapshots were applied"
        return cond(None, "Overridden", "True", "OverriddenSucceeded", said, frame.generation, held.at)
    said = "no override applies to this cluster"
    return cond(None, "Overridden", "True", "NoOverrideSpecified", said, frame.generation, held.at)


def _conditions(frame: Frame, index: str | None, available: bool, prev: Any, at: str) -> list[dict[str, Any]]:
    gen, prefix = frame.generation, frame.kind
    shown = ", ".join(sorted(frame.names.get(c, c) for c in frame.fleet.names))
    picked = len(frame.fleet.names)
    if frame.wanted is not None and picked < frame.wanted:
        # As KubeFleet says it: the placement still goes to the clusters it could pick.
        message = (
            f"picked {picked} of the {frame.wanted} clusters asked for: {shown or 'none'}; no other cluster"
            " passes the required affinity, tolerations, readiness and topology spread constraints"
        )
        out = [cond(prev, f"{prefix}Scheduled", "False", "SchedulingPolicyUnfulfilled", message, gen, at)]
    else:
        message = f"picked {picked} clusters: {shown}"
        out = [cond(prev, f"{prefix}Scheduled", "True", "SchedulingPolicyFulfilled", message, gen, at)]
    if frame.report_diff:
        if available and frame.fleet.names:
            said = f"every picked cluster reported its differences from resource snapshot index {index}"
            out.append(cond(prev, f"{prefix}DiffReported", "True", "DiffReported", said, gen, at))
        else:
            why = "applyStrategy ReportDiff: differences are being reported, nothing is applied"
            out.append(cond(prev, f"{prefix}DiffReported", "Unknown", "DiffReportPending", why, gen, at))
    elif available and frame.fleet.names:
        holds = f"every picked cluster holds resource snapshot index {index}"
        out.append(cond(prev, f"{prefix}Available", "True", "ResourcesAvailable", holds, gen, at))
    else:
        why = "the rollout is controlled by staged update runs" if frame.external else "rolling out"
        out.append(cond(prev, f"{prefix}Available", "Unknown", "RolloutInProgress", why, gen, at))
    return out
