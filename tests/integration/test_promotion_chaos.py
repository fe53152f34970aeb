"""The controller killed with SIGKILL at random moments of a rollout and restarted: the rollout
completes, no gate is skipped, no stage is touched out of order. A member's API server that stops
answering mid-stage: the stage waits with a clear message and carries on once it answers again."""

from __future__ import annotations

import datetime as dt
import os
import random
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
import yaml
from lightkube import ApiError, Client
from lightkube.types import PatchType
from promotion_support import (
    ControllerProcess,
    chart_version,
    deleted_after,
    registered,
    service_account_kubeconfig,
    stage_phases,
    status,
    wait_for,
)

from fleetwave.kube import client as kubeclient
from fleetwave.kube import kinds
from fleetwave.local import binaries, chartrepo, fleet
from fleetwave.mgmt import manifests

CHARTS = Path(__file__).resolve().parents[1] / "charts"


@pytest.fixture(scope="module")
def setup(local_fleet: fleet.FleetState, management: Client) -> Iterator[None]:
    with registered(management, local_fleet):
        yield


@pytest.fixture
def controller(
    setup: None, local_fleet: fleet.FleetState, bins: binaries.Binaries, tmp_path: Path
) -> Iterator[ControllerProcess]:
    # The controller runs as the installed ServiceAccount (least-privilege RBAC), as in production.
    kubeconfig = tmp_path / "controller.kubeconfig"
    kubeconfig.write_bytes(service_account_kubeconfig(local_fleet.cluster(fleet.MANAGEMENT).kubeconfig))
    kubeconfig.chmod(0o600)
    ctl = ControllerProcess(
        str(kubeconfig),
        bins.path("helm"),
        tmp_path / "ctl.log",
        identity="chaos",
        extra=("--lease-duration", "3"),
    )
    ctl.start()
    yield ctl
    ctl.stop()


@pytest.fixture(scope="module")
def repo(bins: binaries.Binaries, tmp_path_factory: pytest.TempPathFactory) -> Iterator[chartrepo.ChartRepo]:
    with chartrepo.serve(
        bins.path("helm"), tmp_path_factory.mktemp("chaos-charts"), [(CHARTS / "hello", "1.0.0")]
    ) as r:
        yield r


class StageWatch:
    """Polls the stage profiles in the background and records when each first appeared."""

    def __init__(self, kubeconfig: str, promotion: str) -> None:
        self.kubeconfig, self.promotion = kubeconfig, promotion
        self.first_seen: dict[str, float] = {}
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> StageWatch:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        # Its own client: lightkube clients are not shared across threads.
        with kubeclient.client(kubeclient.config_from_file(self.kubeconfig)) as client:
            while not self._stop.is_set():
                try:
                    self._poll(client)
                except (ApiError, httpx2.HTTPStatusError):  # 429 while the API server warms up
                    pass
                except BaseException as e:
                    self.error = e
                    return
                time.sleep(0.1)

    def _poll(self, client: Client) -> None:
        selector = {"fleetwave.io/promotion": self.promotion}
        for p in client.list(kinds.resource("ClusterProfile"), labels=selector):
            self.first_seen.setdefault(p.metadata.labels["fleetwave.io/stage"], time.time())


def doc(name: str, url: str) -> dict[str, Any]:
    chart = {
        "repositoryURL": url,
        "repositoryName": "local",
        "chartName": "local/hello",
        "chartVersion": "1.0.0",
        "releaseName": name,
        "releaseNamespace": name,
    }
    return {
        "apiVersion": "fleetwave.io/v1alpha1",
        "kind": "ClusterPromotion",
        "metadata": {"name": name},
        "spec": {
            "profileSpec": {"helmCharts": [chart]},
            "stages": [
                {
                    "name": "dev",
                    "clusterSelector": {"matchLabels": {"env": "dev"}},
                    "trigger": {"auto": {"delay": "6s"}},
                },
                {
                    "name": "staging",
                    "clusterSelector": {"matchLabels": {"env": "staging"}},
                    "trigger": {"manual": {"approved": False}},
                },
                {"name": "production", "clusterSelector": {"matchLabels": {"env": "prod"}}},
            ],
        },
    }


