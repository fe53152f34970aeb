"""Rollout status: the frozen plan (stages -> ordered clusters -> batches) plus progress and conditions.

The status is the engine's only memory between steps; it is written back by the shell verbatim.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from enum import StrEnum

from fleetwave.core import timestamps

Instant = datetime  # always timezone-aware UTC


fmt = timestamps.fmt  # every status message renders instants this way


class RolloutPhase(StrEnum):
    PROGRESSING = "Progressing"
    WAITING = "Waiting"
    PAUSED = "Paused"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    ROLLING_BACK = "RollingBack"
    ROLLED_BACK = "RolledBack"


class StagePhase(StrEnum):
    PENDING = "Pending"
    WAITING_BEFORE = "WaitingBefore"  # before-gates not yet open
    PROGRESSING = "Progressing"  # delivering to member clusters
    WAITING_AFTER = "WaitingAfter"  # every member done; after-gates not yet open
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"


class GateState(StrEnum):
    PENDING = "Pending"  # not reached yet (an earlier gate in the list is still closed)
    WAITING = "Waiting"
    PASSED = "Passed"


class ConditionStatus(StrEnum):
    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"


class Reason(StrEnum):
    INITIALIZED = "Initialized"
    RESTARTED = "Restarted"
    PROGRESSING = "Progressing"
    WAITING = "Waiting"
    CLUSTER_FAILED = "ClusterFailed"
    DEADLINE_EXCEEDED = "ProgressDeadlineExceeded"
    FAILURE_BUDGET_EXCEEDED = "FailureBudgetExceeded"
    ANALYSIS_FAILED = "AnalysisFailed"
    PAUSED = "Paused"
    SUCCEEDED = "Succeeded"
    ROLLING_BACK = "RollingBack"
    ROLLED_BACK = "RolledBack"


@dataclass(frozen=True, slots=True)
class Condition:
    type: str
    status: ConditionStatus
    reason: Reason
    message: str
    last_transition: Instant


@dataclass(frozen=True, slots=True)
class GateStatus:
    kind: str  # "Delay", "Window", "Approval", "HealthChecks", "PreHealthDeployment"
    state: GateState
    message: str
    until: Instant | None = None  # when a time-based wait ends


@dataclass(frozen=True, slots=True)
class StageStatus:
    name: str
    clusters: tuple[str, ...]  # frozen member set, in rollout order
    max_in_flight: int  # resolved from count/percent; >= 1 unless the stage is empty
    phase: StagePhase = StagePhase.PENDING
    entered_at: Instant | None = None  # became the current stage (before-gate anchor)
    started_at: Instant | None = None  # before-gates open; delivery began
    delivered_at: Instant | None = None  # every member done (after-gate anchor)
    succeeded_at: Instant | None = None
    started: tuple[str, ...] = ()  # members delivery was started for, in order
    completed: int = 0  # members done at the last step
    last_progress_at: Instant | None = None
    gates: tuple[GateStatus, ...] = ()  # the gate list currently being evaluated
    failed: tuple[tuple[str, str], ...] = ()  # (cluster, message) currently failing
    message: str = ""
    # With a failure budget: when each currently failing cluster started failing, the clusters set
    # aside as failed within the budget (cluster, why), and whether the budget ran out here.
    failing_since: tuple[tuple[str, Instant], ...] = ()
    set_aside: tuple[tuple[str, str], ...] = ()
    over_budget: bool = False
    # With a failure budget and a progress deadline: when each applied cluster that is not available
    # yet was first seen so; past the deadline it is failed like a cluster whose delivery failed.
    unready_since: tuple[tuple[str, Instant], ...] = ()

    @property
    def batches(self) -> tuple[tuple[str, ...], ...]:
        """The nominal batches: consecutive chunks of `max_in_flight` members.

        Delivery is a sliding window (a slot frees as soon as a cluster is done), so these are the
        waves a user sees when every cluster takes the same time.
        """
        size = max(self.max_in_flight, 1)
        return tuple(self.clusters[i : i + size] for i in range(0, len(self.clusters), size))


@dataclass(frozen=True, slots=True)
class RollbackStatus:
    """A rollback in progress or done: the stages in reverse order, each holding only the clusters
    the failed revision touched there, walked like a forward stage (same batching, health checks)."""

    target: str  # content hash returned to
    label: str  # how people name the target ("revision 3")
    reason: str
    started_at: Instant
    stages: tuple[StageStatus, ...]
    current: int = 0

    @property
    def current_stage(self) -> StageStatus | None:
        return self.stages[self.current] if self.current < len(self.stages) else None

    @property
    def done(self) -> bool:
        return self.current >= len(self.stages)


@dataclass(frozen=True, slots=True)
class RolloutStatus:
    content_hash: str
    stages_hash: str
    started_at: Instant  # this revision's rollout began (plan frozen)
    stages: tuple[StageStatus, ...]
    stage_of: Mapping[str, int]  # member cluster -> stage index (frozen)
    members: frozenset[str]
    phase: RolloutPhase = RolloutPhase.PROGRESSING
    current: int = 0  # index of the current stage; len(stages) once every stage succeeded
    late_joiners: tuple[tuple[str, int], ...] = ()  # (cluster, matching stage or -1)
    late_started: tuple[str, ...] = ()
    departed: tuple[str, ...] = ()  # members that left the fleet after the plan was frozen
    unmatched: int = 0  # fleet clusters matching no stage when the plan was frozen
    conditions: tuple[Condition, ...] = ()
    message: str = ""
    rollback: RollbackStatus | None = None

    @property
    def current_stage(self) -> StageStatus | None:
        return self.stages[self.current] if self.current < len(self.stages) else None

    def with_stage(self, index: int, stage: StageStatus) -> RolloutStatus:
        stages = (*self.stages[:index], stage, *self.stages[index + 1 :])
        return replace(self, stages=stages)

    def condition(self, type_: str) -> Condition | None:
        return next((c for c in self.conditions if c.type == type_), None)


def set_condition(
    conditions: tuple[Condition, ...],
    type_: str,
    status: ConditionStatus,
    reason: Reason,
    message: str,
    now: Instant,
) -> tuple[Condition, ...]:
    """Upsert a condition; the transition time only moves when the status flips."""
    old = next((c for c in conditions if c.type == type_), None)
    since = old.last_transition if old is not None and old.status is status else now
    new = Condition(type_, status, reason, message, since)
    rest = tuple(c for c in conditions if c.type != type_)
    return tuple(sorted((*rest, new), key=lambda c: c.type))
