"""No field of any API model is ignored in silence (issue 10).

Every spec-side field of every kind fleetwave serves (both API families use these models) is listed
here as one of:

- honoured: acted on; the entry names a test (`path::function`) that sets the field. Not taken on
  the test's name: its source is read (api_citations.py says exactly what is read: the function,
  the module-level helpers, constants and fixtures it names, what it imports from other test
  modules, YAML data files it names) and must set the field in a mapping of the field's model, under
  a field leading to that model. A field that changes what reaches a member (REACHES_A_MEMBER: which
  objects, in which form, how they are applied or removed — the content and delivery fields of
  profiles, resource selection, overrides, apply and delete strategies, the revision a run
  delivers, a stage's preHealthCheckDeployment) needs an integration test (tests/integration: a
  real API server and real members). Choosing clusters, pacing, gates, windows and checks are pure
  decisions: a unit test of the decision may prove them. A field a test sets through the fleetwave
  command that writes it (`fleetwave pause promotion`) names that command (VIA);
- pending: acted on, or about to be, but no test sets it as the rules above require yet; each
  entry says what is missing. Never counted as honoured, and the set may only shrink
  (PENDING_ALLOWED);
- refused: fleetwave does not act on it yet and says so by name. These are not taken on trust: each
  entry carries a value, and the test runs the refusal the controllers run (profile content, a Helm
  chart, a placement, a member, a health check) and expects the field named in the message;
- within: a field of a type only reachable through a refused field (refusing the parent refuses it);
- written: a field of an object fleetwave itself writes (summaries, snapshots, approval requests);
  a hand-made one is ignored with an event that says so (named test);
- agent-only: KubeFleet's member-agent settings, which fleetwave's agent does not need (ADR 0062,
  ADR 0106, named test).

The last line of the module prints the figures for the issue's note.
"""

from __future__ import annotations

import typing
from collections import Counter
from functools import cache
from typing import Any

import api_citations
import pytest
from pydantic import BaseModel

from fleetwave.api.codec import parse_object
from fleetwave.api.kubefleet import PlacementSpec
from fleetwave.api.meta import API_VERSION
from fleetwave.api.models import ALL_KINDS
from fleetwave.api.sveltos import ClusterProfile, ClusterProfileSpec, Profile, ValidateHealth
from fleetwave.controllers.fleet import members
from fleetwave.controllers.kubefleet import unhonoured
from fleetwave.controllers.sveltos import content, profile_scope
from fleetwave.health import checks
from fleetwave.translate import TranslateError
from fleetwave.translate import sveltos as translate_sveltos

# Test references (file::function) used below.
TS = "tests/unit/translate/test_translate_sveltos.py::"
REFS = "tests/unit/translate/test_translate_cluster_refs.py::"
CAPI = "tests/unit/controllers/test_controllers_capi_clusters.py::"
TK = "tests/unit/translate/test_translate_kubefleet.py::"
PF = "tests/integration/test_promotion_flows.py::"
PH = "tests/integration/test_promotion_health.py::"
BUDGET = PF + "test_a_failure_budget_sets_a_failed_cluster_aside_then_stops_the_promotion_past_it"
ROLLBACK = PF + "test_a_promotion_failing_its_prod_health_check_rolls_every_updated_cluster_back"
HS = "tests/unit/health/test_health_selection.py::"
KS = "tests/integration/test_kubefleet_staged_runs.py::"
KP = "tests/unit/kubefleet/test_kubefleet_picking.py::"
PICKN_RUN = KS + "test_pickn_ranks_by_preferred_affinity_and_property_sorters_on_probed_properties"
AFFINITY = KP + "test_label_and_property_selectors_of_a_term_are_anded_and_terms_are_ored"
PREFERRED = KP + "test_pickn_takes_the_top_n_by_the_weights_of_matching_preferred_terms_then_by_name"
PROPERTY_SELECTOR = (
    KP + "test_a_property_selector_compares_numbers_and_a_cluster_without_the_value_never_matches"
)
PROPERTY_SORTER = (
    KP + "test_a_property_sorter_scales_its_weight_between_the_lowest_and_highest_eligible_values"
)
SPREAD = KP + "test_do_not_schedule_never_lets_the_skew_pass_max_skew_even_if_fewer_clusters_are_picked"
MC = "tests/unit/controllers/test_controllers_member_credentials.py::"
SO = "tests/unit/controllers/test_controllers_summary_ownership.py::"
DH = "tests/integration/test_delivery_helm.py::"
RC_ACCESS = (
    "tests/unit/controllers/test_controllers_registry_credentials.py::"
    "test_the_configs_key_and_flags_become_the_access_helm_is_given"
)
PRIVATE_CHARTS = (
    "tests/integration/test_private_charts.py::"
    "test_private_oci_and_http_charts_install_with_allowed_credentials_and_never_show_them"
)
UP = "tests/integration/test_upstream_apis_kubefleet_seed.py::"
EVICT = (
    "tests/integration/test_kubefleet_eviction_flows.py::"
    "test_a_budget_refuses_one_eviction_and_allows_the_next_which_moves_the_content"
)
EV = "tests/unit/kubefleet/test_kubefleet_evictions.py::"
RR = "tests/unit/controllers/test_controllers_role_requests.py::"
TENANT = (
    "tests/integration/test_upstream_apis_kubectl.py::"
    "test_a_tenant_admin_deploys_only_what_its_role_request_grants_and_nothing_half"
)
FAILOVER = (
    "tests/integration/test_cluster_sets.py::"
    "test_a_cluster_set_fails_over_to_the_other_member_and_the_profile_follows"
)
PC = "tests/integration/test_profile_delivery_rules.py::"
MT = "tests/integration/test_metric_checks.py::"
METRIC_LUA = MT + "test_a_lua_check_passes_on_a_good_pushed_value_and_fails_on_a_bad_one"
METRIC_AUTH = MT + "test_a_bearer_token_from_a_member_secret_reaches_the_metric_source_path"
WH = "tests/integration/test_webhook_gates.py::"
HOOKED = WH + "test_a_promotion_stage_waits_on_its_webhook_then_moves_on_with_the_secrets_header"
HOOK_CONDITION = WH + "test_a_false_success_condition_holds_the_stage_with_its_message"
WG = "tests/unit/controllers/test_controllers_webhook_gates.py::"
STAGED_HOOK = KS + "test_a_staged_runs_stage_webhook_per_cluster_gates_the_next_stage"
AN = "tests/integration/test_analysis_gates.py::"
ANALYSED = AN + "test_an_analysis_passes_after_count_good_measurements_and_the_next_stage_starts"
AN_FAILED = AN + "test_a_bad_value_fails_the_analysis_and_the_promotion_rolls_back_to_the_revision_before"
AN_UNREACHABLE = AN + "test_an_unreachable_prometheus_holds_the_stage_with_a_clear_message"
AG = "tests/unit/controllers/test_controllers_analysis_gates.py::"
AN_STAGED = KS + "test_a_staged_runs_stage_analysis_per_cluster_gates_the_next_stage"

