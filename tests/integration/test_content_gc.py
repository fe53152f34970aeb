"""Content snapshots nothing names any more are collected (ADR 0084), on the real fleet with the
controller running as its installed ServiceAccount: a profile's old content goes once every summary
moved to the new one, the current one stays; a Secret snapshot, owned by its anchor ConfigMap, goes
with it through Kubernetes' garbage collector (the controller may not delete a Secret)."""

from __future__ import annotations

import base64
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import yaml
from lightkube import ApiError, Client, codecs
from lightkube.resources.core_v1 import ConfigMap, Secret
from promotion_support import ControllerThread, registered_controller, wait_for

from fleetwave.kube import kinds
from fleetwave.local import binaries, fleet
from fleetwave.mgmt import install

HOME = install.NAMESPACE
GRACE = 2.0


@pytest.fixture(scope="module")
def controller(
    local_fleet: fleet.FleetState, management: Client, bins: binaries.Binaries
) -> Iterator[ControllerThread]:
    helm = bins.path("helm")
    overrides = {"snapshot_grace_seconds": GRACE, "snapshot_sweep_seconds": 1.0}
    with registered_controller(local_fleet, management, helm, "content-gc", **overrides) as thread:
        yield thread


def _content(name: str, value: str) -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "default"},
            "data": {"v": value},
        }
    )


def _profile(name: str, kind: str, source: str, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "fleetwave.io/v1alpha1",
        "kind": "ClusterProfile",
        "metadata": {"name": name},
        "spec": {
            "clusterSelector": {"matchLabels": {"env": "dev"}},  # member-1 only
            "policyRefs": [{"kind": kind, "name": source, "namespace": namespace}],
        },
    }


@contextmanager
def deleted_after(management: Client, profile: str) -> Iterator[None]:
    """Delete the profile afterwards and wait until its summaries withdrew what they delivered."""
    try:
        yield
    finally:
        management.delete(kinds.resource("ClusterProfile"), profile)
        wait_for(
            lambda: _summaries(management, profile) == [] or None, timeout=90, what=f"{profile} withdrawn"
        )


def _summaries(management: Client, profile: str) -> list[Any]:
    return list(
        management.list(
            kinds.resource("ClusterSummary"), namespace="*", labels={"fleetwave.io/cluster-profile": profile}
        )
    )


def _delivered(management: Client, profile: str) -> str | None:
    """The snapshot the profile's summary delivered and is Ready with, if any."""
    found = _summaries(management, profile)
    if not found:
        return None
    summary = found[0]
    ready = next((c for c in (summary.status or {}).get("conditions") or [] if c["type"] == "Ready"), {})
    if ready.get("status") != "True":
        return None
    return str((summary.metadata.annotations or {}).get("fleetwave.io/content") or "") or None


def _exists(management: Client, resource: Any, name: str) -> Any | None:
    try:
        return management.get(resource, name, namespace=HOME)
    except ApiError as e:
        if e.status.code == 404:
            return None
        raise


def test_old_content_is_collected_and_the_current_content_stays(
    controller: ControllerThread, management: Client, namespace: str
) -> None:
    name = f"gc-{uuid.uuid4().hex[:6]}"
    source = f"{name}-src"
    management.apply(
        codecs.from_dict(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": source, "namespace": namespace},
                "data": {"content.yaml": _content(name, "one")},
            }
        )
    )
    with deleted_after(management, name):
        management.apply(codecs.from_dict(_profile(name, "ConfigMap", source, namespace)))
        first = wait_for(lambda: _delivered(management, name), what="the first content delivered")
        assert _exists(management, ConfigMap, first) is not None

        management.patch(
            ConfigMap, source, {"data": {"content.yaml": _content(name, "two")}}, namespace=namespace
        )
        second = wait_for(
            lambda: d if (d := _delivered(management, name)) not in (None, first) else None,
            what="the second content delivered",
        )
        wait_for(lambda: _exists(management, ConfigMap, first) is None, timeout=60, what=f"{first} collected")
        time.sleep(GRACE + 2)  # past the grace and a few sweeps: what is named stays
        assert _exists(management, ConfigMap, second) is not None
    # The profile is gone: nothing names its content any more.
    wait_for(lambda: _exists(management, ConfigMap, second) is None, timeout=60, what=f"{second} collected")


def test_a_secret_snapshot_goes_with_its_anchor(
    controller: ControllerThread, management: Client, namespace: str
) -> None:
    name = f"gc-s-{uuid.uuid4().hex[:6]}"
    source = f"{name}-src"
    body = base64.b64encode(_content(name, "secret").encode()).decode()
    management.apply(
        codecs.from_dict(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": source, "namespace": namespace},
                "type": "addons.projectsveltos.io/cluster-profile",
                "data": {"content.yaml": body},
            }
        )
    )
    with deleted_after(management, name):
        management.apply(codecs.from_dict(_profile(name, "Secret", source, namespace)))
        snapshot = wait_for(lambda: _delivered(management, name), what="the Secret content delivered")
        assert snapshot.startswith("fw-content-s-")
        secret, anchor = _exists(management, Secret, snapshot), _exists(management, ConfigMap, snapshot)
        assert secret is not None
        assert anchor is not None
        [owner] = secret.metadata.ownerReferences
        assert (owner.kind, owner.name, owner.uid) == ("ConfigMap", snapshot, anchor.metadata.uid)
        assert not anchor.data
    wait_for(
        lambda: _exists(management, ConfigMap, snapshot) is None, timeout=60, what="the anchor collected"
    )
    wait_for(
        lambda: _exists(management, Secret, snapshot) is None,
        timeout=60,
        what="the Secret snapshot garbage-collected",
    )
