"""KubeFleet's evictions and disruption budgets (ADR 0107), in KubeFleet's own group with `--upstream-apis`,
with the objects of KubeFleet's eviction how-to: a PickN placement of a namespace over two of the
three members, a ClusterResourcePlacementDisruptionBudget named after it, an eviction the budget
refuses (nothing moves, and it stays refused when the budget is relaxed: an eviction is decided
once), one it allows (the content leaves that member and the placement picks the third one), and one
naming no placement. Everything through bash and the real `kubectl`, tables checked column by column.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import upstream_support
import yaml
from lightkube import ApiError, Client
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import ConfigMap, Namespace
from promotion_support import ControllerThread, wait_for
from test_upstream_apis_kubefleet_seed import Shell, table
from test_upstream_apis_kubefleet_seed import _members as fleet_members

from fleetwave.api import families
from fleetwave.local import binaries, fleet

FLEET_API = "placement.kubernetes-fleet.io/v1beta1"
PLACEMENTS = "clusterresourceplacements.placement.kubernetes-fleet.io"


@pytest.fixture(scope="module")
def shell(
    local_fleet: fleet.FleetState, bins: binaries.Binaries, tmp_path_factory: pytest.TempPathFactory
) -> Shell:
    workdir = tmp_path_factory.mktemp("evictions")
    return Shell(bins.directory, local_fleet.cluster(fleet.MANAGEMENT).kubeconfig, workdir)


@pytest.fixture(scope="module")
def controller(
    local_fleet: fleet.FleetState, management: Client, bins: binaries.Binaries, shell: Shell
) -> Iterator[ControllerThread]:
    def register() -> None:
        shell("kubectl api-resources > /dev/null")  # kubectl caches discovery (ADR 0062)
        shell(f"kubectl apply -f - << EOF\n{yaml.safe_dump_all(fleet_members(local_fleet))}EOF\n")

    def withdraw() -> None:
        # While the controller runs: a placement's cleanup finalizer withdraws its content.
        shell(f"kubectl delete {PLACEMENTS} --all --timeout=120s")

    def cleanup() -> None:
        shell("kubectl delete memberclusters.cluster.kubernetes-fleet.io --all --wait=false")

    with upstream_support.upstream_controller(
        local_fleet,
        management,
        bins,
        "evictions",
        register,
        upstream=families.upstream_families(),
        withdraw=withdraw,
        cleanup=cleanup,
    ) as thread:
        # PickN places on the members that are ready when it schedules: all three, before any test.
        wait_for(lambda: _all_ready(shell), timeout=120, what="the three members ready")
        yield thread


def _all_ready(shell: Shell) -> bool:
    members = json.loads(shell("kubectl get memberclusters.cluster.kubernetes-fleet.io -o json"))["items"]
    ready = [
        m
        for m in members
        if any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in (m.get("status") or {}).get("conditions") or []
        )
    ]
    return len(members) == 3 and len(ready) == 3


@pytest.fixture
def hub_namespace(management: Client, members: dict[str, Client]) -> Iterator[str]:
    """What the how-to's placement selects: a namespace (with a ConfigMap) on the hub."""
    name = f"evict-{uuid.uuid4().hex[:6]}"
    management.create(Namespace(metadata=ObjectMeta(name=name)))
    management.create(ConfigMap(metadata=ObjectMeta(name="app", namespace=name), data={"key": "v1"}))
    yield name
    management.delete(Namespace, name)
    for client in members.values():  # the placement's deletion withdrew it; this is belt and braces
        try:
            client.delete(Namespace, name)
        except ApiError as e:
            if e.status.code != 404:
                raise


def _placement(name: str, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": FLEET_API,
        "kind": "ClusterResourcePlacement",
        "metadata": {"name": name},
        "spec": {
            "resourceSelectors": [{"group": "", "kind": "Namespace", "version": "v1", "name": namespace}],
            "policy": {"placementType": "PickN", "numberOfClusters": 2},
        },
    }


def _budget(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": FLEET_API,
        "kind": "ClusterResourcePlacementDisruptionBudget",
        "metadata": {"name": name},
        "spec": spec,
    }


def _eviction(name: str, placement: str, cluster: str) -> dict[str, Any]:
    return {
        "apiVersion": FLEET_API,
        "kind": "ClusterResourcePlacementEviction",
        "metadata": {"name": name},
        "spec": {"placementName": placement, "clusterName": cluster},
    }


def _holds(member: Client, namespace: str) -> bool:
    try:
        return (member.get(ConfigMap, "app", namespace=namespace).data or {}).get("key") == "v1"
    except ApiError as e:
        if e.status.code == 404:
            return False
        raise