APPLY_RULES = KS + "test_apply_strategies_report_diffs_take_over_only_as_told_and_leave_drifted_objects_alone"
DELETE = KS + "test_deleting_a_placement_withdraws_its_content_unless_it_abandons_it"
CHECKS = PC + "test_pre_deploy_checks_hold_delivery_and_delete_checks_hold_the_withdrawal"
PG = "tests/integration/test_promotion_gates.py::"
CORE_APP = PG + "test_core_app_rollout_waits_for_its_validation_job_judged_by_cel"
SEED_RUN = KS + "test_seed_004_cluster_scoped_rollout_then_rollback"
AUTO = PF + "test_an_automatic_rollout_goes_through_three_stages_in_order"
MANUAL = PF + "test_an_upgrade_advances_stage_by_stage_and_a_manual_gate_holds_until_approved_then_resets"
HELM = DH + "test_install_upgrade_noop_bad_values_and_uninstall"
LUA = "tests/unit/health/test_health_lua.py::test_api_form_healthy_when_all_replicas_are_available"
SELECT = HS + "test_a_check_without_script_or_rules_passes_on_existence"
WRITTEN = SO + "test_a_summary_fleetwave_did_not_make_is_ignored_with_an_event"
PULL = "tests/integration/test_pull_mode.py::"
PULL_PROMOTION = (
    PULL + "test_a_promotion_goes_over_two_push_members_and_one_pull_member_with_an_upgrade_and_a_manual_gate"
)
AGENT_REFUSES = PULL + "test_the_agent_refuses_work_for_another_cluster_and_work_edited_behind_the_hub"
OVERRIDDEN = (
    "tests/integration/test_kubefleet_overrides.py::"
    "test_overrides_label_prod_clusters_and_replace_a_configmap_value_then_a_bad_one_fails_its_cluster"
)
OSNAP = (
    "tests/unit/kubefleet/test_kubefleet_override_wiring.py::"
    "test_an_override_is_snapshotted_once_per_spec_and_its_snapshots_go_with_it"
)
KF_FIELDS = (
    "tests/integration/test_kubefleet_overrides.py::"
    "test_selection_by_scope_and_label_a_delete_override_and_forced_server_side_apply_shape_members"
)
SNAPSHOTS = (
    "tests/unit/kubefleet/test_kubefleet_snapshots.py::test_history_is_trimmed_oldest_first_to_the_limit"
)
TEMPLATES_IT = (
    "tests/integration/test_profile_templates.py::"
    "test_templates_kustomize_and_patches_reach_each_cluster_as_that_cluster_needs_them"
)
CF = "tests/integration/test_profile_content_fields.py::"
CONTENT_FIELDS = (
    CF + "test_optional_sources_kustomize_patches_extra_metadata_and_exclusions_shape_what_a_member_gets"
)
CHART_FIELDS = CF + "test_a_charts_values_from_and_options_reach_helm_and_uninstall_removes_the_release"
TIERS = PC + "test_a_lower_tier_takes_an_object_over_and_the_other_profile_gives_up_after_its_failures"
PICKFIXED = KS + "test_a_pickfixed_rolling_update_placement_delivers_only_to_the_clusters_it_names"
ANY_KIND = (
    "tests/integration/test_kubefleet_any_kind.py::"
    "test_a_placement_carries_a_crd_its_custom_resources_and_an_ingress_then_withdraws_them"
)
CHART = {
    "repositoryURL": "https://charts.example.com",
    "repositoryName": "r",
    "chartName": "r/c",
    "chartVersion": "1.0.0",
    "releaseName": "c",
    "releaseNamespace": "c",
}
CHECK = {"name": "c", "featureID": "Resources", "group": "", "version": "v1", "kind": "ConfigMap"}
SELECTED = [{"group": "", "version": "v1", "kind": "Namespace", "name": "app"}]

# --- the registry -----------------------------------------------------------------------------------

Entry = tuple[str, Any]


def h(test: str) -> Entry:
    return ("honoured", test)


def profile(value: dict[str, Any]) -> Entry:
    return ("refused", ("profile", value))


def chart(value: dict[str, Any]) -> Entry:
    return ("refused", ("profile", {"helmCharts": [{**CHART, **value}]}))


def ref(value: dict[str, Any]) -> Entry:
    return (
        "refused",
        ("profile", {"policyRefs": [{"kind": "ConfigMap", "name": "g", "namespace": "fw", **value}]}),
    )


def placement(value: dict[str, Any]) -> Entry:
    return ("refused", ("placement", value))


def member(value: dict[str, Any]) -> Entry:
    return ("refused", ("member", value))


def check(value: dict[str, Any]) -> Entry:
    return ("refused", ("check", value))


def template_ref(value: dict[str, Any]) -> Entry:
    resource = {"kind": "ConfigMap", "name": "x", "namespace": "fw"}
    return (
        "refused",
        ("profile", {"templateResourceRefs": [{"resource": resource, "identifier": "x", **value}]}),
    )


