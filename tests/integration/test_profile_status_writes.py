"""What a ClusterSummary writes for a revision, on the real fleet (ADR 0130): a Deployment that turns
Available within seconds of its apply is reported once, healthy; "applied, waiting for health" is
written only when health takes longer than `summary_pending.UNWRITTEN_FOR`."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import yaml
from lightkube import ApiError, Client
from promotion_support import ControllerThread, registered_controller, wait_for

from fleetwave.controllers.sveltos import summary_pending
from fleetwave.kube import client as kubeclient
from fleetwave.kube import kinds
from fleetwave.local import binaries, fleet
from fleetwave.mgmt import manifests

NAME = "status-writes"
LABEL = "fleetwave.io/cluster-profile"


@pytest.fixture(scope="module")
def controller(
    local_fleet: fleet.FleetState, management: Client, bins: binaries.Binaries
) -> Iterator[ControllerThread]:
    with registered_controller(local_fleet, management, bins.path("helm"), NAME) as thread:
        yield thread


@dataclass
class _Seen:
    """(seconds on the test's clock, observedContentHash, Ready's reason) of each status written."""

    at: float
    content_hash: str
    reason: str


@dataclass
class _StatusWatch:
    """Every status the profile's summaries are written with, from a watch in a thread."""

    kubeconfig: str
    seen: list[_Seen] = field(default_factory=list)
    error: BaseException | None = None
    _stop: threading.Event = field(default_factory=threading.Event)
    _ready: threading.Event = field(default_factory=threading.Event)

    def __enter__(self) -> _StatusWatch:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        assert self._ready.wait(60), "the watch did not start"
        assert self.error is None, self.error
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(10)
        assert self.error is None, self.error

    def _run(self) -> None:
        # Its own client: lightkube clients are not shared across threads.
        with kubeclient.client(kubeclient.config_from_file(self.kubeconfig)) as client:
            try:
                self._watch(client)
            except BaseException as e:  # seen by the test on exit
                self.error = e
                self._ready.set()

    def _watch(self, client: Client) -> None:
        resource, version = kinds.resource("ClusterSummary"), None
        # The module's fixture has just installed the CRD: its storage may still be initializing.
        deadline = time.monotonic() + 30
        while not self._stop.is_set():
            try:
                if version is None:
                    listing = client.list(resource, namespace="*", labels={LABEL: NAME})
                    for summary in listing:
                        self._note(summary)
                    version = str(listing.resourceVersion)
                    self._ready.set()
                # Short server timeouts, so a stop is noticed; each stream resumes where the last
                # ended, so nothing written in between is missed.
                for _event, summary in client.watch(
                    resource, namespace="*", labels={LABEL: NAME}, resource_version=version, server_timeout=2
                ):
                    version = summary.metadata.resourceVersion
                    self._note(summary)
            except ApiError as e:
                if e.status.code not in (404, 429, 500, 503) or time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def _note(self, summary: Any) -> None:
        status = dict(summary.status or {})
        conditions = status.get("conditions") or []
        ready: dict[str, Any] = next((c for c in conditions if c.get("type") == "Ready"), {})
        content_hash, reason = str(status.get("observedContentHash") or ""), str(ready.get("reason") or "")
        last = self.seen[-1] if self.seen else None
        if last is None or (last.content_hash, last.reason) != (content_hash, reason):
            self.seen.append(_Seen(time.monotonic(), content_hash, reason))


def _documents(namespace: str, revision: int) -> list[dict[str, Any]]:
    labels = {"app": "web"}
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": namespace, "labels": labels},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels, "annotations": {"revision": str(revision)}},
                "spec": {"containers": [{"name": "c", "image": "registry.invalid/web:1"}]},
            },
        },
    }
    source = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": f"content-{NAME}", "namespace": "default"},
        "data": {"content.yaml": yaml.safe_dump(deployment)},
    }
    profile = {
        "apiVersion": "fleetwave.io/v1alpha1",
        "kind": "ClusterProfile",
        "metadata": {"name": NAME},
        "spec": {
            "clusterSelector": {"matchLabels": {"env": "dev"}},  # member-1 only
            "policyRefs": [{"kind": "ConfigMap", "name": f"content-{NAME}", "namespace": "default"}],
        },
    }
    return [source, profile]


def _healthy_hash(watch: _StatusWatch, not_this: str = "") -> str | None:
    last = watch.seen[-1] if watch.seen else None
    ok = last is not None and last.reason == "Provisioned" and last.content_hash not in ("", not_this)
    return last.content_hash if ok and last is not None else None


def test_a_revision_available_within_seconds_is_written_once_healthy(
    controller: ControllerThread, management: Client, local_fleet: fleet.FleetState, namespace: str
) -> None:
    hashes: list[str] = []
    with _StatusWatch(local_fleet.cluster(fleet.MANAGEMENT).kubeconfig) as watch:
        try:
            for revision in (1, 2):
                applied_at = time.monotonic()
                manifests.apply(management, _documents(namespace, revision))
                found = wait_for(
                    lambda: _healthy_hash(watch, hashes[-1] if hashes else ""),
                    what=f"revision {revision} reported deployed and healthy",
                    explain=lambda: str(watch.seen),
                )
                hashes.append(found)
                early = [
                    s
                    for s in watch.seen
                    if s.content_hash == found
                    and s.reason != "Provisioned"
                    and s.at - applied_at < summary_pending.UNWRITTEN_FOR
                ]
                # Its Deployment was not Available at the apply (a new generation never is): that was
                # not written, only the verdict was, unless health took longer than the hold.
                assert early == [], watch.seen
        finally:
            try:
                management.delete(kinds.resource("ClusterProfile"), NAME)
            except ApiError as err:
                if err.status.code != 404:
                    raise
    assert len(set(hashes)) == 2


def _fields_by_subresource(summary: Any) -> dict[str, dict[str, Any]]:
    """The field sets the API server records for `summary`, by subresource ('' for the main one)."""
    found: dict[str, dict[str, Any]] = {}
    for entry in summary.metadata.managedFields or []:
        found[entry.subresource or ""] = dict(entry.fieldsV1 or {})
    return found


def _gone(management: Client, name: str) -> bool:
    try:
        management.get(kinds.resource("ClusterProfile"), name)
    except ApiError as err:
        if err.status.code == 404:
            return True
        raise
    return False


def test_a_summarys_managed_fields_name_its_spec_and_its_status_once(
    controller: ControllerThread, management: Client, local_fleet: fleet.FleetState, namespace: str
) -> None:
    """ADR 0146: spec and status are each one value to the API server, so a summary's managedFields
    do not list every field of the profile spec it copies, nor every status field."""
    wait_for(lambda: _gone(management, NAME), what="the profile of the test before withdrawn")
    with _StatusWatch(local_fleet.cluster(fleet.MANAGEMENT).kubeconfig) as watch:
        try:
            manifests.apply(management, _documents(namespace, 1))
            wait_for(lambda: _healthy_hash(watch), what="the summary reported deployed and healthy")
            (summary,) = management.list(
                kinds.resource("ClusterSummary"), namespace="*", labels={LABEL: NAME}
            )
        finally:
            management.delete(kinds.resource("ClusterProfile"), NAME)
    fields = _fields_by_subresource(summary)
    assert fields[""]["f:spec"] == {}, fields[""]
    assert fields["status"] == {"f:status": {}}, fields["status"]
    # Still the whole of both: the spec's copied profile spec, and the status a merge patch wrote.
    assert summary.spec["clusterProfileSpec"]["policyRefs"][0]["name"] == f"content-{NAME}"
    assert summary.status["featureSummaries"][0]["status"] == "Provisioned"
