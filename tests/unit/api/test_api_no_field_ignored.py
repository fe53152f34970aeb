"""No field of any API model is ignored in silence (issue 10).

Every spec-side field of every kind fleetwave serves (both API families use these models) is listed
here as one of:

- honoured: acted on; the entry names a test that shows it (checked to exist);
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

import ast
import typing
from collections import Counter
from pathlib import Path
from typing import Any

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

ROOT = Path(__file__).resolve().parents[3]

# Test references (file::function) used below.
TS = "tests/unit/translate/test_translate_sveltos.py::"
REFS = "tests/unit/translate/test_translate_cluster_refs.py::"
CAPI = "tests/unit/controllers/test_controllers_capi_clusters.py::"
TK = "tests/unit/translate/test_translate_kubefleet.py::"
CC = "tests/unit/controllers/test_controllers_content.py::"
TC = "tests/unit/controllers/test_controllers_templated_content.py::"
TEMPLATES = TC + "test_a_template_policy_is_pinned_raw_and_renders_differently_per_cluster"
KUSTOMIZE = TC + "test_a_kustomization_ref_builds_the_overlay_and_fills_its_values_per_cluster"
PATCHES = TC + "test_patches_apply_to_every_delivered_object_and_may_be_templates"
CE = "tests/unit/core/test_core_engine_edges.py::"
CP = "tests/unit/core/test_core_planning.py::"
PF = "tests/integration/test_promotion_flows.py::"
PH = "tests/integration/test_promotion_health.py::"
BUDGET = PF + "test_a_failure_budget_sets_a_failed_cluster_aside_then_stops_the_promotion_past_it"
ROLLBACK = PF + "test_a_promotion_failing_its_prod_health_check_rolls_every_updated_cluster_back"
HS = "tests/unit/health/test_health_selection.py::"
KS = "tests/integration/test_kubefleet_staged_runs.py::"
SEL = "tests/unit/kubefleet/test_kubefleet_selection.py::"
KP = "tests/unit/kubefleet/test_kubefleet_picking.py::"
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
HO = "tests/unit/delivery/test_delivery_helm_options.py::"
RG = "tests/unit/delivery/test_delivery_registry.py::"
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
DC = "tests/integration/test_delivery_conflicts.py::"
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
RW = "tests/unit/runtime/test_runtime_webhook.py::"
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
DRIFT = CC + "test_drift_exclusions_remove_the_paths_from_matching_objects_before_delivery"
SEED_RUN = KS + "test_seed_004_cluster_scoped_rollout_then_rollback"
NS_RUN = KS + "test_namespaced_run_rolls_a_deployment_that_becomes_available_and_rolls_back"
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
CO = "tests/unit/core/test_core_overrides.py::"
OVERRIDDEN = (
    "tests/integration/test_kubefleet_overrides.py::"
    "test_overrides_label_prod_clusters_and_replace_a_configmap_value_then_a_bad_one_fails_its_cluster"
)
OSNAP = (
    "tests/unit/kubefleet/test_kubefleet_override_wiring.py::"
    "test_an_override_is_snapshotted_once_per_spec_and_its_snapshots_go_with_it"
)
SNAPSHOTS = (
    "tests/unit/kubefleet/test_kubefleet_snapshots.py::test_history_is_trimmed_oldest_first_to_the_limit"
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


PROFILE_SPEC: dict[str, Entry] = {
    "syncMode": h(
        "tests/integration/test_delivery_manifests.py::test_dry_run_reports_what_would_change_and_changes_nothing"
    ),
    "tier": h(
        PC + "test_a_lower_tier_takes_an_object_over_and_the_other_profile_gives_up_after_its_failures"
    ),
    "continueOnConflict": h(
        PC + "test_a_lower_tier_takes_an_object_over_and_the_other_profile_gives_up_after_its_failures"
    ),
    "continueOnError": h(DC + "test_stop_on_error_skips_what_follows_a_failed_object"),
    "maxUpdate": h(PH + "test_max_update_admits_one_cluster_at_a_time_and_waits_for_validate_healths"),
    "stopMatchingBehavior": h(SO + "test_a_summary_fleetwave_made_goes_on_to_delivery"),
    "reloader": profile({"reloader": True}),
    "templateResourceRefs": h(TEMPLATES),
    "dependsOn": h(
        "tests/integration/test_profile_dependencies.py::"
        "test_a_profile_waits_for_the_profiles_it_depends_on_cluster_by_cluster"
    ),
    "policyRefs": h(CC + "test_the_hash_follows_the_referenced_data_not_just_the_spec"),
    "helmCharts": h(HELM),
    "kustomizationRefs": h(KUSTOMIZE),
    "preDeployChecks": h(CHECKS),
    "validateHealths": h(PH + "test_max_update_admits_one_cluster_at_a_time_and_waits_for_validate_healths"),
    "preDeleteChecks": h(CHECKS),
    "postDeleteChecks": h(CHECKS),
    "patches": h(PATCHES),
    "patchesFrom": h(PATCHES),
    "driftExclusions": h(DRIFT),
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
        "extraLabels": h(
            CC + "test_extra_labels_and_annotations_are_stamped_on_every_delivered_object_and_change_the_hash"
        ),
        "extraAnnotations": h(
            CC + "test_extra_labels_and_annotations_are_stamped_on_every_delivered_object_and_change_the_hash"
        ),
    },
    "TemplateResourceRef": {
        "resource": h(TEMPLATES),
        "identifier": h(TEMPLATES),
        "optional": h(TC + "test_an_optional_template_resource_that_is_missing_is_left_out"),
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
        "uid": h(TS + "test_profile_cluster_refs_select_by_namespace_and_name"),
    },
    "PolicyRef": {
        "kind": h(CC + "test_helm_values_merge_inline_then_values_from_in_order"),
        "namespace": h(CC + "test_the_hash_follows_the_referenced_data_not_just_the_spec"),
        "name": h(CC + "test_the_hash_follows_the_referenced_data_not_just_the_spec"),
        "path": ref({"path": "dir"}),
        "remoteURL": (
            "refused",
            ("profile", {"policyRefs": [{"remoteURL": {"url": "https://example.com/x.yaml"}}]}),
        ),
        "deploymentType": h(
            PC + "test_local_content_goes_to_the_management_cluster_once_and_leaves_with_its_owner"
        ),
        "optional": h(CC + "test_an_optional_missing_reference_is_skipped"),
        "tier": h(DC + "test_the_first_inventory_keeps_an_object_until_a_lower_tier_takes_it_over"),
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
                "helmChartAction",
            )
        },
        "valuesFrom": h(CC + "test_helm_values_merge_inline_then_values_from_in_order"),
        "options": h(HO + "test_honoured_options_become_their_helm_flags_with_values_as_separate_arguments"),
        "registryCredentialsConfig": h(PRIVATE_CHARTS),
        "signatureVerification": chart({"signatureVerification": {"provider": "cosign"}}),
        "provenanceVerification": chart({"provenanceVerification": {"keyring": "k"}}),
    },
    "RegistryCredentialsConfig": {
        "credentials": h(PRIVATE_CHARTS),
        "ca": h(PRIVATE_CHARTS),
        "key": h(RG + "test_key_names_the_docker_config_key_and_only_for_a_docker_config"),
        "insecureSkipTLSVerify": h(RG + "test_each_option_reaches_helm_as_its_flag_and_files_stay_private"),
        "plainHTTP": h(RG + "test_each_option_reaches_helm_as_its_flag_and_files_stay_private"),
    },
    "ValueFrom": {
        f: h(CC + "test_helm_values_merge_inline_then_values_from_in_order")
        for f in ("kind", "namespace", "name", "optional")
    },
    "KustomizationRef": {
        **{
            f: h(KUSTOMIZE)
            for f in (
                "kind",
                "namespace",
                "name",
                "path",
                "components",
                "targetNamespace",
                "values",
                "valuesFrom",
                "tier",
                "optional",
            )
        },
        "remoteURL": kustomization({"remoteURL": {"url": "https://example.com/k.tgz"}}),
        "deploymentType": kustomization({"deploymentType": "Local"}),
        "skipNamespaceCreation": kustomization({"skipNamespaceCreation": False}),
        "force": kustomization({"force": False}),
    },
    "ValidateHealth": {
        **{f: h(SELECT) for f in ("name", "group", "version", "kind", "namespace")},
        "featureID": h(PH + "test_max_update_admits_one_cluster_at_a_time_and_waits_for_validate_healths"),
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
    "CELRule": {f: h(CORE_APP) for f in ("name", "rule")},
    "JobCheck": {f: within("ValidateHealth.jobCheck") for f in ("jobRef", "timeout")},
    "Patch": {f: h(PATCHES) for f in ("patch", "target")},
    # Reached from patches (kustomize honours every selector) and from driftExclusions (literal targets only).
    "PatchSelector": {
        **{f: h(DRIFT) for f in ("group", "version", "kind", "name", "namespace")},
        "labelSelector": profile(
            {"driftExclusions": [{"paths": ["/x"], "target": {"labelSelector": "a=b"}}]}
        ),
        "annotationSelector": profile(
            {"driftExclusions": [{"paths": ["/x"], "target": {"annotationSelector": "a=b"}}]}
        ),
    },
    "DriftExclusion": {f: h(DRIFT) for f in ("paths", "target")},
    "LabelSelector": {
        f: h(TS + "test_profile_is_one_stage_paced_by_max_update")
        for f in ("matchLabels", "matchExpressions")
    },
    "LabelSelectorRequirement": {
        f: h(CP + "test_match_expressions_follow_kubernetes_semantics") for f in ("key", "operator", "values")
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
    "AnalysisPrometheus": {"url": h(AN_UNREACHABLE), "path": h(AN_UNREACHABLE)},
    "WebhookGate": {
        "name": h(HOOKED),
        "url": h(HOOKED),
        "method": h(STAGED_HOOK),
        "perCluster": h(STAGED_HOOK),
        "timeout": h(RW + "test_an_attempt_longer_than_the_timeout_is_a_problem_saying_so"),
        "retries": h(RW + "test_a_4xx_is_not_retried_and_retries_stop_at_their_bound"),
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
        "delay": h(CE + "test_delay_is_measured_from_stage_success_not_from_stage_start"),
        "preHealthCheckDeployment": h(CORE_APP),
        "postDelayHealthChecks": h(
            PH + "test_post_delay_health_checks_with_get_resource_gate_the_next_stage"
        ),
        "promotionWindow": h(PG + "test_a_closed_promotion_window_holds_the_next_stage_until_it_opens"),
    },
    "TimeWindow": {
        f: h(CP + "test_promotion_window_opens_at_from_and_closes_at_the_next_to") for f in ("from", "to")
    },
    "ManualTrigger": {
        "delay": h(TS + "test_manual_trigger_checks_then_sticky_or_resetting_approval"),
        "preHealthCheckDeployment": h(TS + "test_manual_trigger_checks_then_sticky_or_resetting_approval"),
        "postDelayHealthChecks": h(TS + "test_manual_trigger_checks_then_sticky_or_resetting_approval"),
        "approved": h(MANUAL),
        "automaticReset": h(PG + "test_automatic_reset_false_keeps_a_manual_approval_for_the_next_revision"),
    },
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
        "resourceSelectors": h(
            SEL + "test_a_namespace_selector_takes_the_namespace_and_everything_user_made_inside_it"
        ),
        "policy": h(KP + "test_pickn_counts_only_tolerated_clusters_and_pickfixed_ignores_taints"),
        "strategy": h(SEED_RUN),
        "revisionHistoryLimit": h(SNAPSHOTS),
        "statusReportingScope": placement({"statusReportingScope": "NamespaceAccessible"}),
    },
    "ResourceSelector": {
        **{
            f: h(SEL + "test_a_namespace_selector_takes_the_namespace_and_everything_user_made_inside_it")
            for f in ("group", "version", "kind", "name")
        },
        "labelSelector": h(SEL + "test_namespace_only_and_reserved_namespaces"),
        "selectionScope": h(SEL + "test_namespace_only_and_reserved_namespaces"),
    },
    "PlacementPolicy": {
        "placementType": h(KP + "test_pickn_counts_only_tolerated_clusters_and_pickfixed_ignores_taints"),
        "clusterNames": h(KP + "test_pickn_counts_only_tolerated_clusters_and_pickfixed_ignores_taints"),
        "numberOfClusters": h(KP + "test_pickn_counts_only_tolerated_clusters_and_pickfixed_ignores_taints"),
        "affinity": h("tests/unit/kubefleet/test_kubefleet_picking.py::"),
        "topologySpreadConstraints": h(SPREAD),
        "tolerations": h(
            KP + "test_equal_needs_key_and_value_exists_needs_the_key_and_an_empty_key_tolerates_all"
        ),
    },
    "Affinity": {"clusterAffinity": h("tests/unit/kubefleet/test_kubefleet_picking.py::")},
    "ClusterAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": h(
            "tests/unit/kubefleet/test_kubefleet_picking.py::"
        ),
        "preferredDuringSchedulingIgnoredDuringExecution": h(PREFERRED),
    },
    "ClusterSelector": {"clusterSelectorTerms": h("tests/unit/kubefleet/test_kubefleet_picking.py::")},
    "ClusterSelectorTerm": {
        "labelSelector": h("tests/unit/kubefleet/test_kubefleet_picking.py::"),
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
        "rollingUpdate": h("tests/unit/kubefleet/test_kubefleet_run_passes.py::"),
        "applyStrategy": h(APPLY_RULES),
        "deleteStrategy": h(DELETE),
        "reportBackStrategy": placement({"strategy": {"reportBackStrategy": {"type": "Mirror"}}}),
    },
    "RollingUpdateConfig": {
        "maxUnavailable": h("tests/unit/kubefleet/test_kubefleet_run_passes.py::"),
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
        "serverSideApplyConfig": h(
            "tests/unit/kubefleet/test_kubefleet_apply_rules.py::test_each_apply_strategy_becomes_its_rules"
        ),
    },
    "ServerSideApplyConfig": {
        "force": h(
            "tests/unit/kubefleet/test_kubefleet_apply_rules.py::test_each_apply_strategy_becomes_its_rules"
        )
    },
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
        "maxConcurrency": h(
            "tests/unit/cli/test_cli_plan.py::test_staged_run_batches_follow_max_concurrency_and_sorting_label"
        ),
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
        "placement": h(CO + "test_for_placement_keeps_overrides_aimed_at_it_that_select_its_objects"),
        "clusterResourceSelectors": h(OVERRIDDEN),
        "policy": h(OVERRIDDEN),
    },
    "ResourceOverrideSpec": {
        "placement": h(CO + "test_for_placement_keeps_overrides_aimed_at_it_that_select_its_objects"),
        "resourceSelectors": h(OVERRIDDEN),
        "policy": h(OVERRIDDEN),
    },
    "PlacementRef": {
        f: h(CO + "test_for_placement_keeps_overrides_aimed_at_it_that_select_its_objects")
        for f in ("name", "scope")
    },
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
        "overrideType": h(CO + "test_a_delete_rule_leaves_the_object_out_on_matching_clusters"),
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

    for kind in ALL_KINDS:
        if "spec" in kind.model_fields:
            for model in _models_in(kind.model_fields["spec"].annotation):
                walk(model)
    return seen


def _test_exists(reference: str) -> bool:
    path, _, name = reference.partition("::")
    file = ROOT / path
    if not file.is_file():
        return False
    if not name:
        return any(
            n.name.startswith("test_")
            for n in ast.walk(ast.parse(file.read_text()))
            if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
        )
    tree = ast.parse(file.read_text(encoding="utf-8"))
    return any(
        isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name == name for n in ast.walk(tree)
    )


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


def test_honoured_and_other_entries_name_a_test_that_exists() -> None:
    missing = [
        f"{m}.{f}: {e[1]}"
        for m, f, e in _entries()
        if e[0] in ("honoured", "written", "agent-only") and not _test_exists(e[1])
    ]
    assert missing == []


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