def kustomization(value: dict[str, Any]) -> Entry:
    return ("refused", ("profile", {"kustomizationRefs": [{"kind": "ConfigMap", "name": "k", **value}]}))


def within(parent: str) -> Entry:
    return ("within", parent)


def pending(reason: str) -> Entry:
    return ("pending", reason)


# Pending: fields fleetwave acts on (so not refused) for which no test yet sets the field the way
# the rules below require; each entry says what is missing. Not counted as honoured. The set may
# only shrink (test_pending_fields_only_shrink): a field leaves it when a test that sets it is cited.
PENDING_ALLOWED: set[str] = set()

# Fields a cited test sets through the fleetwave command or function that writes them (the test's
# source must name it): `fleetwave pause promotion` writes spec.paused, a pull registration pullMode.
VIA = {
    "ClusterPromotionSpec.paused": ("pause", "promotion"),
    "MemberClusterSpec.pullMode": ("register_pull",),
}

# Fields that change what reaches a member: which objects, in which form, and how they are applied
# to or removed from it. Their test must be an integration test (a real API server and real members):
# a unit test of the transformation does not show the member receives it. Everything else decides
# which clusters, when (pacing, gates, windows, checks) or how a status reads: pure decisions,
# which a unit test of the decision proves.
CONTENT = {
    "syncMode",
    "stopMatchingBehavior",
    "templateResourceRefs",
    "policyRefs",
    "helmCharts",
    "kustomizationRefs",
    "patches",
    "patchesFrom",
    "driftExclusions",
    "continueOnError",
    "continueOnConflict",
    "tier",
    "extraLabels",
    "extraAnnotations",
}
ALL = None
REACHES_A_MEMBER: dict[str, set[str] | None] = {
    "ProfileSpec": CONTENT,
    "ClusterProfileSpec": CONTENT,
    "ClusterPromotionSpec": {"profileSpec"},
    # The content a stage deploys to its clusters before their post-delay checks.
    "AutoTrigger": {"preHealthCheckDeployment"},
    "ManualTrigger": {"preHealthCheckDeployment"},
    "TemplateResourceRef": ALL,
    "PolicyRef": ALL,
    "HelmChart": ALL,
    "ValueFrom": ALL,
    "KustomizationRef": ALL,
    "Patch": ALL,
    "PatchSelector": ALL,
    "DriftExclusion": ALL,
    "PlacementSpec": {"resourceSelectors", "policy", "strategy"},
    "ResourceSelector": ALL,
    "RolloutStrategy": {"applyStrategy", "deleteStrategy"},
    "ApplyStrategy": ALL,
    "ServerSideApplyConfig": ALL,
    "DeleteStrategy": ALL,
    "UpdateRunSpec": {"resourceSnapshotIndex"},
    "ClusterResourceOverrideSpec": ALL,
    "ResourceOverrideSpec": ALL,
    "PlacementRef": ALL,
    "OverridePolicy": ALL,
    "OverrideRule": ALL,
    "OverrideSelector": ALL,
    "JSONPatchOverride": ALL,
}


def _reaches_a_member(model: str, field: str) -> bool:
    if model not in REACHES_A_MEMBER:
        return False
    fields = REACHES_A_MEMBER[model]
    return fields is None or field in fields


PROFILE_SPEC: dict[str, Entry] = {
    "syncMode": h(TIERS),
    "tier": h(
        PC + "test_a_lower_tier_takes_an_object_over_and_the_other_profile_gives_up_after_its_failures"
    ),
    "continueOnConflict": h(
        PC + "test_a_lower_tier_takes_an_object_over_and_the_other_profile_gives_up_after_its_failures"
    ),
    "continueOnError": h(CF + "test_continue_on_error_applies_what_follows_a_failed_object"),
    "maxUpdate": h(PH + "test_max_update_admits_one_cluster_at_a_time_and_waits_for_validate_healths"),
    "stopMatchingBehavior": h(CONTENT_FIELDS),
    "reloader": profile({"reloader": True}),
    "templateResourceRefs": h(TEMPLATES_IT),
    "dependsOn": h(
        "tests/integration/test_profile_dependencies.py::"
        "test_a_profile_waits_for_the_profiles_it_depends_on_cluster_by_cluster"
    ),
    "policyRefs": h(TEMPLATES_IT),
    "helmCharts": h(AUTO),
    "kustomizationRefs": h(TEMPLATES_IT),
    "preDeployChecks": h(CHECKS),
    "validateHealths": h(PH + "test_max_update_admits_one_cluster_at_a_time_and_waits_for_validate_healths"),
    "preDeleteChecks": h(CHECKS),
    "postDeleteChecks": h(CHECKS),
    "patches": h(TEMPLATES_IT),
    "patchesFrom": h(CONTENT_FIELDS),
    "driftExclusions": h(CONTENT_FIELDS),
    "maxConsecutiveFailures": h(
        PC + "test_a_lower_tier_takes_an_object_over_and_the_other_profile_gives_up_after_its_failures"
    ),
}

