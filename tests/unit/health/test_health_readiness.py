"""Default readiness of each kind the delivery code waits for."""

from __future__ import annotations

from typing import Any

import pytest

from fleetwave.health.readiness import is_ready, judged


def _cond(kind: str, status: str = "True", **extra: str) -> dict[str, str]:
    return {"type": kind, "status": status, **extra}


def _obj(api_version: str, kind: str, *, spec: Any = None, status: Any = None) -> dict[str, Any]:
    meta = {"name": "x", "generation": 1}
    obj: dict[str, Any] = {"apiVersion": api_version, "kind": kind, "metadata": meta}
    if spec is not None:
        obj["spec"] = spec
    if status is not None:
        obj["status"] = status
    return obj


DEADLINE = _cond("Progressing", "False", reason="ProgressDeadlineExceeded", message="m")


def _deploy(want: int = 3, **status: Any) -> dict[str, Any]:
    base = {
        "observedGeneration": 1,
        "replicas": want,
        "updatedReplicas": want,
        "availableReplicas": want,
        "conditions": [_cond("Available"), _cond("Progressing", reason="NewReplicaSetAvailable")],
    }
    return _obj("apps/v1", "Deployment", spec={"replicas": want}, status={**base, **status})


@pytest.mark.parametrize(
    ("obj", "ready", "reason"),
    [
        (_deploy(), True, "3 of 3 replicas available"),
        (_deploy(observedGeneration=0), False, "generation 1 not yet observed (observed 0)"),
        (_deploy(updatedReplicas=1), False, "1 of 3 replicas updated"),
        (_deploy(replicas=4), False, "1 old replicas pending termination"),
        (_deploy(availableReplicas=2), False, "2 of 3 updated replicas available"),
        (_deploy(conditions=[_cond("Available", "False")]), False, "condition Available is not True"),
        (
            _deploy(conditions=[DEADLINE]),
            False,
            "progress deadline exceeded: m",
        ),
        (_obj("apps/v1", "Deployment", spec={"replicas": 1}), False, "generation 1 not yet observed"),
    ],
)
def test_deployment(obj: dict[str, Any], ready: bool, reason: str) -> None:
    ok, why = is_ready(obj)
    assert ok is ready
    assert why.startswith(reason)


def _sts(status: dict[str, Any], strategy: dict[str, Any] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"replicas": 2}
    if strategy is not None:
        spec["updateStrategy"] = strategy
    base = {"observedGeneration": 1, "readyReplicas": 2, "updatedReplicas": 2}
    return _obj("apps/v1", "StatefulSet", spec=spec, status={**base, **status})


@pytest.mark.parametrize(
    ("obj", "ready", "reason"),
    [
        (_sts({"currentRevision": "r2", "updateRevision": "r2"}), True, "2 of 2 replicas ready"),
        (_sts({"readyReplicas": 1}), False, "1 of 2 replicas ready"),
        (_sts({"updatedReplicas": 1}), False, "1 of 2 replicas updated"),
        (_sts({"currentRevision": "r1", "updateRevision": "r2"}), False, "revision r2 not yet current"),
        (_sts({"updatedReplicas": 1}, {"rollingUpdate": {"partition": 1}}), True, "2 of 2 replicas ready"),
        (_sts({"updatedReplicas": 0, "currentRevision": "a"}, {"type": "OnDelete"}), True, "2 of 2"),
    ],
)
def test_statefulset(obj: dict[str, Any], ready: bool, reason: str) -> None:
    ok, why = is_ready(obj)
    assert ok is ready
    assert why.startswith(reason)


def _ds(**status: Any) -> dict[str, Any]:
    base = {"observedGeneration": 1, "desiredNumberScheduled": 3}
    base |= {"updatedNumberScheduled": 3, "numberAvailable": 3}
    return _obj("apps/v1", "DaemonSet", spec={}, status={**base, **status})


@pytest.mark.parametrize(
    ("obj", "ready", "reason"),
    [
        (_ds(), True, "3 of 3 pods available"),
        (_ds(updatedNumberScheduled=2), False, "2 of 3 pods updated"),
        (_ds(numberAvailable=1), False, "1 of 3 pods available"),
    ],
)
def test_daemonset(obj: dict[str, Any], ready: bool, reason: str) -> None:
    assert is_ready(obj) == (ready, reason)


