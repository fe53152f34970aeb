"""Two ClusterProfiles that deploy the same object to one cluster, on the real fleet (ADR 0063):
the lower tier takes it over, the other reports the conflict by name and — with
maxConsecutiveFailures — stops retrying; continueOnConflict lets the rest of a profile through."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from lightkube import ApiError, Client
from lightkube.resources.core_v1 import ConfigMap
from promotion_support import ControllerThread, registered, running_controller, wait_for

from fleetwave.kube import kinds
from fleetwave.local import binaries, fleet
from fleetwave.mgmt import manifests


@pytest.fixture(scope="module")
def controller(
    local_fleet: fleet.FleetState, management: Client, bins: binaries.Binaries
) -> Iterator[ControllerThread]:
    with (
        registered(management, local_fleet),
        running_controller(local_fleet, bins.path("helm"), "conflicts") as thread,
    ):
        yield thread


def _cm(namespace: str, name: str, **data: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace},
        "data": data,
    }


def _profile(name: str, namespace: str, objects: list[dict[str, Any]], **spec: Any) -> list[dict[str, Any]]:
    source = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": f"content-{name}", "namespace": "default"},
        "data": {"content.yaml": yaml.safe_dump_all(objects)},
    }
    profile = {
        "apiVersion": "fleetwave.io/v1alpha1",
        "kind": "ClusterProfile",
        "metadata": {"name": name},
        "spec": {
            "clusterSelector": {"matchLabels": {"env": "dev"}},  # member-1 only
            "policyRefs": [{"kind": "ConfigMap", "name": f"content-{name}", "namespace": "default"}],
            **spec,
        },
    }
    return [source, profile]


def _summary(management: Client, profile: str) -> dict[str, Any]:
    found = list(
        management.list(
            kinds.resource("ClusterSummary"), namespace="*", labels={"fleetwave.io/cluster-profile": profile}
        )
    )
    return dict(found[0].status or {}) if found else {}


def _ready(management: Client, profile: str) -> dict[str, Any]:
    conditions = _summary(management, profile).get("conditions") or []
    return next((c for c in conditions if c["type"] == "Ready"), {})


def _data(member: Client, namespace: str, name: str) -> dict[str, str] | None:
    try:
        return dict(member.get(ConfigMap, name, namespace=namespace).data or {})
    except ApiError as err:
        if err.status.code == 404:
            return None
        raise


def test_a_lower_tier_takes_an_object_over_and_the_other_profile_gives_up_after_its_failures(
    controller: ControllerThread, management: Client, members: dict[str, Client], namespace: str
) -> None:
    member = members["member-1"]
    names = ("base", "override", "late")
    try:
        manifests.apply(
            management,
            _profile(
                "base",
                namespace,
                [_cm(namespace, "shared", owner="base")],
                syncMode="ContinuousWithDriftDetection",  # re-applies on its own: meets the conflict
                maxConsecutiveFailures=2,
            ),
        )
        wait_for(lambda: _ready(management, "base").get("status") == "True", what="base delivered")
        assert _data(member, namespace, "shared") == {"owner": "base"}, _summary(management, "base")

        manifests.apply(
            management, _profile("override", namespace, [_cm(namespace, "shared", owner="override")], tier=50)
        )
        wait_for(lambda: _ready(management, "override").get("status") == "True", what="override delivered")
        assert _data(member, namespace, "shared") == {"owner": "override"}

        # base meets the conflict on its next pass, names who has the object, and stops retrying.
        features = wait_for(
            lambda: [
                f
                for f in _summary(management, "base").get("featureSummaries") or []
                if f.get("status") == "FailedNonRetriable"
            ],
            timeout=180,
            what="base gives up",
        )
        assert features[0]["consecutiveFailures"] == 2
        message = _ready(management, "base")["message"]
        assert "already deployed by summary/" in message
        assert "override" in message
        assert "(tier 50)" in message
        assert "gave up after 2 consecutive failures" in message
        assert _data(member, namespace, "shared") == {"owner": "override"}

        # continueOnConflict: the object in conflict is reported, the others are delivered.
        manifests.apply(
            management,
            _profile(
                "late",
                namespace,
                [_cm(namespace, "shared", owner="late"), _cm(namespace, "late-only", owner="late")],
                continueOnConflict=True,
            ),
        )
        wait_for(
            lambda: _data(member, namespace, "late-only") == {"owner": "late"}, what="late-only delivered"
        )
        ready = wait_for(
            lambda: (
                _ready(management, "late")
                if "conflict" in _ready(management, "late").get("message", "")
                else None
            ),
            what="late reports its conflict",
        )
        assert ready["status"] == "False"
        assert _data(member, namespace, "shared") == {"owner": "override"}
    finally:
        for name in names:
            try:
                management.delete(kinds.resource("ClusterProfile"), name)
            except ApiError as err:
                if err.status.code != 404:
                    raise
        wait_for(lambda: not any(_summary(management, n) for n in names), what="summaries withdrawn")
