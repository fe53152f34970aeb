"""Normalized, API-agnostic input model of the decision engine: spec, fleet and observed facts.

Both API families (Sveltos ClusterPromotion/ClusterProfile, KubeFleet staged update runs) are
translated into these types by a thin translation layer; the engine never sees the CRDs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum

from fleetwave.core import status as st


class Operator(StrEnum):
    IN = "In"
    NOT_IN = "NotIn"
    EXISTS = "Exists"
    DOES_NOT_EXIST = "DoesNotExist"


@dataclass(frozen=True, slots=True)
class Requirement:
    key: str
    operator: Operator
    values: tuple[str, ...] = ()
    # The values as a set, for membership: a profile's clusterRefs become one `In` of up to
    # thousands of member keys, and a pass tests every cluster of the fleet against it.
    value_set: frozenset[str] = field(init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "value_set", frozenset(self.values))


@dataclass(frozen=True, slots=True)
class Selector:
    """A Kubernetes label selector. An empty Selector matches every cluster.

    "Matches nothing" is expressed as `StageSpec.selector = None` (KubeFleet nil, Sveltos empty).
    """

    match_labels: tuple[tuple[str, str], ...] = ()
    match_expressions: tuple[Requirement, ...] = ()


@dataclass(frozen=True, slots=True)
class AnyOf:
    """The clusters at least one of `selectors` matches: a union. Sveltos selects the clusters of a
    profile's clusterSelector, its clusterRefs and its cluster sets together, and label selectors
    alone can only narrow."""

    selectors: tuple[Selector, ...]


# What a stage's clusters are chosen by; `None` (on the stage) matches nothing.
Selection = Selector | AnyOf


@dataclass(frozen=True, slots=True)
class MaxInFlight:
    """maxUpdate / maxConcurrency: a count or a percentage of the stage; 0 means unlimited.

    A percentage rounds the way its system does (ADR 0020): Sveltos' maxUpdate up (`round_up`),
    KubeFleet's maxConcurrency down; either way at least one cluster."""

    value: int = 0
    percent: bool = False
    round_up: bool = False

    @classmethod
    def parse(cls, raw: int | str | None, *, round_up: bool = False) -> MaxInFlight:
        if raw is None:
            return cls()
        if isinstance(raw, int):
            return cls(max(raw, 0))
        text = raw.strip()
        if text.endswith("%"):
            return cls(max(int(text[:-1]), 0), percent=True, round_up=round_up)
        return cls(max(int(text), 0))


@dataclass(frozen=True, slots=True)
class FailureLimit:
    """How many clusters may fail: a count, or a percentage of the clusters it is counted over
    (rounded down: "10%" of 5 clusters tolerates none)."""

    value: int = 0
    percent: bool = False

    @classmethod
    def parse(cls, raw: int | str) -> FailureLimit:
        if isinstance(raw, int):
            return cls(max(raw, 0))
        text = raw.strip()
        if text.endswith("%"):
            return cls(max(int(text[:-1]), 0), percent=True)
        return cls(max(int(text), 0))

    def allowed(self, clusters: int) -> int:
        return self.value * clusters // 100 if self.percent else self.value


@dataclass(frozen=True, slots=True)
class FailureBudget:
    """Clusters a rollout may lose and carry on (issue 13). A cluster whose delivery keeps failing
    for `grace` is failed: within both limits it is set aside and the stage goes on without it; past
    either, the rollout stops. A limit left out does not apply; with both left out, none may fail."""

    per_stage: FailureLimit | None = None
    total: FailureLimit | None = None
    grace: timedelta = timedelta(minutes=2)


class OnFailure(StrEnum):
    """What a rollout does once it fails (issue 13, ADR 0078): stop where it is, or revert every
    cluster it touched to the last revision that succeeded."""

    HALT = "Halt"
    ROLLBACK = "Rollback"


# --- the gate algebra -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Delay:
    """Soak time, measured from the moment the gate list was entered (stage success for after-gates).

    KubeFleet's TimedWait is the same gate.
    """

    duration: timedelta


@dataclass(frozen=True, slots=True)
class Window:
    """Promotion window: open from each `from_cron` fire until the next `to_cron` fire."""

    from_cron: str
    to_cron: str
    tz: str = "UTC"


@dataclass(frozen=True, slots=True)
class Approval:
    """A human approval, identified by `id`; `auto_reset` consumes it when the stage promotes."""

    id: str
    auto_reset: bool = True


@dataclass(frozen=True, slots=True)
class HealthChecks:
    """Named checks whose verdicts (evaluated by the shell) must all currently pass."""

    names: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class PreHealthDeployment:
    """Deploy a validation payload (e.g. a Job) to the stage's clusters before the health checks."""

    name: str


@dataclass(frozen=True, slots=True)
class Webhook:
    """An HTTP(S) call the shell makes (ADR 0080): the gate opens while its verdict, keyed by
    (stage, name) in `Observed.webhooks`, says 2xx and the success condition held (per cluster: on
    every cluster of the stage)."""

    name: str
    per_cluster: bool = False


@dataclass(frozen=True, slots=True)
class Analysis:
    """A metric the shell measures every `interval` after the stage is delivered (ADR 0081): the
    gate passes once `count` measurements were taken with at most `failure_limit` failed, and fails
    for good past the limit. The measurements, keyed by (stage, name), are in `Observed.analyses`."""

    name: str
    count: int = 3
    failure_limit: int = 0
    interval: timedelta = timedelta(seconds=30)
    per_cluster: bool = False


