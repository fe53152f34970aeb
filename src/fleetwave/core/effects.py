"""Effects the shell carries out, and the Decision the engine returns.

Effects are idempotent "ensure" requests: re-running one after a crash must be harmless.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from fleetwave.core import status as st


@dataclass(frozen=True, slots=True)
class Deliver:
    """Ensure the current revision is delivered to `cluster` (a member of `stage`)."""

    cluster: str
    stage: str


@dataclass(frozen=True, slots=True)
class Withdraw:
    """Remove what this rollout delivered from a cluster that is no longer in the plan."""

    cluster: str


@dataclass(frozen=True, slots=True)
class RequestApproval:
    """Ensure an approval request exists (KubeFleet ApprovalRequest, or a status hint)."""

    stage: str
    approval_id: str


@dataclass(frozen=True, slots=True)
class ResetApproval:
    """Consume an auto-reset approval after it promoted its stage (Sveltos automaticReset)."""

    stage: str
    approval_id: str


@dataclass(frozen=True, slots=True)
class DeployPreHealthCheck:
    stage: str
    cluster: str
    name: str


@dataclass(frozen=True, slots=True)
class RemovePreHealthCheck:
    stage: str
    name: str


# The Event reasons that mean something went wrong (Warning Events; the rest are Normal), the same
# for promotions, profiles and staged update runs (docs/troubleshooting.md lists them).
WARNING_REASONS = frozenset(
    {
        "ClusterFailed",
        "ProgressDeadlineExceeded",
        "ClusterLeft",
        "FailureBudgetExceeded",
        "AnalysisFailed",
        "RollingBack",
        "RolledBack",
        "RollbackImpossible",
    }
)


@dataclass(frozen=True, slots=True)
class Event:
    reason: str
    message: str

    @property
    def warning(self) -> bool:
        return self.reason in WARNING_REASONS


Effect = (
    Deliver | Withdraw | RequestApproval | ResetApproval | DeployPreHealthCheck | RemovePreHealthCheck | Event
)


@dataclass(frozen=True, slots=True)
class Decision:
    """The engine's answer for one step.

    `wake_at` is the earliest instant at which the decision would change through the passage of
    time alone (a delay ending, a window opening, a deadline); `requeue_at` additionally polls for
    facts (delivery, health, approvals) every `poll_interval`. None means nothing left to do.
    """

    status: st.RolloutStatus
    effects: tuple[Effect, ...]
    requeue_at: st.Instant | None
    requeue_after: timedelta | None
    wake_at: st.Instant | None
    waiting_on_facts: bool
