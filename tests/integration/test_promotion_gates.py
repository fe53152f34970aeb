"""Promotion gates on the real local fleet, with fleetwave's own manifests of the seed flows:

- seed 000's core-app rollout: staging deploys a validation Job (preHealthCheckDeployment) and only
  promotes once it completed, judged by a CEL postDelayHealthCheck in the docs' `type`/`expression`
  form;
- a promotionWindow computed from the test's own clock holds the next stage until it opens;
- `automaticReset: false` keeps a manual approval for later revisions.
"""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from lightkube import ApiError, Client
from lightkube.resources.batch_v1 import Job
from lightkube.resources.core_v1 import ConfigMap, Pod
from promotion_support import (
    ControllerThread,
    deleted_after,
    promotion,
    registered,
    running_controller,
    wait_for,
)

from fleetwave.kube import client as kubeclient
from fleetwave.kube import kinds
from fleetwave.local import binaries, fleet
from fleetwave.mgmt import manifests

API = "config.projectsveltos.io/v1beta1"
CEL_JOB_COMPLETE = (
    "self.status.succeeded >= 1 &&\n"
    "self.status.conditions.filter(c, c.type == 'Complete' && c.status == 'True').size() == 1\n"
)


@pytest.fixture(scope="module")
def controller(
    local_fleet: fleet.FleetState, management: Client, bins: binaries.Binaries
) -> Iterator[ControllerThread]:
    with (
        registered(management, local_fleet),
        running_controller(local_fleet, bins.path("helm"), "gates") as thread,
    ):
        yield thread


def content(name: str, objects: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "default"},
        "data": {"content.yaml": yaml.safe_dump_all(objects)},
    }


def app(namespace: str, name: str, version: str) -> dict[str, Any]:
    meta = {"name": name, "namespace": namespace}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"version": version}}


def selector(env: str) -> dict[str, Any]:
    return {"matchLabels": {"env": env}}


def value(member: Client, namespace: str, name: str) -> str | None:
    try:
        return (member.get(ConfigMap, name, namespace=namespace).data or {}).get("version")
    except ApiError as e:
        if e.status.code == 404:
            return None
        raise


def dev_then_staging(name: str, dev_trigger: dict[str, Any]) -> dict[str, Any]:
    """ConfigMap `name`'s content through dev (its trigger gates staging), then staging."""
    return {
        "apiVersion": API,
        "kind": "ClusterPromotion",
        "metadata": {"name": name},
        "spec": {
            "profileSpec": {
                "syncMode": "Continuous",
                "policyRefs": [{"kind": "ConfigMap", "name": name, "namespace": "default"}],
            },
            "stages": [
                {"name": "dev", "clusterSelector": selector("dev"), "trigger": dev_trigger},
                {"name": "staging", "clusterSelector": selector("staging")},
            ],
        },
    }


def apply(management: Client, *docs: dict[str, Any]) -> None:
    manifests.apply(management, manifests.documents(yaml.safe_dump_all(docs)))


