"""Analysis gates on the real local fleet (ADR 0081), against a real Prometheus scraping a real
Pushgateway (Debian's binaries): a good pushed value passes `count` measurements and the next stage
starts; a bad value fails the analysis and, with a failure budget and onFailure: Rollback, the
promotion rolls back to the revision before; an unreachable Prometheus holds the stage with a clear
message and never lets it promote."""

from __future__ import annotations

import json
import socket
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from lightkube import ApiError, Client
from lightkube.resources.core_v1 import ConfigMap
from promotion_support import (
    ControllerThread,
    deleted_after,
    registered,
    running_controller,
    stage_phases,
    status,
    wait_for,
)
from test_metric_checks import push

from fleetwave.kube import kinds, ops
from fleetwave.local import binaries, fleet
from fleetwave.local import prometheus as local_prometheus
from fleetwave.mgmt import manifests


@pytest.fixture(scope="module")
def controller(
    local_fleet: fleet.FleetState, management: Client, bins: binaries.Binaries
) -> Iterator[ControllerThread]:
    with (
        registered(management, local_fleet),
        running_controller(local_fleet, bins.path("helm"), "analyses") as t,
    ):
        yield t
    assert t.error is None, t.error


@pytest.fixture
def job() -> str:
    return f"analysed-{uuid.uuid4().hex[:8]}"


def _content(management: Client, name: str, value: str) -> None:
    page = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default"}}
    manifests.apply(
        management,
        [
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": "default"},
                "data": {"content.yaml": yaml.safe_dump({**page, "data": {"v": value}})},
            }
        ],
    )


def _promotion(management: Client, name: str, analysis: dict[str, Any], **spec: Any) -> None:
    _content(management, name, "1")
    doc = {
        "apiVersion": f"{kinds.GROUP}/{kinds.VERSION}",
        "kind": "ClusterPromotion",
        "metadata": {"name": name},
        "spec": {
            "profileSpec": {"policyRefs": [{"kind": "ConfigMap", "name": name, "namespace": "default"}]},
            "stages": [
                {"name": "dev", "clusterSelector": {"matchLabels": {"env": "dev"}}, "analyses": [analysis]},
                {"name": "prod", "clusterSelector": {"matchLabels": {"env": "prod"}}},
            ],
            **spec,
        },
    }
    manifests.apply(management, [doc])


def _analysis(url: str, job: str, **kw: Any) -> dict[str, Any]:
    return {
        "name": "errors",
        "prometheus": {"url": url},
        "query": f'fleetwave_analysis_errors{{job="{job}"}}',
        "successCondition": "result < 1.0",
        "interval": "1s",
        "count": 2,
        **kw,
    }


def _said(management: Client, name: str, text: str) -> bool:
    return text in json.dumps(status(management, name))


def _phase(management: Client, name: str) -> str:
    return str(status(management, name).get("rollout", {}).get("phase"))


def test_an_analysis_passes_after_count_good_measurements_and_the_next_stage_starts(
    controller: ControllerThread,
    management: Client,
    prometheus: local_prometheus.Prometheus,
    job: str,
) -> None:
    push(
        prometheus,
        job,
        "fleetwave_analysis_errors 0",
        until=(f'fleetwave_analysis_errors{{job="{job}"}}', 0.0),
    )
    name = f"analysed-{uuid.uuid4().hex[:6]}"
    _promotion(management, name, _analysis(prometheus.url, job, count=3))
    with deleted_after(management, name):
        wait_for(lambda: stage_phases(management, name).get("prod") == "Succeeded", what="prod promoted")
        dev = next(s for s in status(management, name)["rollout"]["stages"] if s["name"] == "dev")
        gate = next(g for g in dev["gates"] if g["kind"] == "Analysis")
        assert gate["message"] == "analysis errors passed: 3 measurements, 0 failed"
    management.delete(ConfigMap, name, namespace="default")