REGISTRY: dict[str, dict[str, Entry]] = {
    "ProfileSpec": PROFILE_SPEC,
    "ClusterProfileSpec": {
        **PROFILE_SPEC,
        "clusterSelector": h(TS + "test_profile_is_one_stage_paced_by_max_update"),
        "clusterRefs": h(TS + "test_profile_cluster_refs_select_by_namespace_and_name"),
        "setRefs": h(FAILOVER),
        "extraLabels": h(CONTENT_FIELDS),
        "extraAnnotations": h(CONTENT_FIELDS),
    },
    "TemplateResourceRef": {
        "resource": h(TEMPLATES_IT),
        "identifier": h(TEMPLATES_IT),
        "optional": h(CONTENT_FIELDS),
        "ignoreStatusChanges": template_ref({"ignoreStatusChanges": True}),
        "watchFields": template_ref({"watchFields": ["data"]}),
    },
    "ObjectReference": {
        "apiVersion": h(
            REFS + "test_kind_cluster_names_a_cluster_api_cluster_any_other_kind_a_registered_one"
        ),
        "kind": h(REFS + "test_kind_cluster_names_a_cluster_api_cluster_any_other_kind_a_registered_one"),
        "name": h(TS + "test_profile_cluster_refs_select_by_namespace_and_name"),
        "namespace": h(TS + "test_profile_cluster_refs_select_by_namespace_and_name"),
        # Sveltos matches a clusterRef by namespace and name; a uid changes nothing, as upstream.
        "uid": h(TS + "test_profile_cluster_refs_select_by_namespace_and_name"),
    },
    "PolicyRef": {
        "kind": h(TEMPLATES_IT),
        "namespace": h(TEMPLATES_IT),
        "name": h(TEMPLATES_IT),
        "path": ref({"path": "dir"}),
        "remoteURL": (
            "refused",
            ("profile", {"policyRefs": [{"remoteURL": {"url": "https://example.com/x.yaml"}}]}),
        ),
        "deploymentType": h(
            PC + "test_local_content_goes_to_the_management_cluster_once_and_leaves_with_its_owner"
        ),
        "optional": h(CONTENT_FIELDS),
        "tier": h(TIERS),
        "skipNamespaceCreation": ref({"skipNamespaceCreation": False}),
        "force": ref({"force": False}),
    },
    "RemoteURL": {
        f: within("PolicyRef.remoteURL")
        for f in ("url", "interval", "secretRef", "template", "insecureSkipTLSVerify", "plainHTTP")
    },
    # Reached from MetricSource.secretRef (honoured) and from RemoteURL (refused with PolicyRef.remoteURL).
    "SecretRef": {f: h(METRIC_AUTH) for f in ("name", "namespace")},
    "HelmChart": {
        **{
            f: h(HELM)
            for f in (
                "repositoryURL",
                "repositoryName",
                "chartName",
                "chartVersion",
                "releaseName",
                "releaseNamespace",
                "values",
            )
        },
        **{f: h(CHART_FIELDS) for f in ("helmChartAction", "valuesFrom", "options")},
        "registryCredentialsConfig": h(PRIVATE_CHARTS),
        "signatureVerification": chart({"signatureVerification": {"provider": "cosign"}}),
        "provenanceVerification": chart({"provenanceVerification": {"keyring": "k"}}),
    },
    "RegistryCredentialsConfig": {
        "credentials": h(PRIVATE_CHARTS),
        "ca": h(PRIVATE_CHARTS),
        **{f: h(RC_ACCESS) for f in ("key", "insecureSkipTLSVerify", "plainHTTP")},
    },
    "ValueFrom": {f: h(CHART_FIELDS) for f in ("kind", "namespace", "name", "optional")},
    "KustomizationRef": {
        **{f: h(TEMPLATES_IT) for f in ("kind", "namespace", "name", "path", "targetNamespace", "values")},
        **{f: h(CONTENT_FIELDS) for f in ("components", "valuesFrom", "optional")},
        "tier": h(CF + "test_a_kustomization_refs_tier_decides_who_holds_an_object_two_profiles_deliver"),
        "remoteURL": kustomization({"remoteURL": {"url": "https://example.com/k.tgz"}}),
        "deploymentType": kustomization({"deploymentType": "Local"}),
        "skipNamespaceCreation": kustomization({"skipNamespaceCreation": False}),
        "force": kustomization({"force": False}),
    },
    "ValidateHealth": {
        **{f: h(SELECT) for f in ("name", "group", "version", "kind", "namespace")},
        "featureID": h(
            "tests/integration/test_profile_feature_health.py::"
            "test_a_helm_check_fails_the_helm_feature_only_and_a_check_of_an_absent_feature_never_runs"
        ),
        "resourceName": h(HS + "test_resource_name_filter"),
        "labelFilters": h(HS + "test_label_filters_are_anded"),
        "metricSource": h(METRIC_LUA),
        "metricQueries": h(METRIC_LUA),
        "script": h(LUA),
        "evaluateCEL": h(CORE_APP),
        "jobCheck": check({"jobCheck": {"jobRef": {"kind": "ConfigMap", "name": "j"}}}),
    },
    "LabelFilter": {f: h(HS + "test_label_filters_are_anded") for f in ("key", "operation", "value")},
    "MetricSource": {"url": h(METRIC_LUA), "path": h(METRIC_AUTH), "secretRef": h(METRIC_AUTH)},
    "MetricQuery": {f: h(METRIC_LUA) for f in ("name", "query")},
    "CELRule": {
        f: h(MT + "test_cel_rules_read_the_metrics_map_and_bad_answers_fail_naming_the_query")
        for f in ("name", "rule")
    },
    "JobCheck": {f: within("ValidateHealth.jobCheck") for f in ("jobRef", "timeout")},
    "Patch": {f: h(TEMPLATES_IT) for f in ("patch", "target")},
    # Reached from patches (kustomize honours every selector) and from driftExclusions (literal targets only).
    "PatchSelector": {
        **{f: h(TEMPLATES_IT) for f in ("kind", "name")},
        **{f: h(CONTENT_FIELDS) for f in ("group", "version", "namespace")},
        "labelSelector": profile(
            {"driftExclusions": [{"paths": ["/x"], "target": {"labelSelector": "a=b"}}]}
        ),
        "annotationSelector": profile(
            {"driftExclusions": [{"paths": ["/x"], "target": {"annotationSelector": "a=b"}}]}
        ),
    },
    "DriftExclusion": {f: h(CONTENT_FIELDS) for f in ("paths", "target")},
    "LabelSelector": {
        "matchLabels": h(TS + "test_profile_is_one_stage_paced_by_max_update"),
        "matchExpressions": h(TEMPLATES_IT),
    },
    "LabelSelectorRequirement": {
        **{f: h(TEMPLATES_IT) for f in ("key", "operator")},
        "values": h(
            "tests/integration/test_profile_dependencies.py::"
            "test_a_profile_waits_for_the_profiles_it_depends_on_cluster_by_cluster"
        ),
    },
    "ClusterPromotionSpec": {
        "profileSpec": h(AUTO),
        "stages": h(AUTO),
        "preserveClusterProfilesOnDelete": h(
            PF + "test_preserve_cluster_profiles_on_delete_leaves_stage_profiles_and_their_delivery_in_place"
        ),
        "paused": h(PF + "test_a_paused_promotion_starts_nothing_new_and_resumes_where_it_stopped"),
        "failureBudget": h(BUDGET),
        "onFailure": h(ROLLBACK),
        "progressDeadline": h(
            "tests/unit/translate/test_translate_sveltos.py::"
            "test_a_promotions_progress_deadline_fails_a_cluster_that_stays_unavailable_within_its_budget"
        ),
    },
    "FailureBudget": {f: h(BUDGET) for f in ("maxFailedPerStage", "maxFailed", "gracePeriod")},
    "Stage": {
        **{f: h(AUTO) for f in ("name", "clusterSelector", "trigger")},
        "webhooks": h(HOOKED),
        "analyses": h(ANALYSED),
    },
    "AnalysisGate": {
        "name": h(ANALYSED),
        "prometheus": h(ANALYSED),
        "query": h(AN_FAILED),
        "successCondition": h(AN_FAILED),
        "interval": h(AG + "test_one_measurement_per_interval_until_count_then_none"),
        "count": h(ANALYSED),
        "failureLimit": h(AN_UNREACHABLE),
        "perCluster": h(AN_STAGED),
    },
    "AnalysisPrometheus": {
        "url": h(AN_UNREACHABLE),
        "path": h(AG + "test_prometheus_path_is_where_the_query_is_sent"),
    },
    "WebhookGate": {
        "name": h(HOOKED),
        "url": h(HOOKED),
        "method": h(STAGED_HOOK),
        "perCluster": h(STAGED_HOOK),
        "timeout": h(WG + "test_the_webhooks_timeout_bounds_each_attempt"),
        "retries": h(STAGED_HOOK),
        "interval": h(WG + "test_a_verdict_stands_for_the_interval_then_the_webhook_is_called_again"),
        "successCondition": h(HOOK_CONDITION),
        "headersFrom": h(HOOKED),
    },
    "HeadersFrom": {"secretRef": h(HOOKED)},
    "WebhookSecretRef": {
        "name": h(HOOKED),
        "namespace": h(
            WG + "test_a_headers_secret_outside_the_trust_boundary_is_refused_naming_only_the_secret"
        ),
    },
    "Trigger": {"auto": h(AUTO), "manual": h(MANUAL)},
    "AutoTrigger": {
        "delay": h(AUTO),
        "preHealthCheckDeployment": h(CORE_APP),
        "postDelayHealthChecks": h(
            PH + "test_post_delay_health_checks_with_get_resource_gate_the_next_stage"
        ),
        "promotionWindow": h(PG + "test_a_closed_promotion_window_holds_the_next_stage_until_it_opens"),
    },
    "TimeWindow": {
        f: h(PG + "test_a_closed_promotion_window_holds_the_next_stage_until_it_opens")
        for f in ("from", "to")
    },
    "ManualTrigger": {
        "delay": h(TS + "test_manual_trigger_checks_then_sticky_or_resetting_approval"),
        "preHealthCheckDeployment": h(
            PG + "test_a_manual_stages_pre_health_check_deployment_lands_before_its_approval"
        ),
        "postDelayHealthChecks": h(TS + "test_manual_trigger_checks_then_sticky_or_resetting_approval"),
        "approved": h(MANUAL),
        "automaticReset": h(PG + "test_automatic_reset_false_keeps_a_manual_approval_for_the_next_revision"),
    },
    # Written by the controller for a DryRun profile's cluster (ADR 0113); read by people.
    "ClusterReportSpec": dict.fromkeys(
        ("clusterNamespace", "clusterName"),
        (
            "written",
            "tests/integration/test_profile_dry_run_report.py::"
            "test_dry_run_changes_nothing_and_reports_each_object_and_release_until_it_leaves_dry_run",
        ),
    ),
    "ClusterSummarySpec": {
        **dict.fromkeys(("clusterNamespace", "clusterName", "clusterProfileSpec"), ("written", WRITTEN)),
        # Written by the controller too, and read back: the summary delivers to the cluster of its type.
        "clusterType": h(
            CAPI + "test_a_summary_of_a_cluster_api_cluster_is_named_typed_and_labelled_as_sveltos_does"
        ),
    },
    "MemberClusterSpec": {
        "kubeconfigSecretRef": h(MC + "test_the_own_namespace_written_out_is_fine"),
        "paused": h(MC + "test_a_paused_member_stays_in_the_fleet_but_is_not_delivered_to"),
        "activeWindow": h(
            MC + "test_outside_its_active_window_a_member_is_not_ready_and_wakes_when_it_opens"
        ),
        "taints": h(KP + "test_untolerated_taints_keep_pickall_off_a_cluster"),
        "identity": ("agent-only", MC + "test_pull_mode_false_and_kubefleet_agent_fields_are_accepted"),
        "heartbeatPeriodSeconds": (
            "agent-only",
            MC + "test_pull_mode_false_and_kubefleet_agent_fields_are_accepted",
        ),
        "pullMode": h(PULL_PROMOTION),
        "workloadIdentity": member({"workloadIdentity": {"provider": "x"}}),
        "tokenRequestRenewalOption": member(
            {"tokenRequestRenewalOption": {"renewTokenRequestInterval": "1h"}}
        ),
        "readinessChecks": member({"readinessChecks": [{"name": "x"}]}),
        "livenessChecks": member({"livenessChecks": [{"name": "x"}]}),
        "consecutiveFailureThreshold": member({"consecutiveFailureThreshold": 3}),
    },
    # Written by the controller for a pull member's agent; the agent refuses one that is not its
    # member's or was edited behind the hub (ADR 0106).
    "MemberWorkSpec": dict.fromkeys(
        ("cluster", "owner", "revision", "summary", "placement", "withdraw"), ("written", AGENT_REFUSES)
    ),
    # Tenants (ADR 0111).
    "RoleRequestSpec": {
        "clusterSelector": h(TENANT),
        "roleRefs": h(TENANT),
        "serviceAccountName": h(TENANT),
        "serviceAccountNamespace": h(TENANT),
        "expirationSeconds": h(RR + "test_a_role_request_setting_expiration_seconds_is_refused_by_name"),
    },
    "RoleRef": {f: h(TENANT) for f in ("kind", "namespace", "name")},
    "KubeconfigSecretRef": {
        f: h(MC + "test_the_own_namespace_written_out_is_fine") for f in ("name", "namespace", "key")
    },
    "Taint": {
        f: h(KP + "test_equal_needs_key_and_value_exists_needs_the_key_and_an_empty_key_tolerates_all")
        for f in ("key", "value", "effect")
    },
    "PlacementSpec": {
        "resourceSelectors": h(ANY_KIND),
        "policy": h(PICKFIXED),
        "strategy": h(SEED_RUN),
        "revisionHistoryLimit": h(
            "tests/integration/test_kubefleet_overrides.py::"
            "test_revision_history_limit_keeps_only_the_newest_resource_snapshots"
        ),
        "statusReportingScope": placement({"statusReportingScope": "NamespaceAccessible"}),
    },
    "ResourceSelector": {
        **{f: h(ANY_KIND) for f in ("group", "version", "kind", "name")},
        "labelSelector": h(KF_FIELDS),
        "selectionScope": h(KF_FIELDS),
    },
    "PlacementPolicy": {
        "placementType": h(PICKFIXED),
        "clusterNames": h(PICKFIXED),
        "numberOfClusters": h(PICKN_RUN),
        "affinity": h(AFFINITY),
        "topologySpreadConstraints": h(SPREAD),
        "tolerations": h(
            KP + "test_equal_needs_key_and_value_exists_needs_the_key_and_an_empty_key_tolerates_all"
        ),
    },
    "Affinity": {"clusterAffinity": h(AFFINITY)},
    "ClusterAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": h(AFFINITY),
        "preferredDuringSchedulingIgnoredDuringExecution": h(PREFERRED),
    },
    "ClusterSelector": {"clusterSelectorTerms": h(AFFINITY)},
    "ClusterSelectorTerm": {
        "labelSelector": h(AFFINITY),
        "propertySelector": h(PROPERTY_SELECTOR),
        "propertySorter": h(PROPERTY_SORTER),
    },
    "PropertySelector": {"matchExpressions": h(PROPERTY_SELECTOR)},
    "PropertySelectorRequirement": {f: h(PROPERTY_SELECTOR) for f in ("name", "operator", "values")},
    "PropertySorter": {f: h(PROPERTY_SORTER) for f in ("name", "sortOrder")},
    "PreferredClusterSelector": {f: h(PREFERRED) for f in ("weight", "preference")},
    "TopologySpreadConstraint": {
        "maxSkew": h(SPREAD),
        "topologyKey": h(SPREAD),
        "whenUnsatisfiable": h(KP + "test_schedule_anyway_prefers_the_least_skewed_choice_but_still_picks_n"),
    },
    "Toleration": {
        f: h(KP + "test_equal_needs_key_and_value_exists_needs_the_key_and_an_empty_key_tolerates_all")
        for f in ("key", "operator", "value", "effect")
    },
    "RolloutStrategy": {
        "type": h(SEED_RUN),
        "rollingUpdate": h(PICKFIXED),
        "applyStrategy": h(APPLY_RULES),
        "deleteStrategy": h(DELETE),
        "reportBackStrategy": placement({"strategy": {"reportBackStrategy": {"type": "Mirror"}}}),
    },
    "RollingUpdateConfig": {
        "maxUnavailable": h(PICKFIXED),
        "maxSurge": placement({"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 2}}}),
        "unavailablePeriodSeconds": placement(
            {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"unavailablePeriodSeconds": 5}}}
        ),
    },
    "ApplyStrategy": {
        "type": h(APPLY_RULES),
        "comparisonOption": placement(
            {"strategy": {"applyStrategy": {"comparisonOption": "FullComparison"}}}
        ),
        "whenToApply": h(APPLY_RULES),
        "whenToTakeOver": h(APPLY_RULES),
        "allowCoOwnership": placement({"strategy": {"applyStrategy": {"allowCoOwnership": True}}}),
        "serverSideApplyConfig": h(KF_FIELDS),
    },
    "ServerSideApplyConfig": {"force": h(KF_FIELDS)},
    "DeleteStrategy": {"propagationPolicy": h(DELETE)},
    "ReportBackStrategy": {
        "type": placement({"strategy": {"reportBackStrategy": {"type": "Mirror"}}}),
        "destination": within("RolloutStrategy.reportBackStrategy"),
    },
    "ResourceSnapshotSpec": {"selectedResources": ("written", SNAPSHOTS)},
    "StagedUpdateStrategySpec": {
        "stages": h(TK + "test_seed004_cluster_run_translates_tasks_and_ordering"),
        "failureBudget": h(
            KS + "test_a_strategys_failure_budget_lets_a_run_go_on_without_a_cluster_that_keeps_failing"
        ),
        "onFailure": h(
            KS + "test_a_run_over_its_failure_budget_rolls_back_every_cluster_it_updated_last_stage_first"
        ),
    },
    "StageConfig": {
        "name": h(UP + "test_seed_004_namespaced_rollout_with_hyphenated_stages_and_rollback_verbatim"),
        "labelSelector": h(TK + "test_seed004_cluster_run_translates_tasks_and_ordering"),
        "sortingLabelKey": h(TK + "test_seed004_fleet_canary_rolls_member3_then_member1_after_staging"),
        "maxConcurrency": h(KS + "test_stop_mid_stage_lets_clusters_in_flight_finish_and_run_resumes"),
        "beforeStageTasks": h(TK + "test_before_approval_timed_wait_first_and_nil_versus_empty_selector"),
        "afterStageTasks": h(TK + "test_seed004_cluster_run_translates_tasks_and_ordering"),
        "webhooks": h(STAGED_HOOK),
        "analyses": h(AN_STAGED),
    },
    "StageTask": {
        f: h(TK + "test_seed004_cluster_run_translates_tasks_and_ordering") for f in ("type", "waitTime")
    },
    "UpdateRunSpec": {
        "placementName": h(SEED_RUN),
        "resourceSnapshotIndex": h(SEED_RUN),
        "stagedRolloutStrategyName": h(SEED_RUN),
        "state": h(KS + "test_stop_mid_stage_lets_clusters_in_flight_finish_and_run_resumes"),
    },
    "ApprovalRequestSpec": dict.fromkeys(("parentStageRollout", "targetStage"), ("written", SEED_RUN)),
    "ClusterResourceOverrideSpec": {
        "placement": h(OVERRIDDEN),
        "clusterResourceSelectors": h(OVERRIDDEN),
        "policy": h(OVERRIDDEN),
    },
    "ResourceOverrideSpec": {
        "placement": h(OVERRIDDEN),
        "resourceSelectors": h(OVERRIDDEN),
        "policy": h(OVERRIDDEN),
    },
    "PlacementRef": {f: h(OVERRIDDEN) for f in ("name", "scope")},
    "SetSpec": {
        "clusterSelector": h(FAILOVER),
        "maxReplicas": h(FAILOVER),
        "clusterRefs": h(
            "tests/unit/translate/test_translate_sets.py::"
            "test_a_cluster_set_matches_its_selector_and_its_refs_with_their_readiness"
        ),
    },
    "OverrideSelector": {f: h(OVERRIDDEN) for f in ("group", "version", "kind", "name")},
    "OverridePolicy": {"overrideRules": h(OVERRIDDEN)},
    "OverrideRule": {
        "clusterSelector": h(OVERRIDDEN),
        "overrideType": h(KF_FIELDS),
        "jsonPatchOverrides": h(OVERRIDDEN),
    },
    "JSONPatchOverride": {f: h(OVERRIDDEN) for f in ("op", "path", "value")},
    "ClusterResourceOverrideSnapshotSpec": dict.fromkeys(
        ("overrideSpec", "overrideHash"), ("written", OSNAP)
    ),
    "ResourceOverrideSnapshotSpec": dict.fromkeys(("overrideSpec", "overrideHash"), ("written", OSNAP)),
    "PlacementEvictionSpec": {"placementName": h(EVICT), "clusterName": h(EVICT)},
    "PlacementDisruptionBudgetSpec": {
        "minAvailable": h(EVICT),
        "maxUnavailable": h(EV + "test_max_unavailable_counts_the_clusters_already_unavailable"),
    },
}


