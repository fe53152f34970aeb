"""A ClusterSummary's body carries nothing the API server would add or a reader would assume
(ADR 0118): every byte of it is held in each version the management API server keeps."""

from __future__ import annotations

from typing import Any

from fleetwave.api.sveltos import ClusterProfile, ClusterProfileSpec
from fleetwave.controllers.sveltos import summary_status as ss
from fleetwave.controllers.sveltos import summary_writes


def _profile(**spec: Any) -> ClusterProfile:
    return ClusterProfile.model_validate(
        {
            "apiVersion": "fleetwave.io/v1alpha1",
            "kind": "ClusterProfile",
            "metadata": {"name": "web", "uid": "u1"},
            "spec": {"policyRefs": [{"kind": "ConfigMap", "name": "c", "namespace": "default"}], **spec},
        }
    )


def _body(profile: ClusterProfile) -> dict[str, Any]:
    shared = summary_writes.Shared.build(
        profile=profile,
        api_version="fleetwave.io/v1alpha1",
        owner_reference={"apiVersion": "fleetwave.io/v1alpha1", "kind": "ClusterProfile", "name": "web"},
        snapshot="web-content-1",
        content_hash="h",
    )
    return shared.body("fleet/m1")


def test_fields_at_their_defaults_are_left_out_of_the_summary_spec() -> None:
    carried = _body(_profile())["spec"]["clusterProfileSpec"]
    assert carried == {"policyRefs": [{"kind": "ConfigMap", "name": "c", "namespace": "default"}]}
    # ... and read back, it is the same spec the profile has.
    assert ClusterProfileSpec.model_validate(carried) == _profile().spec


def test_a_field_set_away_from_its_default_is_carried() -> None:
    carried = _body(_profile(syncMode="ContinuousWithDriftDetection", tier=50))["spec"]["clusterProfileSpec"]
    assert carried["syncMode"] == "ContinuousWithDriftDetection"
    assert carried["tier"] == 50


def test_leave_policies_is_written_only_when_the_profile_leaves_them() -> None:
    withdraw = _body(_profile())["metadata"]["annotations"]
    leave = _body(_profile(stopMatchingBehavior="LeavePolicies"))["metadata"]["annotations"]
    assert ss.LEAVE_POLICIES_ANNOTATION not in withdraw
    assert leave[ss.LEAVE_POLICIES_ANNOTATION] == "true"
