"""Sveltos kinds -> engine model: ClusterPromotion (stages behind triggers) and ClusterProfile (one stage).

Gate order follows the Sveltos controller (spec §2.6): delay, pre-health-check deployment, post-delay
health checks, then the promotion window (auto) or the approval (manual). See ADR 0050.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from fleetwave.api.meta import ObjectReference
from fleetwave.api.models import (
    AutoTrigger,
    ClusterProfile,
    ClusterPromotion,
    ManualTrigger,
    ProfileSpec,
    Stage,
)
from fleetwave.core import batching
from fleetwave.core import model as m
from fleetwave.translate import common
from fleetwave.translate.errors import fail

# Sveltos hashes these lists sorted, so reordering them never restarts a rollout (spec §2.3).
_UNORDERED = (
    "helmCharts",
    "policyRefs",
    "kustomizationRefs",
    "dependsOn",
    "templateResourceRefs",
    "validateHealths",
    "patches",
    "driftExclusions",
)
# Selection and pace are not content: they never restart a rollout (ADR 0023, ADR 0030).
_NOT_CONTENT = ("maxUpdate", "clusterSelector", "clusterRefs", "setRefs")


def profile_content_hash(spec: ProfileSpec) -> str:
    """SHA-256 of the profile spec's canonical JSON, minus selection/pace, order-insensitive lists."""
    body: dict[str, Any] = spec.model_dump(mode="json", by_alias=True, exclude_none=True)
    for key in _NOT_CONTENT:
        body.pop(key, None)
    for key in _UNORDERED:
        if isinstance(body.get(key), list):
            body[key] = sorted(body[key], key=common.canonical_json)
    return common.digest(body)


def stage_selector(stage: Stage) -> m.Selector | None:
    """Sveltos: an empty or absent clusterSelector matches no cluster (libsveltos GetMatchingClusters)."""
    sel = stage.cluster_selector
    return None if sel is None or common.is_empty(sel) else common.selector(sel)


def pre_verification_name(promotion: str, stage: str) -> str:
    """Name Sveltos gives the per-stage profile carrying preHealthCheckDeployment (spec §2.4)."""
    return f"preverification-{promotion}-{stage}"


def _checks_then(trigger: AutoTrigger | ManualTrigger, promotion: str, stage: str) -> list[m.Gate]:
    gates: list[m.Gate] = []
    delay = common.duration(trigger.delay)
    if delay is not None:
        gates.append(m.Delay(delay))
    if trigger.pre_health_check_deployment:
        gates.append(m.PreHealthDeployment(pre_verification_name(promotion, stage)))
    if trigger.post_delay_health_checks:
        gates.append(m.HealthChecks(tuple(c.name for c in trigger.post_delay_health_checks)))
    return gates


def trigger_gates(stage: Stage, promotion: str) -> tuple[m.Gate, ...]:
    """The after-gates of one stage. The last stage's trigger is honoured too, as Sveltos does.
    fleetwave's webhooks come after the health checks, before the window or the approval (ADR 0080)."""
    hooks = common.webhook_gates(stage.webhooks) + common.analysis_gates(stage.analyses)  # ADR 0081
    trigger = stage.trigger
    if trigger is None:
        return hooks
    if trigger.auto is not None:
        gates = [*_checks_then(trigger.auto, promotion, stage.name), *hooks]
        window = trigger.auto.promotion_window
        if window is not None:
            gates.append(m.Window(window.from_, window.to))
        return tuple(gates)
    assert trigger.manual is not None  # the API model enforces exactly one of auto/manual
    gates = [*_checks_then(trigger.manual, promotion, stage.name), *hooks]
    # Same list as the health checks: an approval promotes only while they pass (ADR 0027).
    gates.append(m.Approval(id=stage.name, auto_reset=trigger.manual.automatic_reset))
    return tuple(gates)


def from_promotion(promotion: ClusterPromotion, *, content_hash: str | None = None) -> m.RolloutSpec:
    """One StageSpec per stage; profileSpec.maxUpdate paces every stage."""
    spec = promotion.spec
    name = promotion.metadata.name
    limit = m.MaxInFlight.parse(spec.profile_spec.max_update, round_up=True)
    stages = tuple(
        m.StageSpec(
            name=s.name,
            selector=stage_selector(s),
            max_in_flight=limit,
            after=trigger_gates(s, name),
        )
        for s in spec.stages
    )
    revision = m.Revision(
        content_hash=revision_hash(spec.profile_spec, content_hash),
        stages_hash=batching.compute_stages_hash(stages),
    )
    return m.RolloutSpec(
        name=name,
        revision=revision,
        stages=stages,
        paused=spec.paused,
        failure_budget=common.failure_budget(spec.failure_budget, spec.on_failure),
        on_failure=m.OnFailure(spec.on_failure),
        progress_deadline=common.duration(spec.progress_deadline),
    )