def test_core_app_rollout_waits_for_its_validation_job_judged_by_cel(
    controller: ControllerThread,
    management: Client,
    members: dict[str, Client],
    namespace: str,
    local_fleet: fleet.FleetState,
) -> None:
    name, job = "core-app-rollout", "validation-job-stage-staging"
    validation = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": job, "namespace": "default"},
        "spec": {
            "backoffLimit": 0,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "validate", "image": "registry.invalid/validate:1"}],
                }
            },
        },
    }
    doc = {
        "apiVersion": API,
        "kind": "ClusterPromotion",
        "metadata": {"name": name},
        "spec": {
            "profileSpec": {
                "syncMode": "Continuous",
                "policyRefs": [{"kind": "ConfigMap", "name": "core-app", "namespace": "default"}],
            },
            "stages": [
                {
                    "name": "staging",
                    "clusterSelector": selector("staging"),
                    "trigger": {
                        "auto": {
                            "delay": "2s",
                            "preHealthCheckDeployment": {
                                "configMapRefs": [{"name": "validation-job-staging", "namespace": "default"}]
                            },
                            "postDelayHealthChecks": [
                                {
                                    "type": "Job",
                                    "group": "batch",
                                    "version": "v1",
                                    "name": job,
                                    "namespace": "default",
                                    "evaluateCEL": [{"name": "success", "expression": CEL_JOB_COMPLETE}],
                                }
                            ],
                        }
                    },
                },
                {"name": "production", "clusterSelector": selector("prod")},
            ],
        },
    }
    apply(
        management,
        content("core-app", [app(namespace, "core-app", "1")]),
        content("validation-job-staging", [validation]),
        doc,
    )
    staging = next(m.kubeconfig for m in local_fleet.members if m.name == "member-2")
    with deleted_after(management, name), JobWatch(staging, job) as watch:
        wait_for(
            lambda: value(members["member-3"], namespace, "core-app") == "1", what="production delivered"
        )
        # Production came only after the Job ran on staging and the CEL rule held there.
        assert watch.error is None, watch.error
        assert watch.complete_at is not None, "the validation Job never completed on staging"
        # A pass delivers before it writes its status: the record of the start may follow the delivery.
        started = wait_for(
            lambda: {s["name"]: s for s in promotion(management, name).status["rollout"]["stages"]}[
                "production"
            ].get("startedAt"),
            what="production's start recorded",
        )
        production_started = dt.datetime.fromisoformat(started.replace("Z", "+00:00"))
        assert production_started >= watch.complete_at - dt.timedelta(seconds=1)
        assert job not in _jobs(members["member-3"])  # verified on staging only
        assert value(members["member-1"], namespace, "core-app") is None  # dev is in no stage
        # The verification deployment exists only while the stage is checked: it is withdrawn after.
        wait_for(lambda: job not in _jobs(members["member-2"]), what="validation Job withdrawn")
        # ... and its Pods with it: a withdrawal cascades, it does not orphan what the Job ran.
        wait_for(lambda: not _job_pods(members["member-2"], job), what="validation Job's Pods removed")

        # A pass that decided from a cache older than the stage's success may deploy the verification
        # profile once more: it is removed again, because the stage is done, not only on the transition.
        verification = f"preverification-{name}-staging"
        manifests.apply(
            management,
            [
                {
                    "apiVersion": API,
                    "kind": "ClusterProfile",
                    "metadata": {
                        "name": verification,
                        "labels": {"fleetwave.io/promotion": name, "fleetwave.io/stage": "staging"},
                    },
                    "spec": {"clusterSelector": {"matchLabels": {"env": "no-such-env"}}},
                }
            ],
        )
        wait_for(
            lambda: not _exists(management, "ClusterProfile", verification),
            what="the stray verification profile removed",
        )


def _exists(client: Client, kind: str, name: str) -> bool:
    try:
        client.get(kinds.resource(kind), name)
    except ApiError as err:
        if err.status.code == 404:
            return False
        raise
    return True


def _jobs(member: Client) -> set[str]:
    return {j.metadata.name for j in member.list(Job, namespace="default")}


def _job_pods(member: Client, job: str) -> list[str]:
    pods = member.list(Pod, namespace="default", labels={"job-name": job})
    return [p.metadata.name for p in pods if not (p.metadata and p.metadata.deletionTimestamp)]


class JobWatch:
    """Watches one Job on a member in the background: when it was first seen complete. A watch, not
    polling: the Job is withdrawn right after the check that reads it passes (member watches make
    that a matter of milliseconds), so only the stream of its changes is sure to show it complete."""

    def __init__(self, kubeconfig: str, name: str) -> None:
        self.kubeconfig, self.name = kubeconfig, name
        self.complete_at: dt.datetime | None = None
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> JobWatch:
        self._thread.start()
        assert self._started.wait(30), "the Job watch did not start"
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        # Its own client: lightkube clients are not shared across threads.
        with kubeclient.client(kubeclient.config_from_file(self.kubeconfig)) as member:
            try:
                self._watch(member)
            except BaseException as e:  # seen by the test through `error`
                self.error = e
                self._started.set()

    def _watch(self, member: Client) -> None:
        listing = member.list(Job, namespace="default", fields={"metadata.name": self.name})
        for job in listing:
            self._note(job)
        version = listing.resourceVersion
        self._started.set()
        while not self._stop.is_set() and self.complete_at is None:
            # Short server timeouts, so a stop is noticed; each stream resumes where the last ended.
            for _event, job in member.watch(
                Job,
                namespace="default",
                fields={"metadata.name": self.name},
                resource_version=version,
                server_timeout=2,
            ):
                version = job.metadata.resourceVersion
                self._note(job)

    def _note(self, job: Job) -> None:
        conditions = job.status.conditions if job.status else None
        if self.complete_at is None and any(
            c.type == "Complete" and c.status == "True" for c in conditions or []
        ):
            self.complete_at = dt.datetime.now(dt.UTC)


