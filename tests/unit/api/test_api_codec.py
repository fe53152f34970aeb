"""Codec behaviour: upstream/native equivalence, round trips, and every rejection rule naming its field."""

from __future__ import annotations

import copy
import datetime as dt
from typing import Any

import pytest
import yaml

from fleetwave.api.codec import ManifestError, load_manifests, parse_object, to_manifest
from fleetwave.api.meta import parse_duration, resolve_int_or_percent
from fleetwave.api.models import ClusterPromotion, MemberCluster, StagedUpdateRun

PROMO = yaml.safe_load(
    """
apiVersion: config.projectsveltos.io/v1beta1
kind: ClusterPromotion
metadata: {name: kyverno}
spec:
  profileSpec:
    maxUpdate: 10%
    helmCharts:
    - {repositoryURL: https://kyverno.github.io/kyverno/, repositoryName: kyverno, chartName: kyverno/kyverno,
       chartVersion: 3.5.2, releaseName: kyverno-latest, releaseNamespace: kyverno}
  stages:
  - name: staging
    clusterSelector: {matchLabels: {env: staging}}
    trigger: {auto: {delay: 5m, promotionWindow: {from: "0 10 * * *", to: "0 11 * * *"}}}
  - name: production
    clusterSelector: {matchLabels: {env: production}}
    trigger: {manual: {approved: false}}
"""
)
STRATEGY = yaml.safe_load(
    """
apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ClusterStagedUpdateStrategy
metadata: {name: s}
spec:
  stages:
  - name: canary
    maxConcurrency: 50%
    beforeStageTasks: [{type: Approval}]
    afterStageTasks: [{type: TimedWait, waitTime: 1h30m}, {type: Approval}]
"""
)


def _reject(doc: dict[str, Any], expected: str) -> str:
    with pytest.raises(ManifestError) as err:
        parse_object(doc)
    assert expected in str(err.value), str(err.value)
    return str(err.value)


def test_upstream_and_native_forms_are_equal() -> None:
    native = copy.deepcopy(PROMO)
    native["apiVersion"] = "fleetwave.io/v1alpha1"
    assert parse_object(PROMO) == parse_object(native)


def test_round_trip_and_defaults() -> None:
    obj = parse_object(PROMO)
    assert isinstance(obj, ClusterPromotion)
    assert obj.spec.profile_spec.sync_mode == "Continuous"
    manual = obj.spec.stages[1].trigger.manual if obj.spec.stages[1].trigger else None
    assert manual is not None
    assert manual.automatic_reset is True
    assert manual.approved is False
    out = to_manifest(obj)
    assert out["apiVersion"] == "fleetwave.io/v1alpha1"
    assert "syncMode" not in out["spec"]["profileSpec"]  # unset: left to the CRD default
    assert out["spec"]["stages"][0]["trigger"]["auto"]["promotionWindow"] == {
        "from": "0 10 * * *",
        "to": "0 11 * * *",
    }
    assert parse_object(out) == obj


