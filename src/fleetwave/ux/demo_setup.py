"""The demo's building blocks: a management cluster ready to roll out, and what the members run.

Install + register (what `fleetwave install` and `fleetwave cluster register` do), the seed-like
ClusterPromotion manifest (upstream apiVersion), the controller started in-process, and the chart
version each member ends up running. Shared by `fleetwave demo`, its tests and bench_gates.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from fleetwave.controllers import app as controllers
from fleetwave.kube import client as kubeclient
from fleetwave.kube import kinds, ops, sync_ops
from fleetwave.kube.client import AsyncClient, Client
from fleetwave.local import fleet, processes
from fleetwave.mgmt import install, manifests, registration

ENVS = ("dev", "staging", "prod")


@dataclass(frozen=True, slots=True)
class DemoConfig:
    promotion: str = "hello-rollout"
    member_namespace: str = install.NAMESPACE  # where MemberClusters are registered
    release: str = "hello"
    release_namespace: str = "hello"
    extra_labels: Mapping[str, str] = field(default_factory=dict)  # isolates runs sharing a fleet
    dev_delay: str = "5s"
    approve_after: float = 3.0
    upgrade_to: str | None = "1.1.0"
    timeout: float = 240.0  # per rollout


def install_and_register(client: Client, state: fleet.FleetState, config: DemoConfig) -> list[str]:
    """CRDs + RBAC, then each member registered with env=dev/staging/prod (+ extra labels)."""
    install.install(client)
    lines = []
    for member, env in zip(state.members, ENVS, strict=False):
        labels = {"env": env, **config.extra_labels}
        with open(member.kubeconfig, "rb") as f:
            probe = registration.register(
                client,
                name=member.name,
                namespace=config.member_namespace,
                kubeconfig=f.read(),
                labels=labels,
            ).probe
        ready = f"ready, Kubernetes {probe.version}" if probe.ready else f"NOT ready: {probe.message}"
        lines.append(
            f"membercluster/{member.name} {','.join(f'{k}={v}' for k, v in labels.items())} ({ready})"
        )
    return lines


def promotion_manifest(config: DemoConfig, repo_url: str, version: str) -> str:
    """A seed-002-like ClusterPromotion: dev (auto, delay), staging (manual), production."""

    def selector(env: str) -> dict[str, Any]:
        return {"matchLabels": {"env": env, **config.extra_labels}}

    chart = {
        "repositoryURL": repo_url,
        "repositoryName": "demo",
        "chartName": "demo/hello",
        "chartVersion": version,
        "releaseName": config.release,
        "releaseNamespace": config.release_namespace,
        "helmChartAction": "Install",
        "values": "replicas: 2\nmessage: hello from fleetwave\n",
    }
    doc = {
        "apiVersion": "config.projectsveltos.io/v1beta1",
        "kind": "ClusterPromotion",
        "metadata": {"name": config.promotion},
        "spec": {
            "profileSpec": {"syncMode": "Continuous", "helmCharts": [chart]},
            "stages": [
                {
                    "name": "dev",
                    "clusterSelector": selector("dev"),
                    "trigger": {"auto": {"delay": config.dev_delay}},
                },
                {
                    "name": "staging",
                    "clusterSelector": selector("staging"),
                    "trigger": {"manual": {"approved": False, "automaticReset": True}},
                },
                {"name": "production", "clusterSelector": selector("prod")},
            ],
        },
    }
    return yaml.safe_dump(doc, sort_keys=False)


def apply_manifest(client: Client, text: str) -> list[manifests.Applied]:
    return manifests.apply(client, manifests.documents(text))


@dataclass
class RunningController:
    manager: Any
    task: asyncio.Task[None]

    async def stop(self) -> None:
        self.manager.stop()
        try:
            await asyncio.wait_for(self.task, timeout=30)
        except (TimeoutError, asyncio.CancelledError):
            self.task.cancel()


def start_controller(client: AsyncClient, helm: str) -> RunningController:
    """The whole controller (informers, reconcilers, leader election, probes) as an asyncio task."""
    settings = controllers.Settings(
        helm_binary=helm,
        metrics_port=processes.free_port(),
        health_port=processes.free_port(),
        leader_election=True,
        allow_loopback_targets=True,  # the demo's chart repository listens on 127.0.0.1
    )
    manager = controllers.build(client, settings, handle_signals=False)
    return RunningController(manager, asyncio.create_task(manager.run(), name="fleetwave-controller"))


def deployed_versions(state: fleet.FleetState, config: DemoConfig) -> dict[str, str]:
    """Per member: the chart version its Deployment runs, read from the member itself."""
    out = {}
    deployment = kinds.builtin_resource("apps/v1", "Deployment")
    for member in state.members:
        client = kubeclient.client(kubeclient.config_from_file(member.kubeconfig))
        try:
            d = sync_ops.get(client, deployment, config.release, namespace=config.release_namespace)
            labels = (d.metadata.labels if d is not None and d.metadata else None) or {}
            out[member.name] = "absent" if d is None else labels.get("app.kubernetes.io/version", "?")
        except ops.ApiError as e:
            out[member.name] = f"error: {ops.message_of(e)}"
        finally:
            client.close()
    return out
