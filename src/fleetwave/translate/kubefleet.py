"""KubeFleet kinds -> engine model: a (Cluster)StagedUpdateRun with its strategy becomes a RolloutSpec.

Before-stage Approval -> before-gate; after-stage TimedWait then Approval -> one after-gate list, so both
run together (ADR 0025); empty stages skip their tasks (ADR 0033). Approval ids are the names of the
approval-request objects a human approves (ADR 0050).
"""

from __future__ import annotations

from fleetwave.api.models import (
    ClusterResourceSnapshot,
    ClusterStagedUpdateRun,
    ClusterStagedUpdateStrategy,
    ResourceSnapshot,
    StageConfig,
    StagedUpdateRun,
    StagedUpdateStrategy,
    StagedUpdateStrategySpec,
)
from fleetwave.core import batching
from fleetwave.core import model as m
from fleetwave.translate import common
from fleetwave.translate.errors import Problem, TranslateError, fail

Run = ClusterStagedUpdateRun | StagedUpdateRun
Strategy = ClusterStagedUpdateStrategy | StagedUpdateStrategy
Snapshot = ClusterResourceSnapshot | ResourceSnapshot
RESOURCE_HASH_ANNOTATION = "kubernetes-fleet.io/resource-hash"


def approval_request_name(run: str, stage: str, task: str) -> str:
    """Upstream's names: `<run>-before-<stage>` and `<run>-after-<stage>` (ADR 0112)."""
    return f"{run}-before-{stage}" if task == "before" else f"{run}-after-{stage}"


def seed_approval_names(run: str, spec: m.RolloutSpec) -> dict[str, str]:
    """Seed 004's name of each after-stage approval (`<run>-<stage>`, KubeFleet v0.1) -> its
    upstream name: the same approval, served under both names (ADR 0112). A seed name that is
    another approval's upstream name (a stage called `after-x` next to `x`) is left out: one name,
    one approval."""
    ids = {g.id for s in spec.stages for g in (*s.before, *s.after) if isinstance(g, m.Approval)}
    out: dict[str, str] = {}
    for stage in spec.stages:
        upstream, seed = approval_request_name(run, stage.name, "after"), f"{run}-{stage.name}"
        if upstream in ids and seed not in ids:
            out[seed] = upstream
    return out


def stage_selector(stage: StageConfig) -> m.Selector | None:
    """KubeFleet: a nil labelSelector selects no cluster; `{}` selects every cluster."""
    return None if stage.label_selector is None else common.selector(stage.label_selector)


def _after_gates(stage: StageConfig, run: str) -> tuple[m.Gate, ...]:
    tasks = stage.after_stage_tasks or []
    gates: list[m.Gate] = []
    # TimedWait first: with the delay anchored at stage success and approvals requested on entry,
    # (Delay, Approval) opens at max(wait end, approval) — KubeFleet's "together" (ADR 0025).
    for task in tasks:
        wait = common.duration(task.wait_time) if task.type == "TimedWait" else None
        if wait is not None:
            gates.append(m.Delay(wait))
    gates.extend(common.webhook_gates(stage.webhooks))  # fleetwave's (ADR 0080): before the approval
    gates.extend(common.analysis_gates(stage.analyses))  # fleetwave's (ADR 0081): likewise
    if any(t.type == "Approval" for t in tasks):
        # Accepted KubeFleet approvals cannot be revoked, and ids are per run: sticky.
        gates.append(m.Approval(approval_request_name(run, stage.name, "after"), auto_reset=False))
    return tuple(gates)


def _stage(stage: StageConfig, run: str) -> m.StageSpec:
    before: tuple[m.Gate, ...] = ()
    if stage.before_stage_tasks:
        before = (m.Approval(approval_request_name(run, stage.name, "before"), auto_reset=False),)
    return m.StageSpec(
        name=stage.name,
        selector=stage_selector(stage),
        sorting_key=stage.sorting_label_key,
        max_in_flight=m.MaxInFlight.parse(stage.max_concurrency),
        before=before,
        after=_after_gates(stage, run),
        skip_gates_when_empty=True,
    )


def check_pairing(run: Run, strategy: Strategy) -> None:
    """The run must name the strategy, with matching scope (and namespace for the namespaced twins)."""
    problems: list[Problem] = []
    wanted = run.spec.staged_rollout_strategy_name
    if wanted != strategy.metadata.name:
        problems.append(
            Problem(
                "spec.stagedRolloutStrategyName",
                f"names {wanted!r} but the strategy given is {strategy.kind_name}/{strategy.metadata.name}",
            )
        )
    cluster_run = isinstance(run, ClusterStagedUpdateRun)
    if cluster_run != isinstance(strategy, ClusterStagedUpdateStrategy):
        want = "ClusterStagedUpdateStrategy" if cluster_run else "StagedUpdateStrategy"
        problems.append(Problem("spec.stagedRolloutStrategyName", f"a {run.kind_name} needs a {want}"))
    elif not cluster_run and run.metadata.namespace != strategy.metadata.namespace:
        problems.append(Problem("metadata.namespace", "run and strategy must be in the same namespace"))
    if problems:
        raise TranslateError(problems)


def strategy_spec(run: Run, strategy: Strategy) -> StagedUpdateStrategySpec:
    """An initialized run uses its frozen strategy snapshot: later strategy edits never reach it."""
    frozen = run.status.staged_update_strategy_snapshot if run.status is not None else None
    return frozen if frozen is not None else strategy.spec


def from_staged_run(run: Run, strategy: Strategy, *, snapshot_hash: str) -> m.RolloutSpec:
    check_pairing(run, strategy)
    name = run.metadata.name
    frozen = strategy_spec(run, strategy)
    stages = tuple(_stage(s, name) for s in frozen.stages)
    if not stages:
        raise fail("spec.stages", "the strategy has no stages")
    # A run is one revision of its own: the same snapshot rolled by a new run starts from scratch.
    content = common.digest({"run": [run.metadata.namespace, name], "snapshot": snapshot_hash})
    revision = m.Revision(content_hash=content, stages_hash=batching.compute_stages_hash(stages))
    return m.RolloutSpec(
        name=name,
        revision=revision,
        stages=stages,
        failure_budget=common.failure_budget(frozen.failure_budget, frozen.on_failure),
        on_failure=m.OnFailure(frozen.on_failure),
    )


def strategy_selector_paths(run: Run, strategy: Strategy) -> tuple[str, ...]:
    frozen = run.status is not None and run.status.staged_update_strategy_snapshot is not None
    base = "status.stagedUpdateStrategySnapshot" if frozen else "spec"
    n = len(strategy_spec(run, strategy).stages)
    return tuple(f"{base}.stages[{i}].labelSelector" for i in range(n))


def snapshot_hash(run: Run, snapshot: Snapshot | None) -> str:
    """The snapshot's resource-hash annotation, else a hash of its content, else of the run's index."""
    if snapshot is not None:
        annotations = snapshot.metadata.annotations or {}
        if RESOURCE_HASH_ANNOTATION in annotations:
            return annotations[RESOURCE_HASH_ANNOTATION]
        return common.digest(snapshot.spec.model_dump(mode="json", by_alias=True, exclude_none=True))
    return common.digest({"placement": run.spec.placement_name, "index": run.spec.resource_snapshot_index})