@pytest.mark.parametrize(
    ("status", "ready", "reason"),
    [
        ({"succeeded": 1, "conditions": [_cond("Complete")]}, True, "complete"),
        (
            {"conditions": [_cond("Failed", reason="BackoffLimitExceeded", message="limit reached")]},
            False,
            "failed: BackoffLimitExceeded limit reached",
        ),
        ({"active": 1}, False, "running (0 succeeded)"),
        (None, False, "running (0 succeeded)"),
    ],
)
def test_job(status: Any, ready: bool, reason: str) -> None:
    assert is_ready(_obj("batch/v1", "Job", status=status)) == (ready, reason)


@pytest.mark.parametrize(
    ("status", "ready", "reason"),
    [
        ({"phase": "Running", "conditions": [_cond("Ready")]}, True, "ready"),
        ({"phase": "Running", "conditions": [_cond("Ready", "False")]}, False, "phase Running, not ready"),
        ({"phase": "Succeeded"}, True, "succeeded"),
        ({"phase": "Failed", "reason": "Evicted"}, False, "failed: Evicted"),
        (None, False, "phase Pending, not ready"),
    ],
)
def test_pod(status: Any, ready: bool, reason: str) -> None:
    assert is_ready(_obj("v1", "Pod", status=status)) == (ready, reason)


@pytest.mark.parametrize(
    ("conditions", "ready", "reason"),
    [
        ([_cond("NamesAccepted"), _cond("Established")], True, "established"),
        ([_cond("NamesAccepted", "False", message="clash")], False, "names not accepted: clash"),
        ([], False, "not yet established"),
    ],
)
def test_crd(conditions: list[dict[str, str]], ready: bool, reason: str) -> None:
    crd = _obj("apiextensions.k8s.io/v1", "CustomResourceDefinition", status={"conditions": conditions})
    assert is_ready(crd) == (ready, reason)


def test_namespace() -> None:
    assert is_ready(_obj("v1", "Namespace", status={"phase": "Active"})) == (True, "phase Active")
    assert is_ready(_obj("v1", "Namespace", status={"phase": "Terminating"})) == (False, "phase Terminating")


def test_other_kinds_are_ready_once_they_exist() -> None:
    assert is_ready(_obj("v1", "ConfigMap")) == (True, "exists")
    # Same kind name in another group is not judged as the built-in.
    assert is_ready(_obj("example.com/v1", "Deployment", status={})) == (True, "exists")


@pytest.mark.parametrize(
    ("conditions", "ready", "reason"),
    [
        ([_cond("Ready")], True, "ready"),
        (
            [_cond("Ready", "False", message="waiting for the certificate")],
            False,
            "Ready is False: waiting for the certificate",
        ),
        ([_cond("Available"), _cond("Progressing", "False")], True, "available"),
        ([_cond("Available", "Unknown")], False, "Available is Unknown"),
        ([_cond("Ready"), _cond("Available", "False")], True, "ready"),  # Ready decides when both exist
        ([_cond("Synced")], True, "exists"),  # neither condition: ready once it exists
    ],
)
def test_a_custom_resource_is_judged_by_its_ready_or_available_condition(
    conditions: list[dict[str, str]], ready: bool, reason: str
) -> None:
    assert is_ready(_obj("example.com/v1", "Widget", status={"conditions": conditions})) == (ready, reason)


def test_a_condition_of_an_older_generation_is_not_ready_yet() -> None:
    widget = _obj(
        "example.com/v1", "Widget", status={"conditions": [{**_cond("Ready"), "observedGeneration": 1}]}
    )
    widget["metadata"]["generation"] = 2
    assert is_ready(widget) == (False, "Ready condition is of generation 1, not yet 2")


def test_kinds_that_may_wait_are_watched_and_core_kinds_are_not() -> None:
    assert judged("example.com/v1", "Widget")
    assert judged("apps/v1", "Deployment")
    assert not judged("v1", "ConfigMap")
    assert not judged("rbac.authorization.k8s.io/v1", "Role")
