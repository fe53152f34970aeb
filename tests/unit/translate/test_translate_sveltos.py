"""ClusterPromotion / ClusterProfile -> RolloutSpec: gates in Sveltos order, selectors, hashes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as hs

from fleetwave.api.codec import load_manifests, parse_object
from fleetwave.api.models import ClusterProfile, ClusterPromotion
from fleetwave.core import batching, engine, selectors
from fleetwave.core import model as m
from fleetwave.core import status as st
from fleetwave.translate import (
    KEY_LABEL,
    NAME_LABEL,
    from_profile,
    from_promotion,
    pre_approved,
)

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def promotion(stages: list[dict[str, Any]], **profile: Any) -> ClusterPromotion:
    doc = {
        "apiVersion": "config.projectsveltos.io/v1beta1",
        "kind": "ClusterPromotion",
        "metadata": {"name": "rollout"},
        "spec": {"profileSpec": {"helmCharts": [CHART], **profile}, "stages": stages},
    }
    obj = parse_object(doc)
    assert isinstance(obj, ClusterPromotion)
    return obj


CHART = {
    "repositoryURL": "https://kyverno.github.io/kyverno/",
    "repositoryName": "kyverno",
    "chartName": "kyverno/kyverno",
    "chartVersion": "3.5.2",
    "releaseName": "kyverno-latest",
    "releaseNamespace": "kyverno",
}
AUTO_FULL = {
    "auto": {
        "delay": "5m",
        "preHealthCheckDeployment": {"configMapRefs": [{"name": "validation-job", "namespace": "ns"}]},
        "postDelayHealthChecks": [
            {"name": "job-done", "kind": "Job", "group": "batch", "version": "v1", "script": "return {}"}
        ],
        "promotionWindow": {"from": "0 10 * * *", "to": "0 11 * * *"},
    }
}


def stage(name: str, env: str | None, trigger: dict[str, Any] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name}
    if env is not None:
        out["clusterSelector"] = {"matchLabels": {"env": env}}
    if trigger is not None:
        out["trigger"] = trigger
    return out


def test_example_promotion_translates_to_three_stages_with_sveltos_gates() -> None:
    (obj,) = load_manifests((EXAMPLES / "promotion-kyverno.yaml").read_text())
    assert isinstance(obj, ClusterPromotion)
    spec = from_promotion(obj)
    assert [s.name for s in spec.stages] == ["dev", "staging", "production"]
    assert spec.stages[0].selector == m.Selector(match_labels=(("env", "dev"),))
    assert spec.stages[0].after == (m.Delay(timedelta(minutes=2)),)
    assert spec.stages[1].after == (m.Delay(timedelta(minutes=2)), m.Approval("staging", auto_reset=True))
    assert spec.stages[2].after == ()
    assert all(not s.skip_gates_when_empty and s.before == () for s in spec.stages)


def test_auto_trigger_order_is_delay_prehealth_checks_window() -> None:
    spec = from_promotion(promotion([stage("qa", "qa", AUTO_FULL), stage("prod", "prod", AUTO_FULL)]))
    expected = (
        m.Delay(timedelta(minutes=5)),
        m.PreHealthDeployment("preverification-rollout-qa"),
        m.HealthChecks(("job-done",)),
        m.Window("0 10 * * *", "0 11 * * *"),
    )
    assert spec.stages[0].after == expected
    # The last stage's trigger is honoured (Sveltos evaluates it before declaring completion).
    assert [type(g) for g in spec.stages[1].after] == [type(g) for g in expected]


def test_manual_trigger_checks_then_sticky_or_resetting_approval() -> None:
    manual = {
        "manual": {
            "delay": "1m",
            "automaticReset": False,
            "preHealthCheckDeployment": {"configMapRefs": [{"name": "smoke-job", "namespace": "ns"}]},
            "postDelayHealthChecks": [
                {"name": "ok", "kind": "Deployment", "group": "apps", "version": "v1", "script": "return {}"}
            ],
        }
    }
    spec = from_promotion(promotion([stage("qa", "qa", manual), stage("prod", "prod", {"manual": {}})]))
    assert spec.stages[0].after == (
        m.Delay(timedelta(minutes=1)),
        m.PreHealthDeployment("preverification-rollout-qa"),
        m.HealthChecks(("ok",)),
        m.Approval("qa", auto_reset=False),
    )
    assert spec.stages[1].after == (m.Approval("prod", auto_reset=True),)


def test_approved_true_in_the_manifest_is_a_granted_approval() -> None:
    obj = promotion(
        [stage("qa", "qa", {"manual": {"approved": True}}), stage("prod", "prod", {"manual": {}})]
    )
    assert pre_approved(obj) == ("qa",)


def test_empty_or_absent_selector_matches_nothing_and_maxupdate_paces_every_stage() -> None:
    obj = promotion(
        [{"name": "a", "clusterSelector": {}}, stage("b", None), stage("c", "prod")], maxUpdate="50%"
    )
    spec = from_promotion(obj)
    assert [s.selector for s in spec.stages[:2]] == [None, None]
    assert {s.max_in_flight for s in spec.stages} == {m.MaxInFlight(50, percent=True, round_up=True)}


def test_trigger_edit_keeps_both_hashes() -> None:
    before = from_promotion(promotion([stage("qa", "qa", {"auto": {"delay": "1m"}}), stage("prod", "prod")]))
    after = from_promotion(
        promotion([stage("qa", "qa", {"manual": {"approved": True}}), stage("prod", "prod", AUTO_FULL)])
    )
    assert after.revision == before.revision


def test_selector_edit_changes_stages_hash_only() -> None:
    before = from_promotion(promotion([stage("qa", "qa"), stage("prod", "prod")]))
    after = from_promotion(promotion([stage("qa", "qa"), stage("prod", "production")]))
    assert after.revision.stages_hash != before.revision.stages_hash
    assert after.revision.content_hash == before.revision.content_hash


def test_profile_spec_edit_changes_content_hash_only() -> None:
    stages = [stage("qa", "qa"), stage("prod", "prod")]
    before = from_promotion(promotion(stages))
    obj = promotion(stages)
    edited = obj.model_copy(
        update={
            "spec": obj.spec.model_copy(
                update={
                    "profile_spec": obj.spec.profile_spec.model_copy(
                        update={
                            "helm_charts": [
                                obj.spec.profile_spec.helm_charts[0].model_copy(  # type: ignore[index]
                                    update={"chart_version": "3.6.2"}
                                )
                            ]
                        }
                    )
                }
            )
        }
    )
    after = from_promotion(edited)
    assert after.revision.content_hash != before.revision.content_hash
    assert after.revision.stages_hash == before.revision.stages_hash


def test_pace_and_list_order_are_not_content_but_the_override_hash_wins() -> None:
    other = {**CHART, "releaseName": "other"}
    base = from_promotion(promotion([stage("qa", "qa")], helmCharts=[CHART, other]))
    reordered = from_promotion(promotion([stage("qa", "qa")], helmCharts=[other, CHART], maxUpdate=1))
    assert reordered.revision.content_hash == base.revision.content_hash
    pinned = from_promotion(promotion([stage("qa", "qa")]), content_hash="with-configmaps")
    repinned = from_promotion(promotion([stage("qa", "qa")], maxUpdate=1), content_hash="with-configmaps")
    other_content = from_promotion(promotion([stage("qa", "qa")]), content_hash="edited-configmap")
    assert pinned.revision.content_hash == repinned.revision.content_hash  # the resolved hash wins
    assert other_content.revision.content_hash != pinned.revision.content_hash


HEALTH = {"name": "ready", "featureID": "Helm", "group": "apps", "version": "v1", "kind": "Deployment"}


@pytest.mark.parametrize(
    "judged",
    [
        {"validateHealths": [{**HEALTH, "script": "function evaluate() return {status='Healthy'} end"}]},
        {"syncMode": "OneTime"},
    ],
)
def test_editing_how_stages_are_judged_is_a_new_revision_like_a_content_edit(judged: dict[str, Any]) -> None:
    before = from_promotion(promotion([stage("qa", "qa")]), content_hash="same-content")
    after = from_promotion(promotion([stage("qa", "qa")], **judged), content_hash="same-content")
    assert after.revision.content_hash != before.revision.content_hash
    assert after.revision.stages_hash == before.revision.stages_hash


def profile(spec: dict[str, Any]) -> ClusterProfile:
    obj = parse_object(
        {
            "apiVersion": "fleetwave.io/v1alpha1",
            "kind": "ClusterProfile",
            "metadata": {"name": "kyverno"},
            "spec": {"helmCharts": [CHART], **spec},
        }
    )
    assert isinstance(obj, ClusterProfile)
    return obj


def test_profile_is_one_stage_paced_by_max_update() -> None:
    spec = from_profile(profile({"clusterSelector": {"matchLabels": {"env": "prod"}}, "maxUpdate": "10%"}))
    (only,) = spec.stages
    assert only.name == "kyverno"
    assert only.selector == m.Selector(match_labels=(("env", "prod"),))
    assert only.max_in_flight == m.MaxInFlight(10, percent=True, round_up=True)
    assert only.after == ()
    assert only.before == ()


def test_profile_cluster_refs_select_by_namespace_and_name() -> None:
    refs = [{"name": "b", "namespace": "dev", "kind": "SveltosCluster"}, {"name": "a"}]
    spec = from_profile(profile({"clusterRefs": refs}))
    req = m.Requirement(KEY_LABEL, m.Operator.IN, ("default/a", "dev/b"))
    assert spec.stages[0].selector == m.Selector(match_expressions=(req,))
    # A uid (kubectl may fill it in) selects as upstream does: by namespace and name, the same cluster.
    with_uid = [{**refs[0], "uid": "3f6c1a0e-uid-of-an-older-b"}, refs[1]]
    assert from_profile(profile({"clusterRefs": with_uid})).stages[0].selector == spec.stages[0].selector


@given(
    refs=hs.lists(
        hs.tuples(hs.sampled_from(["dev", "prod", "team-a"]), hs.sampled_from(["c1", "c2", "c3"])), min_size=1
    ),
    clusters=hs.lists(
        hs.tuples(hs.sampled_from(["dev", "prod", "team-a"]), hs.sampled_from(["c1", "c2", "c3"])),
        min_size=1,
        unique=True,
    ),
)
def test_a_cluster_ref_never_matches_a_cluster_of_another_namespace(
    refs: list[tuple[str, str]], clusters: list[tuple[str, str]]
) -> None:
    spec = from_profile(profile({"clusterRefs": [{"namespace": ns, "name": n} for ns, n in refs]}))
    selector = spec.stages[0].selector
    assert selector is not None
    for ns, name in clusters:
        key = f"{ns}/{name}"
        labels = {NAME_LABEL: name, KEY_LABEL: key}  # what the controller's members carry
        assert selectors.matches(selector, labels) == ((ns, name) in refs), key


def _labels(key: str, **labels: str) -> dict[str, str]:
    """A member's labels as the controller's fleet carries them."""
    return {**labels, NAME_LABEL: key.partition("/")[2], KEY_LABEL: key}


def test_profile_selects_clusters_of_its_selector_refs_and_sets_together() -> None:
    """As upstream: clusterSelector, clusterRefs and the ClusterSets' choice are a union."""
    obj = profile(
        {
            "clusterSelector": {"matchLabels": {"env": "x"}},
            "clusterRefs": [{"namespace": "dev", "name": "a"}],
            "setRefs": ["prod"],
        }
    )
    selector = from_profile(obj, set_clusters=["prod/b"]).stages[0].selector
    assert isinstance(selector, m.AnyOf)
    assert selectors.matches(selector, _labels("any/c", env="x"))  # by label
    assert selectors.matches(selector, _labels("dev/a"))  # by reference
    assert selectors.matches(selector, _labels("prod/b"))  # chosen by the set
    assert not selectors.matches(selector, _labels("prod/c", env="y"))


