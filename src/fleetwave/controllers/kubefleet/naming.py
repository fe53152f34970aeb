"""Names, label keys and the two scopes (cluster-scoped and namespaced) of the KubeFleet kinds.

The label keys and name formats are upstream's, so the seed's `kubectl ... --show-labels` output
and `kubectl patch` commands work unchanged (ADR 0060).
"""

from __future__ import annotations

from dataclasses import dataclass

PREFIX = "kubernetes-fleet.io/"
LATEST_LABEL = PREFIX + "is-latest-snapshot"
PARENT_LABEL = PREFIX + "parent-CRP"
INDEX_LABEL = PREFIX + "resource-index"
HASH_ANNOTATION = PREFIX + "resource-hash"
RUN_LABEL = PREFIX + "targetUpdateRun"
STAGE_LABEL = PREFIX + "targetUpdatingStage"
TASK_LABEL = PREFIX + "taskType"
LATEST_APPROVAL_LABEL = PREFIX + "isLatestUpdateRunApproval"
DELETE_STAGE = PREFIX + "deleteStage"
STUCK_ANNOTATION = "fleetwave.io/stuck-threshold"
DEADLINE_ANNOTATION = "fleetwave.io/progress-deadline"
# On an approval request under seed 004's name: the upstream-named request it is one approval with.
SAME_APPROVAL_ANNOTATION = "fleetwave.io/same-approval-as"


@dataclass(frozen=True, slots=True)
class Scope:
    """The kinds one controller instance works with: the cluster-scoped family or the namespaced one."""

    placement: str
    snapshot: str
    strategy: str
    run: str
    approval: str
    namespaced: bool

    def key(self, namespace: str | None, name: str) -> str:
        return f"{namespace}/{name}" if self.namespaced else name

    def inventory(self, namespace: str | None, placement: str) -> str:
        return f"kf/rp/{namespace}/{placement}" if self.namespaced else f"kf/crp/{placement}"


CLUSTER = Scope(
    "ClusterResourcePlacement",
    "ClusterResourceSnapshot",
    "ClusterStagedUpdateStrategy",
    "ClusterStagedUpdateRun",
    "ClusterApprovalRequest",
    namespaced=False,
)
NAMESPACED = Scope(
    "ResourcePlacement",
    "ResourceSnapshot",
    "StagedUpdateStrategy",
    "StagedUpdateRun",
    "ApprovalRequest",
    True,
)
SCOPES = (CLUSTER, NAMESPACED)


def snapshot_name(placement: str, index: int) -> str:
    return f"{placement}-{index}-snapshot"


def split_key(key: str) -> tuple[str | None, str]:
    namespace, _, name = key.rpartition("/")
    return (namespace or None), name