Gate = Delay | Window | Approval | HealthChecks | PreHealthDeployment | Webhook | Analysis


@dataclass(frozen=True, slots=True)
class Measurements:
    """One series of an analysis (of one cluster, or stage-wide): how many measurements were taken,
    how many failed, the last failure's reason, and when the next one is due (None: none due)."""

    taken: int = 0
    failed: int = 0
    last_failure: str = ""
    next_at: datetime | None = None

    def failed_for_good(self, gate: Analysis) -> bool:
        return self.failed > gate.failure_limit

    def passed(self, gate: Analysis) -> bool:
        return self.taken >= gate.count and self.failed <= gate.failure_limit

    def summary(self, gate: Analysis) -> str:
        return f"{self.failed} of {self.taken} measurements failed (limit {gate.failure_limit})" + (
            f": {self.last_failure}" if self.last_failure else ""
        )


@dataclass(frozen=True, slots=True)
class StageSpec:
    name: str
    selector: Selection | None
    sorting_key: str | None = None
    max_in_flight: MaxInFlight = MaxInFlight()
    before: tuple[Gate, ...] = ()
    after: tuple[Gate, ...] = ()
    # KubeFleet skips the tasks of a stage that has no clusters; Sveltos still evaluates them.
    skip_gates_when_empty: bool = False


@dataclass(frozen=True, slots=True)
class Revision:
    """Hashes computed by the translation layer; a change of either restarts the rollout."""

    content_hash: str
    stages_hash: str


@dataclass(frozen=True, slots=True)
class RolloutSpec:
    name: str
    revision: Revision
    stages: tuple[StageSpec, ...]
    progress_deadline: timedelta | None = None
    poll_interval: timedelta = timedelta(seconds=30)
    withdraw_dropped: bool = True
    # None: today's rule, a failed cluster holds its stage (and the progress deadline, when set,
    # fails the rollout).
    failure_budget: FailureBudget | None = None
    # Paused: clusters in flight finish, nothing new starts (no cluster, no stage); gate timers keep
    # their start. Not part of the revision: pausing and resuming never restart a rollout.
    paused: bool = False
    on_failure: OnFailure = OnFailure.HALT


# --- the fleet ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Cluster:
    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    ready: bool = True
    # Why it is not ready, as its MemberCluster says ("" when ready or not said): a stage waiting for
    # it says so (for a pull member: its agent's last sign of life, ADR 0106).
    why: str = field(default="", compare=False)


@dataclass(frozen=True, slots=True)
class Fleet:
    """The fleet inventory, indexed by name; listing order never matters."""

    by_name: Mapping[str, Cluster]
    names: frozenset[str]

    @classmethod
    def of(cls, clusters: Iterable[Cluster]) -> Fleet:
        by_name = {c.name: c for c in sorted(clusters, key=lambda c: c.name)}
        return cls(by_name=by_name, names=frozenset(by_name))


# --- observed facts -----------------------------------------------------------------------


class DeliveryPhase(StrEnum):
    PENDING = "Pending"
    APPLYING = "Applying"
    APPLIED = "Applied"
    FAILED = "Failed"


@dataclass(frozen=True, slots=True)
class Delivery:
    """Delivery of the current revision to one cluster, as observed by the shell."""

    phase: DeliveryPhase
    ready: bool = False
    message: str = ""
    # The revision (content hash) the shell read this delivery as being of, when what it reads
    # records one: the engine then counts a cluster it admits in this very step as done already.
    revision: str | None = None

    @property
    def done(self) -> bool:
        return self.phase is DeliveryPhase.APPLIED and self.ready

    def done_at(self, revision: str) -> bool:
        """Done, and shown by the shell to be of `revision`."""
        return self.done and self.revision == revision


PENDING = Delivery(DeliveryPhase.PENDING)


@dataclass(frozen=True, slots=True)
class HealthVerdict:
    """Verdict of one named check over one stage; `cluster` names the first failing cluster and
    `failing` every failing one (cluster, message), which a failure budget counts."""

    ok: bool
    cluster: str = ""
    message: str = ""
    failing: tuple[tuple[str, str], ...] = ()

    def failures(self) -> tuple[tuple[str, str], ...]:
        if self.ok:
            return ()
        return self.failing or ((self.cluster, self.message),)


@dataclass(frozen=True, slots=True)
class RollbackTarget:
    """The revision a rollback returns to, as the shell knows it: its content hash and how people
    name it ("revision 3")."""

    content_hash: str
    label: str


@dataclass(frozen=True, slots=True)
class Observed:
    """Everything the shell observed; a missing delivery entry means Pending."""

    delivery: Mapping[str, Delivery] = field(default_factory=dict)
    # (stage name, check name) -> verdict
    health: Mapping[tuple[str, str], HealthVerdict] = field(default_factory=dict)
    # approval id -> time it was granted (timezone-aware UTC)
    approvals: Mapping[str, st.Instant] = field(default_factory=dict)
    previous: st.RolloutStatus | None = None
    # The last revision that succeeded, when there is one; a rollback returns to it.
    rollback_target: RollbackTarget | None = None
    # Non-empty: a person asked to roll this revision back now (the reason, e.g. "aborted").
    rollback_request: str = ""
    # (stage name, webhook name) -> verdict of its last call (per cluster: `failing` names them)
    webhooks: Mapping[tuple[str, str], HealthVerdict] = field(default_factory=dict)
    # (stage name, analysis name) -> its series by cluster ("" for a stage-wide analysis)
    analyses: Mapping[tuple[str, str], Mapping[str, Measurements]] = field(default_factory=dict)
