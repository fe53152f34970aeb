"""Deleting a ClusterProfile withdraws at its rollout's pace (ADR 0090): with maxUpdate 1, one member
loses the content at a time, each only once the previous one's withdrawal is finished, and the
profile is gone only after the last."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from lightkube import ApiError, Client, codecs
from lightkube.resources.core_v1 import ConfigMap, Event
from promotion_support import ControllerThread, registered_controller, wait_for

from fleetwave.controllers.sveltos import profile_withdrawal
from fleetwave.controllers.sveltos import summary_status as ss
from fleetwave.kube import kinds
from fleetwave.local import binaries, fleet

HOME = "fleetwave-system"


@pytest.fixture(scope="module")
def controller(
    local_fleet: fleet.FleetState, management: Client, bins: binaries.Binaries
) -> Iterator[ControllerThread]:
    with registered_controller(local_fleet, management, bins.path("helm"), "withdrawal") as thread:
        yield thread


def _docs(name: str, namespace: str) -> list[dict[str, Any]]:
    manifest = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace}}
    return [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": f"src-{name}", "namespace": namespace},
            "data": {"content.yaml": yaml.safe_dump(manifest)},
        },
        {
            "apiVersion": "fleetwave.io/v1alpha1",
            "kind": "ClusterProfile",
            "metadata": {"name": name},
            "spec": {
                "clusterSelector": {"matchExpressions": [{"key": "env", "operator": "Exists"}]},
                "maxUpdate": 1,
                "policyRefs": [{"kind": "ConfigMap", "name": f"src-{name}", "namespace": namespace}],
            },
        },
    ]


def _present(member: Client, namespace: str, name: str) -> bool:
    try:
        member.get(ConfigMap, name, namespace=namespace)
    except ApiError as e:
        if e.status.code == 404:
            return False
        raise
    return True


def _profile(management: Client, name: str) -> Any:
    try:
        return management.get(kinds.resource("ClusterProfile"), name)
    except ApiError as e:
        if e.status.code == 404:
            return None
        raise


def test_deleting_a_profile_withdraws_max_update_clusters_at_a_time(
    controller: ControllerThread, management: Client, members: dict[str, Client], namespace: str
) -> None:
    name = f"paced-{uuid.uuid4().hex[:5]}"
    for doc in _docs(name, namespace):
        management.apply(codecs.from_dict(doc), field_manager="test")
    wait_for(
        lambda: all(_present(m, namespace, name) for m in members.values()),
        what="the content on every member",
    )
    assert profile_withdrawal.FINALIZER in (_profile(management, name).metadata.finalizers or [])

    management.delete(kinds.resource("ClusterProfile"), name)
    gone_at: dict[str, float] = {}
    most_leaving = 0
    deadline = time.monotonic() + 120
    while (
        len(gone_at) < len(members) or _profile(management, name) is not None
    ) and time.monotonic() < deadline:
        summaries = management.list(
            kinds.resource("ClusterSummary"), namespace=HOME, labels={ss.PROFILE_LABEL: name}
        )
        most_leaving = max(most_leaving, sum(1 for s in summaries if s.metadata.deletionTimestamp))
        for member, client in members.items():
            if member not in gone_at and not _present(client, namespace, name):
                gone_at[member] = time.monotonic()
        if len(gone_at) < len(members):
            assert _profile(management, name) is not None, "the profile went before its content"
        time.sleep(0.05)
    assert set(gone_at) == set(members), gone_at
    assert most_leaving <= 1, most_leaving  # a withdrawal of one ConfigMap may be quicker than a poll
    batches = sorted(
        e.message
        for e in management.list(Event, namespace="default", fields={"involvedObject.name": name})
        if e.reason == "WithdrawingBatch"
    )
    # One summary at a time: 3, then 2, then 1 left (a quick withdrawal may finish between two polls,
    # so the events say it where the polling above cannot).
    assert batches == [f"withdrawing 1 of {n} clusters (maxUpdate at a time)" for n in (1, 2, 3)], batches
    # In summary-name order, each one only after the previous one's withdrawal finished.
    assert gone_at["member-1"] < gone_at["member-2"] < gone_at["member-3"], gone_at
    assert _profile(management, name) is None