def test_sigkill_at_random_moments_never_skips_a_gate_or_reorders_stages(
    controller: ControllerProcess, management: Client, members: dict[str, Client], repo: chartrepo.ChartRepo
) -> None:
    name = "chaos"
    rng = random.Random(20261122)
    manifests.apply(management, manifests.documents(yaml.safe_dump(doc(name, repo.url))))
    watcher = StageWatch(controller.kubeconfig, name)
    with deleted_after(management, name), watcher as watch:
        applied = time.time()
        for _ in range(3):  # kills while dev delivers, during the delay, around the staging gate
            time.sleep(rng.uniform(0.5, 3.0))
            controller.kill()
            time.sleep(rng.uniform(0.0, 1.0))
            controller.start()
        wait_for(lambda: stage_phases(management, name).get("staging") == "WaitingAfter", what="staging gate")
        time.sleep(2)
        assert "production" not in watch.first_seen, "production was touched before its approval"
        controller.kill()
        approved_at = time.time()
        patch = [{"op": "replace", "path": "/spec/stages/1/trigger/manual/approved", "value": True}]
        management.patch(kinds.resource("ClusterPromotion"), name, patch, patch_type=PatchType.JSON)
        controller.start()
        wait_for(
            lambda: stage_phases(management, name).get("production") == "Succeeded", what="production done"
        )

        assert watch.error is None, watch.error
        record = {s["name"]: s for s in status(management, name)["rollout"]["stages"]}
        t = {k: dt.datetime.fromisoformat(v["deliveredAt"].replace("Z", "+00:00")) for k, v in record.items()}
        started = {
            k: dt.datetime.fromisoformat(v["startedAt"].replace("Z", "+00:00")) for k, v in record.items()
        }
        assert started["staging"] - t["dev"] >= dt.timedelta(seconds=6), "the dev delay was cut short"
        assert watch.first_seen["dev"] >= applied - 1
        assert watch.first_seen["staging"] - watch.first_seen["dev"] >= 6 - 1
        assert watch.first_seen["production"] >= approved_at
        assert {m: chart_version(c, name, name) for m, c in members.items()} == {
            "member-1": "1.0.0",
            "member-2": "1.0.0",
            "member-3": "1.0.0",
        }


def test_a_member_that_stops_answering_holds_its_stage_with_a_clear_message_then_resumes(
    controller: ControllerProcess,
    management: Client,
    members: dict[str, Client],
    repo: chartrepo.ChartRepo,
    local_fleet: fleet.FleetState,
) -> None:
    name = "flaky-member"
    body = doc(name, repo.url)
    body["spec"]["stages"][1]["trigger"] = {"auto": {}}
    apiserver = next(p for p in local_fleet.processes if p.name == "member-3/apiserver")
    os.killpg(apiserver.pid, signal.SIGSTOP)  # a hung API server: connections open, nothing answers
    try:
        manifests.apply(management, manifests.documents(yaml.safe_dump(body)))

        def held() -> str | None:
            stages = {s["name"]: s for s in status(management, name).get("stages") or []}
            text = str(stages.get("production", {}).get("currentStatusDescription", ""))
            # Either the probe already marked the member not ready (it is then never started), or a
            # delivery in flight found it unreachable: both must name the member and say why.
            waiting = "unreachable" in text or "to become ready" in text
            return text if "member-3" in text and waiting else None

        wait_for(held, timeout=180, what="production waiting on the hung member")
        assert stage_phases(management, name)["production"] != "Succeeded"
    finally:
        os.killpg(apiserver.pid, signal.SIGCONT)
    with deleted_after(management, name):
        wait_for(
            lambda: stage_phases(management, name).get("production") == "Succeeded",
            timeout=180,
            what="production done once the member answers",
        )
        assert chart_version(members["member-3"], name, name) == "1.0.0"
