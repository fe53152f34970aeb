"""A helm release's record as helm's storage keeps it, read within bounds (ADR 0114); the objects
its manifest holds, placed where helm put them."""

from __future__ import annotations

import base64
import gzip
import json

import pytest

from fleetwave.delivery import helm_drift
from fleetwave.kube import kinds as kd


def _stored(record: bytes, *, zipped: bool = True) -> str:
    """`data.release` of a release Secret: the API's base64 of helm's base64 of gzipped JSON."""
    body = gzip.compress(record) if zipped else record
    return base64.b64encode(base64.b64encode(body)).decode()


MANIFEST = """---
# Source: hello/templates/configmap.yaml
apiVersion: v1
kind: ConfigMap
metadata:
  name: greeter-config
data:
  message: hi
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: greeter
  namespace: ignored
"""


def test_the_deployed_manifest_is_read_from_helms_record_and_placed_as_helm_placed_it() -> None:
    record = helm_drift.decode_release(_stored(json.dumps({"manifest": MANIFEST, "version": 3}).encode()))
    objects = helm_drift.manifest_objects(record["manifest"], "release")
    assert [o["kind"] for o in objects] == ["ConfigMap", "ClusterRole"]
    cm = helm_drift.placed(objects[0], kd.KindInfo(kd.GVK("v1", "ConfigMap"), "configmaps", True), "apps")
    assert cm["metadata"] == {"name": "greeter-config", "namespace": "apps"}
    role_info = kd.KindInfo(kd.GVK("rbac.authorization.k8s.io/v1", "ClusterRole"), "clusterroles", False)
    assert "namespace" not in helm_drift.placed(objects[1], role_info, "apps")["metadata"]


def test_an_uncompressed_record_is_read_too() -> None:
    assert helm_drift.decode_release(_stored(b'{"manifest": ""}', zipped=False)) == {"manifest": ""}


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        ("not base64!", "not base64"),
        (_stored(b"[1, 2]"), "not a release record"),
        (_stored(b"{"), "not JSON"),
        # A record that inflates past the bound (a gzip bomb) is refused before it is held whole.
        (_stored(b" " * (helm_drift.MAX_RELEASE_BYTES + 1) + b"{}"), "larger than"),
    ],
)
def test_a_record_that_is_not_helms_or_too_large_is_refused_by_name(data: str, problem: str) -> None:
    with pytest.raises(helm_drift.ReleaseRecordError, match=problem):
        helm_drift.decode_release(data)


def test_a_manifest_of_too_many_objects_is_refused() -> None:
    many = "\n---\n".join(
        f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c{i}" for i in range(helm_drift.MAX_OBJECTS + 1)
    )
    with pytest.raises(helm_drift.ReleaseRecordError, match="more than the"):
        helm_drift.manifest_objects(many, "release")