def test_a_bad_value_fails_the_analysis_and_the_promotion_rolls_back_to_the_revision_before(
    controller: ControllerThread,
    management: Client,
    members: dict[str, Client],
    prometheus: local_prometheus.Prometheus,
    job: str,
) -> None:
    errors = f'fleetwave_analysis_errors{{job="{job}"}}'
    push(prometheus, job, "fleetwave_analysis_errors 0", until=(errors, 0.0))
    name = f"analysed-{uuid.uuid4().hex[:6]}"
    budget = {"failureBudget": {"gracePeriod": "60s"}, "onFailure": "Rollback"}
    _promotion(management, name, _analysis(prometheus.url, job), **budget)

    def on_dev() -> str | None:
        cm = members["member-1"].get(ConfigMap, name, namespace="default")
        return (cm.data or {}).get("v")

    with deleted_after(management, name):
        wait_for(lambda: _phase(management, name) == "Succeeded", what="revision 1 everywhere")
        push(prometheus, job, "fleetwave_analysis_errors 5", until=(errors, 5.0))
        _content(management, name, "2")  # revision 2
        ended = wait_for(
            lambda: (st := status(management, name)).get("rollout", {}).get("phase") == "RolledBack" and st,
            what="the promotion rolled back",
            timeout=120,
        )
        succeeded = next(c for c in ended["conditions"] if c["type"] == "Succeeded")
        assert succeeded["reason"] == "RolledBack"
        assert (
            "analysis errors failed: 1 of 1 measurements failed (limit 0): "
            "result 5: successCondition is false" in succeeded["message"]
        )
        assert [r["outcome"] for r in ended["revisions"]] == ["Succeeded", "RolledBack"]
        wait_for(lambda: on_dev() == "1", what="dev back on revision 1")
    management.delete(ConfigMap, name, namespace="default")


def test_a_per_cluster_analysis_failing_sets_its_cluster_aside_within_the_budget(
    controller: ControllerThread,
    management: Client,
    prometheus: local_prometheus.Prometheus,
    job: str,
) -> None:
    """The per-cluster analysis queries the series labelled with dev's cluster, which is bad: the
    cluster is failed at once (no grace to wait out) and set aside within the budget, and prod goes on."""
    cluster = "fleetwave-system/member-1"
    series = f'fleetwave_analysis_errors{{job="{job}",cluster="{cluster}"}}'
    push(prometheus, job, f'fleetwave_analysis_errors{{cluster="{cluster}"}} 5', until=(series, 5.0))
    name = f"analysed-{uuid.uuid4().hex[:6]}"
    analysis = _analysis(
        prometheus.url,
        job,
        query=f'fleetwave_analysis_errors{{job="{job}",cluster="${{MEMBER-CLUSTER-NAME}}"}}',
        perCluster=True,
    )
    budget = {"failureBudget": {"maxFailedPerStage": 1, "gracePeriod": "10m"}}
    _promotion(management, name, analysis, **budget)
    with deleted_after(management, name):
        wait_for(lambda: stage_phases(management, name).get("prod") == "Succeeded", what="prod promoted")
        dev = next(s for s in status(management, name)["rollout"]["stages"] if s["name"] == "dev")
        assert dev["setAside"] == [
            {
                "cluster": cluster,
                "message": "analysis errors: 1 of 1 measurements failed (limit 0): "
                "result 5: successCondition is false",
            }
        ]
    management.delete(ConfigMap, name, namespace="default")


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_an_unreachable_prometheus_holds_the_stage_with_a_clear_message(
    controller: ControllerThread, management: Client, job: str
) -> None:
    name = f"unreachable-{uuid.uuid4().hex[:6]}"
    url = f"http://127.0.0.1:{_closed_port()}"
    _promotion(management, name, _analysis(url, job, count=3, failureLimit=1))
    with deleted_after(management, name):
        wait_for(
            lambda: _said(
                management,
                name,
                f"analysis errors failed: 2 of 2 measurements failed (limit 1): query failed: "
                f"cannot connect to {url}/api/v1/query",
            ),
            what="dev held by the unreachable Prometheus",
        )
        assert stage_phases(management, name).get("dev") != "Succeeded"
        assert stage_phases(management, name).get("prod") in (None, "", "Pending")
        assert _phase(management, name) == "Waiting"
    management.delete(ConfigMap, name, namespace="default")


def test_the_api_server_refuses_an_analysis_out_of_bounds(
    controller: ControllerThread, management: Client
) -> None:
    base = _analysis("http://127.0.0.1:9090", "j")
    bad = {
        "placeholder without perCluster": (
            {"query": 'up{cluster="${MEMBER-CLUSTER-NAME}"}'},
            "only a perCluster analysis",
        ),
        "failureLimit not below count": (
            {"count": 2, "failureLimit": 2},
            "failureLimit must be less than count",
        ),
        "count over 100": ({"count": 101}, "count"),
        "interval under 1s": ({"interval": "500ms"}, "must be at least 1s"),
        "scheme": ({"prometheus": {"url": "ftp://127.0.0.1/"}}, "url"),
    }
    for what, (fields, said) in bad.items():
        doc = {
            "apiVersion": f"{kinds.GROUP}/{kinds.VERSION}",
            "kind": "ClusterPromotion",
            "metadata": {"name": f"refused-{uuid.uuid4().hex[:6]}"},
            "spec": {"stages": [{"name": "dev", "analyses": [{**base, **fields}]}]},
        }
        with pytest.raises(ApiError) as refused:  # straight to the API server: its schema refuses it
            management.create(ops.to_resource(doc))
        assert refused.value.status.code == 422, what
        assert said in str(refused.value.status.message), what
