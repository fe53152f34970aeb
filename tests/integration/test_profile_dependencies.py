"""`dependsOn` between ClusterProfiles, as Sveltos' docs write it, on the real fleet: a profile reaches
a cluster only once every profile it depends on is provisioned there, cluster by cluster; where a
dependency is missing it waits and says so in a condition; a cycle is refused in status."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from lightkube import ApiError, Client, codecs
from lightkube.resources.core_v1 import ConfigMap
from promotion_support import ControllerThread, registered_controller, wait_for

from fleetwave.kube import kinds
from fleetwave.local import binaries, fleet


@pytest.fixture(scope="module")
def controller(
    local_fleet: fleet.FleetState, management: Client, bins: binaries.Binaries
) -> Iterator[ControllerThread]:
    with registered_controller(local_fleet, management, bins.path("helm"), "depends-on") as thread:
        yield thread


def _profile(
    name: str, namespace: str, envs: list[str], depends_on: list[str] | None = None
) -> list[dict[str, Any]]:
    """A profile delivering one ConfigMap `name` into `namespace` on the members whose env is in `envs`."""
    manifest = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace},
        "data": {"from": name},
    }
    source = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": f"src-{name}", "namespace": namespace},
        "data": {"content.yaml": yaml.safe_dump(manifest)},
    }
    spec: dict[str, Any] = {
        "clusterSelector": {"matchExpressions": [{"key": "env", "operator": "In", "values": envs}]},
        "policyRefs": [{"kind": "ConfigMap", "name": f"src-{name}", "namespace": namespace}],
    }
    if depends_on:
        spec["dependsOn"] = depends_on
    profile = {
        "apiVersion": "fleetwave.io/v1alpha1",
        "kind": "ClusterProfile",
        "metadata": {"name": name},
        "spec": spec,
    }
    return [source, profile]


def _apply(management: Client, docs: list[dict[str, Any]]) -> None:
    for doc in docs:
        management.apply(codecs.from_dict(doc))


def _present(member: Client, namespace: str, name: str) -> bool:
    try:
        member.get(ConfigMap, name, namespace=namespace)
    except ApiError as e:
        if e.status.code == 404:
            return False
        raise
    return True


def _condition(management: Client, profile: str, type_: str) -> dict[str, Any]:
    found = management.get(kinds.resource("ClusterProfile"), profile)
    return next((c for c in (found.status or {}).get("conditions") or [] if c["type"] == type_), {})


def _delete(management: Client, *profiles: str) -> None:
    for name in profiles:
        try:
            management.delete(kinds.resource("ClusterProfile"), name)
        except ApiError as e:
            if e.status.code != 404:
                raise


def test_a_profile_waits_for_the_profiles_it_depends_on_cluster_by_cluster(
    controller: ControllerThread, management: Client, members: dict[str, Client], namespace: str
) -> None:
    suffix = uuid.uuid4().hex[:5]
    base, app = f"base-{suffix}", f"app-{suffix}"
    # The dependent first: it must not go anywhere before its dependency is there.
    _apply(management, _profile(app, namespace, ["dev", "staging"], depends_on=[base]))
    try:
        wait_for(
            lambda: _condition(management, app, "DependenciesProvisioned").get("status") == "False",
            what="the dependent waiting for its dependency",
        )
        time.sleep(2)
        assert not _present(members["member-1"], namespace, app)
        assert not _present(members["member-2"], namespace, app)

        _apply(management, _profile(base, namespace, ["dev"]))
        wait_for(
            lambda: _present(members["member-1"], namespace, app), what="the dependent on dev, after its base"
        )
        assert _present(members["member-1"], namespace, base)
        # staging has no base: the dependent waits there, and says so.
        waiting = _condition(management, app, "DependenciesProvisioned")
        assert waiting["status"] == "False"
        assert waiting["reason"] == "WaitingForDependencies"
        assert f"fleetwave-system/member-2 waits for {base}" in waiting["message"]
        assert not _present(members["member-2"], namespace, app)

        _apply(management, _profile(base, namespace, ["dev", "staging"]))
        wait_for(
            lambda: _present(members["member-2"], namespace, app),
            what="the dependent on staging, after its base",
        )
        assert _present(members["member-2"], namespace, base)
        wait_for(
            lambda: _condition(management, app, "DependenciesProvisioned").get("status") == "True",
            what="every dependency provisioned",
        )
    finally:
        _delete(management, app, base)


def test_a_dependency_cycle_is_refused_in_status(
    controller: ControllerThread, management: Client, members: dict[str, Client], namespace: str
) -> None:
    suffix = uuid.uuid4().hex[:5]
    first, second = f"first-{suffix}", f"second-{suffix}"
    _apply(management, _profile(first, namespace, ["dev"], depends_on=[second]))
    _apply(management, _profile(second, namespace, ["dev"], depends_on=[first]))
    try:
        for name in (first, second):
            ready = wait_for(
                lambda name=name: (
                    c if (c := _condition(management, name, "Ready")).get("reason") == "InvalidSpec" else None
                ),
                what=f"{name} refused",
            )
            assert "is a cycle" in ready["message"]
            assert first in ready["message"]
            assert second in ready["message"]
        assert not _present(members["member-1"], namespace, first)
        assert not _present(members["member-1"], namespace, second)
    finally:
        _delete(management, first, second)