# --- walking the models -----------------------------------------------------------------------------


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    found, stack = [], [annotation]
    while stack:
        a = stack.pop()
        if isinstance(a, type) and issubclass(a, BaseModel):
            found.append(a)
        else:
            stack.extend(typing.get_args(a))
    return found


def spec_fields() -> dict[str, list[str]]:
    """Model name -> field names (aliases) of every model reachable from a kind's spec."""
    seen: dict[str, list[str]] = {}

    def walk(model: type[BaseModel]) -> None:
        if model.__name__ in seen:
            return
        seen[model.__name__] = [f.alias or n for n, f in model.model_fields.items()]
        for f in model.model_fields.values():
            for sub in _models_in(f.annotation):
                walk(sub)

    for model in _spec_models():
        walk(model)
    return seen


def _test_exists(reference: str) -> bool:
    return api_citations.source_of(reference) is not None


def _spec_models() -> list[type[BaseModel]]:
    return [
        m
        for kind in ALL_KINDS
        if "spec" in kind.model_fields
        for m in _models_in(kind.model_fields["spec"].annotation)
    ]


@cache
def _roots() -> set[str]:
    """Models that are a kind's spec, and the models those extend (ProfileSpec: a promotion's
    profileSpec is the spec of the ClusterProfiles it generates, field for field)."""
    return {base.__name__ for m in _spec_models() for base in m.__mro__ if issubclass(base, BaseModel)}