def test_load_manifests_skips_empty_documents() -> None:
    text = "---\n" + yaml.safe_dump(PROMO) + "---\n\n---\n" + yaml.safe_dump(STRATEGY)
    assert [o.kind_name for o in load_manifests(text)] == ["ClusterPromotion", "ClusterStagedUpdateStrategy"]


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (
            lambda d: d["spec"]["stages"][1].update(trigger={}),
            "spec.stages[1].trigger: set exactly one of auto or manual",
        ),
        (
            lambda d: d["spec"]["stages"][0]["trigger"].update(manual={}),
            "spec.stages[0].trigger: set exactly one of auto or manual",
        ),
        (
            lambda d: d["spec"]["stages"][1].update(name="staging"),
            "spec.stages[1].name: duplicate stage name 'staging'",
        ),
        (
            lambda d: d["spec"]["stages"][0].update(name="Staging_1"),
            "spec.stages[0].name: 'Staging_1' is not a DNS-1123",
        ),
        (
            lambda d: d["spec"]["profileSpec"].update(maxUpdate="101%"),
            "spec.profileSpec.maxUpdate: maxUpdate '101%'",
        ),
        (
            lambda d: d["spec"]["profileSpec"].update(maxUpdate=-1),
            "spec.profileSpec.maxUpdate: maxUpdate must be >= 0",
        ),
        (lambda d: d["spec"]["profileSpec"].update(maxUpdate="ten"), "spec.profileSpec.maxUpdate"),
        (
            lambda d: d["spec"]["stages"][0]["trigger"]["auto"].update(delay="5 minutes"),
            "spec.stages[0].trigger.auto.delay: '5 minutes' is not a duration",
        ),
        (
            lambda d: d["spec"]["stages"][0]["trigger"]["auto"]["promotionWindow"].update(to="61 * * * *"),
            "spec.stages[0].trigger.auto.promotionWindow.to: '61 * * * *' is not a 5-field cron",
        ),
        (
            lambda d: d["spec"]["stages"][0]["trigger"]["auto"]["promotionWindow"].update(
                {"from": "0 0 10 * * *"}
            ),
            "spec.stages[0].trigger.auto.promotionWindow.from",
        ),
        (
            lambda d: d["spec"]["stages"][0]["trigger"]["auto"].update(dealy="5m"),
            "trigger.auto.dealy: unknown field",
        ),
        (lambda d: d["spec"].update(stages=[]), "spec.stages"),
        (
            lambda d: d["spec"]["profileSpec"]["helmCharts"][0].pop("releaseName"),
            "helmCharts[0].releaseName: required",
        ),
    ],
)
def test_promotion_rejections_name_the_field(mutate: Any, expected: str) -> None:
    doc = copy.deepcopy(PROMO)
    mutate(doc)
    msg = _reject(doc, expected)
    assert msg.startswith("ClusterPromotion/kyverno: ")


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda s: s.update(maxConcurrency="50"), "spec.stages[0].maxConcurrency"),
        (lambda s: s.update(maxConcurrency=0), "spec.stages[0].maxConcurrency: maxConcurrency must be >= 1"),
        (
            lambda s: s.update(beforeStageTasks=[{"type": "TimedWait", "waitTime": "1m"}]),
            "beforeStageTasks[0].type",
        ),
        (
            lambda s: s.update(afterStageTasks=[{"type": "Approval"}, {"type": "Approval"}]),
            "afterStageTasks[1].type",
        ),
        (
            lambda s: s.update(afterStageTasks=[{"type": "TimedWait"}]),
            "afterStageTasks[0].waitTime: TimedWait requires",
        ),
        (
            lambda s: s.update(afterStageTasks=[{"type": "TimedWait", "waitTime": "1d"}]),
            "afterStageTasks[0].waitTime",
        ),
        (
            lambda s: s.update(afterStageTasks=[{"type": "TimedWait", "waitTime": "0s"}]),
            "must be greater than 0",
        ),
        (
            lambda s: s.update(afterStageTasks=[{"type": "Approval", "waitTime": "1m"}]),
            "Approval must not set",
        ),
    ],
)
def test_strategy_rejections_name_the_field(mutate: Any, expected: str) -> None:
    doc = copy.deepcopy(STRATEGY)
    mutate(doc["spec"]["stages"][0])
    _reject(doc, expected)


def test_strategy_duplicate_stage_names() -> None:
    doc = copy.deepcopy(STRATEGY)
    doc["spec"]["stages"].append({"name": "canary"})
    _reject(doc, "ClusterStagedUpdateStrategy/s: spec.stages[1].name: duplicate stage name 'canary'")


def test_unknown_kind_and_api_version() -> None:
    _reject(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}},
        "ConfigMap/x: apiVersion: unsupported",
    )
    _reject(
        {"apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterSet", "metadata": {"name": "x"}},
        "ClusterSet/x: kind: unknown kind 'ClusterSet'",
    )
    _reject({"kind": "ClusterProfile", "metadata": {"name": "x"}}, "ClusterProfile/x: apiVersion: missing")


def test_placement_policy_rules() -> None:
    doc = {
        "apiVersion": "placement.kubernetes-fleet.io/v1",
        "kind": "ClusterResourcePlacement",
        "metadata": {"name": "p"},
        "spec": {
            "resourceSelectors": [{"group": "", "version": "v1", "kind": "Namespace", "name": "a"}],
            "policy": {"placementType": "PickN"},
        },
    }
    _reject(doc, "spec.policy.numberOfClusters: PickN requires numberOfClusters")
    doc["spec"]["policy"] = {"placementType": "PickAll"}
    doc["spec"]["resourceSelectors"][0]["labelSelector"] = {"matchLabels": {"a": "b"}}
    _reject(doc, "spec.resourceSelectors[0]: set name or labelSelector, not both")


def test_property_selectors_and_sorters_are_checked_at_admission() -> None:
    def placement(term: dict[str, Any]) -> dict[str, Any]:
        preferred = [{"weight": 10, "preference": term}]
        return {
            "apiVersion": "placement.kubernetes-fleet.io/v1beta1",
            "kind": "ClusterResourcePlacement",
            "metadata": {"name": "p"},
            "spec": {
                "resourceSelectors": [{"group": "", "version": "v1", "kind": "Namespace", "name": "a"}],
                "policy": {
                    "placementType": "PickN",
                    "numberOfClusters": 1,
                    "affinity": {
                        "clusterAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": preferred}
                    },
                },
            },
        }

    def expression(**fields: Any) -> dict[str, Any]:
        good = {"name": "kubernetes-fleet.io/node-count", "operator": "Ge", "values": ["5"]}
        return {"propertySelector": {"matchExpressions": [{**good, **fields}]}}

    where = (
        "spec.policy.affinity.clusterAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].preference"
    )
    parse_object(placement({**expression(), "propertySorter": {"name": "cost", "sortOrder": "Ascending"}}))
    parse_object(placement(expression(values=["4Gi"])))  # a Kubernetes quantity, as upstream accepts
    _reject(placement(expression(operator="In")), f"{where}.propertySelector.matchExpressions[0].operator")
    _reject(placement(expression(values=["1", "2"])), "matchExpressions[0].values")
    _reject(placement(expression(values=[])), "matchExpressions[0].values")
    _reject(placement(expression(values=["five"])), "is not a Kubernetes quantity")
    _reject(placement(expression(name="-node count")), "is not a property name")
    _reject(placement({"propertySelector": {}}), "propertySelector.matchExpressions")
    _reject(
        placement({"propertySorter": {"name": "cost", "sortOrder": "Up"}}),
        f"{where}.propertySorter.sortOrder",
    )
    _reject(placement({"propertySorter": {"name": "cost"}}), "propertySorter.sortOrder")
    _reject(
        placement({"propertySorter": {"name": "cost", "sortOrder": "Ascending", "x": 1}}), "propertySorter.x"
    )