def test_a_profile_naming_only_sets_selects_what_they_chose_and_nothing_before() -> None:
    obj = profile({"setRefs": ["prod"]})
    assert from_profile(obj).stages[0].selector is None  # no choice yet: no cluster
    chosen = from_profile(obj, set_clusters=["prod/b"])
    assert chosen.stages[0].selector == m.Selector(
        match_expressions=(m.Requirement(KEY_LABEL, m.Operator.IN, ("prod/b",)),)
    )


def test_a_sets_new_choice_restarts_the_profile_but_selector_profiles_keep_their_hash() -> None:
    """A set failing over changes the profile's stages hash (a new plan over the new cluster, as a
    clusterRefs edit does); content is unchanged. A profile without sets hashes as before AnyOf."""
    obj = profile({"clusterSelector": {"matchLabels": {"env": "x"}}, "setRefs": ["prod"]})
    before, after = from_profile(obj, set_clusters=["prod/a"]), from_profile(obj, set_clusters=["prod/b"])
    assert before.revision.content_hash == after.revision.content_hash
    assert before.revision.stages_hash != after.revision.stages_hash
    plain = from_profile(profile({"clusterSelector": {"matchLabels": {"env": "x"}}}))
    alone = m.StageSpec("kyverno", m.Selector(match_labels=(("env", "x"),)))
    assert plain.revision.stages_hash == batching.compute_stages_hash((alone,))