@cache
def _leads_to() -> dict[str, set[tuple[str, str]]]:
    """Model -> the (alias, attribute) of every field whose type holds it."""
    parents: dict[str, set[tuple[str, str]]] = {}
    seen: set[str] = set()

    def walk(model: type[BaseModel]) -> None:
        if model.__name__ in seen:
            return
        seen.add(model.__name__)
        for n, f in model.model_fields.items():
            for sub in _models_in(f.annotation):
                parents.setdefault(sub.__name__, set()).add((f.alias or n, n))
                walk(sub)

    for model in _spec_models():
        walk(model)
    return parents


# Keys the codec accepts besides the model's own: the Sveltos docs' health-check form
# (`{type, name, evaluateCEL[{name, expression}]}`, api/upstream.py).
DOCS_SPELLINGS = {"ValidateHealth": {"type"}, "CELRule": {"expression"}}


@cache
def _keys_of(model: str) -> frozenset[str]:
    """Every key a mapping of `model` may hold: its aliases and attribute names, those of the spec
    models extending it (a promotion's profileSpec is a ClusterProfile's spec), its docs spellings."""
    extending = [m.__name__ for m in _spec_models() if model in {b.__name__ for b in m.__mro__}]
    keys = set(DOCS_SPELLINGS.get(model, set()))
    for name in {model, *extending}:
        keys |= set(_attributes()[name]) | set(_attributes()[name].values())
    return frozenset(keys)