# profileSpec fields that decide how a stage is judged rather than what it delivers: editing one
# starts a new revision like a content edit (ADR 0030), so no stage is passed on the old rules.
_JUDGED = ("validateHealths", "syncMode")
_JUDGED_FIELDS = {"validate_healths", "sync_mode"}  # their model names: only these are dumped


def revision_hash(spec: ProfileSpec, content_hash: str | None) -> str:
    """The revision's content hash: the resolved content's hash (the controller's, which follows
    referenced ConfigMaps and Secrets) plus the judging fields; the spec's own hash without one."""
    if content_hash is None:
        return profile_content_hash(spec)
    body = spec.model_dump(mode="json", by_alias=True, exclude_none=True, include=_JUDGED_FIELDS)
    return common.digest({"content": content_hash, "judged": {k: body.get(k) for k in _JUDGED}})


def promotion_selector_paths(promotion: ClusterPromotion) -> tuple[str, ...]:
    return tuple(f"spec.stages[{i}].clusterSelector" for i in range(len(promotion.spec.stages)))


def pre_approved(promotion: ClusterPromotion) -> tuple[str, ...]:
    """Approval ids already granted in the manifest (`trigger.manual.approved: true`)."""
    return tuple(
        s.name
        for s in promotion.spec.stages
        if s.trigger is not None and s.trigger.manual is not None and s.trigger.manual.approved
    )


def _profile_selector(profile: ClusterProfile, set_clusters: Iterable[str]) -> m.Selection | None:
    """Sveltos: the clusters of clusterSelector, of clusterRefs and of the cluster sets in setRefs,
    together. A ref names its cluster's namespace (Sveltos requires it); one without is read as
    `default`, as a namespaced object without a namespace is. An empty selector matches nothing."""
    spec = profile.spec
    refs = _ref_keys(spec.cluster_refs or [])
    sel = spec.cluster_selector
    by_label = None if sel is None or common.is_empty(sel) else common.selector(sel)
    return common.union(by_label, (*refs, *set_clusters))


def _ref_keys(refs: list[ObjectReference]) -> tuple[str, ...]:
    """The keys of the clusters the refs name, by kind (ADR 0109): a SveltosCluster dev/c1 and a
    Cluster API Cluster dev/c1 are two clusters. A ref names its cluster's namespace (Sveltos requires
    it); one without is read as `default`, as a namespaced object without a namespace is."""
    keys = []
    for i, ref in enumerate(refs):
        if not ref.name:
            continue
        try:
            keys.append(common.ref_key(ref.api_version, ref.kind, ref.namespace, ref.name))
        except common.RefProblem as e:
            raise fail(f"spec.clusterRefs[{i}].{e.field}", e.message) from None
    return tuple(keys)


def from_profile(
    profile: ClusterProfile, *, content_hash: str | None = None, set_clusters: Iterable[str] = ()
) -> m.RolloutSpec:
    """A single-stage rolling update paced by maxUpdate. `set_clusters`: the member keys the
    ClusterSets of `spec.setRefs` have chosen (`sets.clusters_of_sets`); none when not given.

    validateHealths are per-cluster: the shell folds them into each cluster's `Delivery.ready`, so a
    cluster only frees its slot once healthy (ADR 0020) — no stage-level gate is emitted for them.
    A set choosing other clusters changes the selector, so the rollout starts again over the new
    choice, as an edit of clusterRefs does (ADR 0108).
    """
    name = profile.metadata.name
    stage = m.StageSpec(
        name=name,
        selector=_profile_selector(profile, set_clusters),
        max_in_flight=m.MaxInFlight.parse(profile.spec.max_update, round_up=True),
    )
    revision = m.Revision(
        content_hash=revision_hash(profile.spec, content_hash),
        stages_hash=batching.compute_stages_hash((stage,)),
    )
    return m.RolloutSpec(name=name, revision=revision, stages=(stage,))


def profile_selector_paths(profile: ClusterProfile) -> tuple[str, ...]:
    return ("spec.clusterRefs" if profile.spec.cluster_refs else "spec.clusterSelector",)