def test_a_promotions_progress_deadline_fails_a_cluster_that_stays_unavailable_within_its_budget() -> None:
    """spec.progressDeadline (fleetwave's) reaches the engine: with a failureBudget, a cluster whose
    delivery applied but that is still not available once it has passed is set aside as failed."""
    raw = promotion([stage("dev", "dev")]).model_dump(by_alias=True, exclude_none=True, mode="json")
    raw["spec"] |= {"progressDeadline": "10m", "failureBudget": {"maxFailedPerStage": 1}}
    parsed = parse_object(raw)
    assert isinstance(parsed, ClusterPromotion)
    spec = from_promotion(parsed)
    assert spec.progress_deadline == timedelta(minutes=10)
    fleet = m.Fleet.of(m.Cluster(f"dev-{i}", {"env": "dev"}) for i in range(2))
    t0 = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
    slow = m.Delivery(m.DeliveryPhase.APPLIED, ready=False, message="0/1 available")
    ready = m.Delivery(m.DeliveryPhase.APPLIED, ready=True)
    status = engine.step(spec, fleet, m.Observed(), t0).status
    for minute in (1, 11):
        observed = m.Observed(delivery={"dev-0": slow, "dev-1": ready}, previous=status)
        status = engine.step(spec, fleet, observed, t0 + timedelta(minutes=minute)).status
    assert status.phase is st.RolloutPhase.SUCCEEDED
    assert status.stages[0].set_aside == (("dev-0", "not available for more than 0:10:00: 0/1 available"),)