@cache
def _attributes() -> dict[str, dict[str, str]]:
    """Model -> {alias: Python attribute name}."""
    out: dict[str, dict[str, str]] = {}

    def walk(model: type[BaseModel]) -> None:
        if model.__name__ not in out:
            out[model.__name__] = {f.alias or n: n for n, f in model.model_fields.items()}
            for f in model.model_fields.values():
                for sub in _models_in(f.annotation):
                    walk(sub)

    for model in _spec_models():
        walk(model)
    return out


class _Objects:
    def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        return {"data": {}}


def _refusal(probe: str, value: dict[str, Any]) -> str:
    """The message the controllers' own refusal gives for `value` ("" if it is accepted)."""
    try:
        if probe == "profile":
            spec = {"clusterSelector": {"matchLabels": {"a": "b"}}, **value}
            obj = {
                "apiVersion": API_VERSION,
                "kind": "ClusterProfile",
                "metadata": {"name": "p"},
                "spec": spec,
            }
            parsed = parse_object(obj)
            assert isinstance(parsed, ClusterProfile)
            translate_sveltos.from_profile(parsed)
            content.resolve(parsed.spec, _Objects(), default_namespace="fw", path="spec")
        elif probe == "placement":
            return unhonoured.refusal(PlacementSpec.model_validate({"resourceSelectors": SELECTED, **value}))
        elif probe == "member":
            return members.unhonoured({"metadata": {"name": "m"}, "spec": value})
        elif probe == "check":
            return checks._unsupported(ValidateHealth.model_validate({**CHECK, **value}))
    except (content.ContentError, TranslateError) as e:
        return str(e)
    return ""