def test_run_defaults_to_run_state_and_validates_index() -> None:
    doc = {
        "apiVersion": "placement.kubernetes-fleet.io/v1beta1",
        "kind": "StagedUpdateRun",
        "metadata": {"name": "r", "namespace": "ns"},
        "spec": {"placementName": "p", "stagedRolloutStrategyName": "s"},
    }
    run = parse_object(doc)
    assert isinstance(run, StagedUpdateRun)
    assert run.spec.state == "Run"
    doc["spec"]["resourceSnapshotIndex"] = "007"
    _reject(doc, "spec.resourceSnapshotIndex")


def test_sveltos_cluster_maps_to_member_cluster() -> None:
    doc = {
        "apiVersion": "lib.projectsveltos.io/v1beta1",
        "kind": "SveltosCluster",
        "metadata": {"name": "dev", "namespace": "dev", "labels": {"env": "dev"}},
        "spec": {"kubeconfigKeyName": "value"},
    }
    mc = parse_object(doc)
    assert isinstance(mc, MemberCluster)
    ref = mc.spec.kubeconfig_secret_ref
    assert ref is not None
    assert (ref.name, ref.key) == ("dev-sveltos-kubeconfig", "value")
    assert mc.metadata.labels == {"env": "dev"}
    assert parse_object(to_manifest(mc)) == mc


def test_kubefleet_member_cluster() -> None:
    doc = {
        "apiVersion": "cluster.kubernetes-fleet.io/v1beta1",
        "kind": "MemberCluster",
        "metadata": {"name": "member1", "labels": {"environment": "canary", "order": "2"}},
        "spec": {
            "identity": {"kind": "ServiceAccount", "name": "fleet-member-agent", "namespace": "fleet-system"},
            "heartbeatPeriodSeconds": 60,
        },
    }
    mc = parse_object(doc)
    assert isinstance(mc, MemberCluster)
    assert mc.spec.heartbeat_period_seconds == 60
    assert to_manifest(mc)["spec"]["identity"]["name"] == "fleet-member-agent"


def test_health_check_docs_conflicts_are_errors() -> None:
    doc = copy.deepcopy(PROMO)
    doc["spec"]["stages"][0]["trigger"]["auto"]["postDelayHealthChecks"] = [
        {"name": "c", "evaluateCEL": [{"name": "x", "rule": "true", "expression": "false"}]}
    ]
    _reject(
        doc, "spec.stages[0].trigger.auto.postDelayHealthChecks[0].evaluateCEL[0].expression: set rule or"
    )


def test_parse_duration_and_percent() -> None:
    assert parse_duration("1h30m") == dt.timedelta(minutes=90)
    assert parse_duration("1.5h") == dt.timedelta(minutes=90)
    assert parse_duration("250ms") == dt.timedelta(milliseconds=250)
    assert parse_duration("0") == dt.timedelta(0)
    for bad in ("", "5", "1d", "m5", "5m ", "-5m"):
        with pytest.raises(ValueError, match="not a duration"):
            parse_duration(bad)
    assert resolve_int_or_percent("10%", 25, round_up=True, default=0) == 3
    assert resolve_int_or_percent("10%", 25, round_up=False, default=0) == 2
    assert resolve_int_or_percent(None, 25, round_up=True, default=25) == 25
    assert resolve_int_or_percent("7", 25, round_up=True, default=0) == 7


def test_unquoted_yaml_timestamps_become_rfc3339_text() -> None:
    text = """
apiVersion: fleetwave.io/v1alpha1
kind: ClusterPromotion
metadata: {name: p, creationTimestamp: 2025-11-09T16:56:55Z}
spec: {stages: [{name: a}]}
status:
  lastPromotionTime: 2025-11-09T17:02:25Z
"""
    (obj,) = load_manifests(text)
    assert isinstance(obj, ClusterPromotion)
    assert obj.status is not None
    assert obj.status.last_promotion_time == "2025-11-09T17:02:25Z"
    assert obj.metadata.creation_timestamp == "2025-11-09T16:56:55Z"
