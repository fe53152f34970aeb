"""Translation from the API kinds (Sveltos, KubeFleet) to the engine's normalized model. Pure: no I/O."""

from __future__ import annotations

from fleetwave.translate.common import KEY_LABEL, KIND_LABEL, NAME_LABEL, NAMESPACE_LABEL
from fleetwave.translate.errors import Problem, TranslateError
from fleetwave.translate.fleet import fleet_from_docs, fleet_from_yaml, fleet_of, from_member_cluster
from fleetwave.translate.inputs import Rollout, from_manifests
from fleetwave.translate.kubefleet import (
    approval_request_name,
    from_staged_run,
    seed_approval_names,
    snapshot_hash,
)
from fleetwave.translate.sets import clusters_of_sets
from fleetwave.translate.sveltos import from_profile, from_promotion, pre_approved, profile_content_hash
from fleetwave.translate.validate import selector_problems

__all__ = [
    "KEY_LABEL",
    "KIND_LABEL",
    "NAMESPACE_LABEL",
    "NAME_LABEL",
    "Problem",
    "Rollout",
    "TranslateError",
    "approval_request_name",
    "clusters_of_sets",
    "fleet_from_docs",
    "fleet_from_yaml",
    "fleet_of",
    "from_manifests",
    "from_member_cluster",
    "from_profile",
    "from_promotion",
    "from_staged_run",
    "pre_approved",
    "profile_content_hash",
    "seed_approval_names",
    "selector_problems",
    "snapshot_hash",
]