def _entries() -> list[tuple[str, str, Entry]]:
    return [
        (m, f, REGISTRY.get(m, {}).get(f, ("ignored", None))) for m, fs in spec_fields().items() for f in fs
    ]


def test_every_field_of_every_model_is_honoured_or_refused() -> None:
    ignored = [f"{m}.{f}" for m, f, (verdict, _) in _entries() if verdict == "ignored"]
    assert ignored == [], f"fields neither honoured nor refused: {ignored}"
    stale = [f"{m}.{f}" for m, fs in REGISTRY.items() for f in fs if f not in spec_fields().get(m, [])]
    assert stale == [], f"registry entries for fields that do not exist: {stale}"


@pytest.mark.parametrize(
    ("model", "field", "entry"), [e for e in _entries() if e[2][0] == "refused"], ids=lambda x: str(x)[:60]
)
def test_a_refused_field_is_refused_by_name(model: str, field: str, entry: Entry) -> None:
    probe, value = entry[1]
    message = _refusal(probe, value)
    assert message, f"{model}.{field}: {value} was accepted"
    assert field in message or field.lower() in message.lower() or "not supported" in message


def test_written_and_agent_only_entries_name_a_test_that_exists() -> None:
    missing = [
        f"{m}.{f}: {e[1]}"
        for m, f, e in _entries()
        if e[0] in ("written", "agent-only") and not _test_exists(e[1])
    ]
    assert missing == []


def _not_set_by_its_test(model: str, field: str, reference: str) -> str:
    """Why `reference` does not prove `model.field` honoured ("" if it does)."""
    source = api_citations.source_of(reference)
    if source is None:
        return "no such test function"
    via = VIA.get(f"{model}.{field}")
    names = _attributes()[model]
    where = source.parents_of(field, names[field], _keys_of(model))
    if via and source.mentions(via):
        where.add(api_citations.UNKNOWN)
    if not where:
        return "never sets the field"
    leads = _leads_to().get(model, set())
    if model not in _roots() and not where & {alias for alias, _ in leads}:
        # Set where the source does not show under which field: it must at least set one leading
        # to the model, or build the model itself.
        led = model in source.names or any(source.sets(alias, attr) for alias, attr in leads)
        if api_citations.UNKNOWN not in where or not led:
            return f"never sets it under a field leading to {model} ({sorted(a for a, _ in leads)})"
    if _reaches_a_member(model, field) and not reference.startswith("tests/integration/"):
        return "changes what reaches a member, so it needs an integration test"
    return ""


def test_an_honoured_fields_test_sets_the_field() -> None:
    wrong = [
        f"{m}.{f}: {why} ({e[1]})"
        for m, f, e in _entries()
        if e[0] == "honoured" and (why := _not_set_by_its_test(m, f, e[1]))
    ]
    assert wrong == [], "\n".join(wrong)


def test_pending_fields_only_shrink() -> None:
    pending = sorted(f"{m}.{f}" for m, f, e in _entries() if e[0] == "pending")
    assert set(pending) <= PENDING_ALLOWED, "a field may not become pending: write its test"


def test_fields_within_a_refused_parent_are_refused_with_it() -> None:
    for m, f, (verdict, parent) in _entries():
        if verdict != "within":
            continue
        pm, _, pf = parent.partition(".")
        assert REGISTRY[pm][pf][0] == "refused", f"{m}.{f}: its parent {parent} is not refused"


def test_the_figures() -> None:
    counts = Counter(e[0] for _, _, e in _entries())
    print(f"\nfields: {sum(counts.values())}; " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    assert counts["ignored"] == 0


def test_a_profile_hands_every_field_to_its_generated_cluster_profile() -> None:
    """A Profile (ADR 0110) is served with ClusterProfileSpec, so the registry's word on each field
    holds for it only because its compilation carries every field into the generated ClusterProfile,
    dropping none; setRefs, the one it rewrites, becomes the clusterRefs of what its Sets chose."""
    assert Profile.model_fields["spec"].annotation is ClusterProfileSpec
    samples: dict[str, Any] = {
        "clusterSelector": {"matchLabels": {"a": "b"}},
        "clusterRefs": [{"name": "c"}],
        "dependsOn": ["other"],
    }
    spec: dict[str, Any] = {}
    for name, info in ClusterProfileSpec.model_fields.items():
        alias = info.alias or name
        if alias == "setRefs":
            continue
        origin = typing.get_origin(info.annotation) or info.annotation
        args = [typing.get_origin(a) or a for a in typing.get_args(info.annotation)]
        if alias in samples:
            spec[alias] = samples[alias]
        elif list in (origin, *args):
            spec[alias] = [{}]
        elif dict in (origin, *args):
            spec[alias] = {"k": "v"}
        else:
            spec[alias] = "x"
    generated = profile_scope.confine("team", spec)
    assert set(generated) == set(spec)
    chosen = profile_scope.confine("team", {"setRefs": ["s"]}, {"team/c1"})
    assert chosen == {"clusterRefs": [{"namespace": "team", "name": "c1"}]}