def _crpe(shell: Shell, name: str) -> dict[str, str] | None:
    """`kubectl get crpe <name>` once the eviction is decided (both columns filled, or VALID False)."""
    rows = table(shell(f"kubectl get crpe {name}"))
    row = rows[0] if rows else None
    decided = row is not None and (row["VALID"] == "False" or row["EXECUTED"] != "")
    return row if decided else None


def _conditions(shell: Shell, kind: str, name: str) -> dict[str, dict[str, Any]]:
    obj = json.loads(shell(f"kubectl get {kind} {name} -o json"))
    return {c["type"]: c for c in (obj.get("status") or {}).get("conditions") or []}


def _placed_on(shell: Shell, crp: str) -> list[str] | None:
    """The clusters of the placement's status once it is Available (None before)."""
    status = json.loads(shell(f"kubectl get crp {crp} -o json")).get("status") or {}
    conditions = {c["type"]: c["status"] for c in status.get("conditions") or []}
    if conditions.get("ClusterResourcePlacementAvailable") != "True":
        return None
    return sorted(s["clusterName"] for s in status.get("placementStatuses") or [])


def test_a_budget_refuses_one_eviction_and_allows_the_next_which_moves_the_content(
    controller: ControllerThread, shell: Shell, members: dict[str, Client], hub_namespace: str
) -> None:
    crp = f"test-crp-{hub_namespace}"
    shell.apply_heredoc(_placement(crp, hub_namespace))
    placed = wait_for(lambda: _placed_on(shell, crp), timeout=180, what="the placement available")
    assert placed == ["member-1", "member-2"]  # PickN 2 of 3: the first two by name
    assert [m for m, c in sorted(members.items()) if _holds(c, hub_namespace)] == ["member-1", "member-2"]

    shell.apply_heredoc(_budget(crp, minAvailable=2))
    refused = f"test-eviction-{hub_namespace}"
    shell.apply_heredoc(_eviction(refused, crp, "member-1"))
    row = wait_for(lambda: _crpe(shell, refused), what="the refused eviction decided")
    assert (row["VALID"], row["EXECUTED"]) == ("True", "False")
    executed = _conditions(shell, "crpe", refused)["Executed"]
    assert executed["reason"] == "ClusterResourcePlacementEvictionNotExecuted"
    assert executed["message"] == (
        "Eviction is blocked by specified ClusterResourcePlacementDisruptionBudget, "
        "availablePlacements: 2, totalPlacements: 2"
    )
    assert _holds(members["member-1"], hub_namespace)  # nothing removed
    assert _placed_on(shell, crp) == ["member-1", "member-2"]

    # Relaxed budget: the refused eviction stays refused (decided once); a new one goes ahead.
    shell.apply_heredoc(_budget(crp, minAvailable=1))
    allowed = f"test-eviction-2-{hub_namespace}"
    shell.apply_heredoc(_eviction(allowed, crp, "member-1"))
    row = wait_for(lambda: _crpe(shell, allowed), what="the allowed eviction decided")
    assert (row["VALID"], row["EXECUTED"]) == ("True", "True")
    assert _conditions(shell, "crpe", allowed)["Executed"]["message"] == (
        "Eviction is allowed by specified ClusterResourcePlacementDisruptionBudget, "
        "availablePlacements: 2, totalPlacements: 2"
    )
    wait_for(
        lambda: not _holds(members["member-1"], hub_namespace),
        timeout=180,
        what="the content withdrawn from the evicted member-1",
    )
    wait_for(
        lambda: _holds(members["member-3"], hub_namespace), timeout=180, what="the content placed on member-3"
    )
    moved = wait_for(
        lambda: (p := _placed_on(shell, crp)) == ["member-2", "member-3"] and p,
        timeout=180,
        what="the placement available on member-2 and member-3",
    )
    assert moved == ["member-2", "member-3"]
    assert _holds(members["member-2"], hub_namespace)
    still = {r["NAME"]: (r["VALID"], r["EXECUTED"]) for r in table(shell("kubectl get crpe"))}
    assert still[refused] == ("True", "False")
    assert still[allowed] == ("True", "True")
    assert not _holds(members["member-1"], hub_namespace)  # not picked again while the eviction exists


def test_an_eviction_naming_no_placement_is_invalid(controller: ControllerThread, shell: Shell) -> None:
    name = f"test-eviction-{uuid.uuid4().hex[:6]}"
    shell.apply_heredoc(_eviction(name, "no-such-crp", "member-1"))
    row = wait_for(lambda: _crpe(shell, name), what="the eviction decided")
    assert (row["VALID"], row["EXECUTED"]) == ("False", "")
    valid = _conditions(shell, "crpe", name)["Valid"]
    assert (valid["reason"], valid["message"]) == (
        "ClusterResourcePlacementEvictionInvalid",
        "Failed to find ClusterResourcePlacement targeted by eviction",
    )