def test_a_closed_promotion_window_holds_the_next_stage_until_it_opens(
    controller: ControllerThread, management: Client, members: dict[str, Client], namespace: str
) -> None:
    name = "windowed"
    # The window opens at the first whole minute at least 20 s from now (the test's own clock) and
    # stays open for five minutes.
    opens = (dt.datetime.now(dt.UTC) + dt.timedelta(seconds=80)).replace(second=0, microsecond=0)
    closes = opens + dt.timedelta(minutes=5)
    window = {"from": f"{opens.minute} {opens.hour} * * *", "to": f"{closes.minute} {closes.hour} * * *"}
    doc = dev_then_staging(name, {"auto": {"promotionWindow": window}})
    apply(management, content(name, [app(namespace, name, "1")]), doc)
    with deleted_after(management, name):
        wait_for(lambda: value(members["member-1"], namespace, name) == "1", what="dev delivered")
        waiting = wait_for(
            lambda: next(
                (
                    s["currentStatusDescription"]
                    for s in (promotion(management, name).status or {}).get("stages") or []
                    if "waiting for promotion window" in str(s.get("currentStatusDescription"))
                ),
                None,
            ),
            what="the window reported closed",
        )
        said = waiting.partition("(opens ")[2].partition(")")[0]
        assert dt.datetime.fromisoformat(said.replace("Z", "+00:00")) == opens
        if dt.datetime.now(dt.UTC) < opens - dt.timedelta(seconds=2):
            assert value(members["member-2"], namespace, name) is None  # held while closed
        wait_for(
            lambda: value(members["member-2"], namespace, name) == "1", timeout=180, what="staging delivered"
        )
        assert dt.datetime.now(dt.UTC) >= opens


def test_automatic_reset_false_keeps_a_manual_approval_for_the_next_revision(
    controller: ControllerThread, management: Client, members: dict[str, Client], namespace: str
) -> None:
    name = "sticky"
    doc = dev_then_staging(name, {"manual": {"approved": True, "automaticReset": False}})
    apply(management, content(name, [app(namespace, name, "1")]), doc)
    with deleted_after(management, name):
        wait_for(lambda: value(members["member-2"], namespace, name) == "1", what="revision 1 in staging")
        apply(management, content(name, [app(namespace, name, "2")]))  # a new revision
        wait_for(lambda: value(members["member-2"], namespace, name) == "2", what="revision 2 in staging")
        trigger = promotion(management, name).spec["stages"][0]["trigger"]["manual"]
        assert trigger["approved"] is True  # never reset: the approval holds for later revisions


def test_a_manual_stages_pre_health_check_deployment_lands_before_its_approval(
    controller: ControllerThread,
    management: Client,
    members: dict[str, Client],
    namespace: str,
    local_fleet: fleet.FleetState,
) -> None:
    """A manual trigger's `preHealthCheckDeployment` is deployed to its stage's clusters once they
    are updated, while the approval still holds the next stage."""
    name, smoke = "manual-smoke", "manual-smoke-check"
    env = {c.labels.get("env"): c.name for c in local_fleet.members}
    trigger = {
        "manual": {
            "approved": False,
            "preHealthCheckDeployment": {"configMapRefs": [{"name": smoke, "namespace": "default"}]},
        }
    }
    apply(
        management,
        content(name, [app(namespace, name, "1")]),
        content(smoke, [app(namespace, smoke, "smoke")]),
        dev_then_staging(name, trigger),
    )
    with deleted_after(management, name):
        dev, staging = members[env["dev"]], members[env["staging"]]
        wait_for(lambda: value(dev, namespace, smoke) == "smoke" or None, what="the smoke check on dev")
        assert value(dev, namespace, name) == "1"
        assert value(staging, namespace, name) is None  # the approval still holds staging
        assert value(staging, namespace, smoke) is None  # dev's check goes to dev only
        approved = dev_then_staging(name, {"manual": {**trigger["manual"], "approved": True}})
        apply(management, approved)
        wait_for(lambda: value(staging, namespace, name) == "1" or None, what="staging after the approval")
