"""Support for pull-mode integration tests: members registered as the `registered` helper does, but
some of them in pull mode, each with a real `fleetwave agent run` process on its own kubeconfig."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from lightkube import Client
from promotion_support import ENVS

from fleetwave.api import pullmode
from fleetwave.kube import client as kubeclient
from fleetwave.kube import kinds
from fleetwave.local import agents as local_agents
from fleetwave.local import fleet, processes
from fleetwave.mgmt import install, pull_registration, registration

NAMESPACE = "fleetwave-system"
LEASE_SECONDS = 8


class AgentProcess:
    """`fleetwave agent run` for one member, as a real process (killed without warning when asked)."""

    def __init__(
        self,
        member: fleet.ClusterInfo,
        hub_kubeconfig: Path,
        helm: str,
        log: Path,
        member_kubeconfig: Path | None = None,
    ) -> None:
        self.member, self.hub_kubeconfig, self.helm, self.log = member, hub_kubeconfig, helm, log
        # The member as the agent reaches it: its own ServiceAccount when given, else the admin's.
        self.member_kubeconfig = str(member_kubeconfig or member.kubeconfig)
        self.proc: subprocess.Popen[bytes] | None = None
        self.generation = 0

    @property
    def identity(self) -> str:
        return f"agent-{self.member.name}-{self.generation}"

    def start(self, *extra: str) -> None:
        self.generation += 1
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "fleetwave",
                    "agent",
                    "run",
                    "--cluster",
                    self.member.name,
                    "--hub-kubeconfig",
                    str(self.hub_kubeconfig),
                    "--kubeconfig",
                    self.member_kubeconfig,
                    "--helm",
                    self.helm,
                    "--metrics-port",
                    str(processes.free_port()),
                    "--health-port",
                    str(processes.free_port()),
                    "--identity",
                    self.identity,
                    # A short lease: a killed agent is taken for gone within seconds, not 45.
                    "--lease-duration",
                    str(LEASE_SECONDS),
                    *extra,
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(30)

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-6000:]


def hub_server_and_ca(state: fleet.FleetState) -> tuple[str, bytes | None]:
    config = kubeclient.config_from_file(state.cluster(fleet.MANAGEMENT).kubeconfig)
    return kubeclient.server_and_ca(config)


@contextmanager
def mixed_members(
    management: Client, state: fleet.FleetState, pull: tuple[str, ...], helm: str, workdir: Path
) -> Iterator[dict[str, AgentProcess]]:
    """fleetwave installed; the members registered as dev, staging and prod, those named in `pull`
    in pull mode with a running agent each (yielded by member name); all unregistered afterwards."""
    install.install(management)
    server, ca = hub_server_and_ca(state)
    agents: dict[str, AgentProcess] = {}
    for member in state.members:
        labels = {"env": ENVS[member.name]}
        if member.name in pull:
            made = pull_registration.register_pull(
                management, name=member.name, namespace=NAMESPACE, labels=labels, hub_server=server, hub_ca=ca
            )
            path = workdir / f"{member.name}-hub.kubeconfig"
            path.write_bytes(made.hub_kubeconfig)
            own = local_agents.member_kubeconfig(state, member)  # the member's audit log tells it apart
            agents[member.name] = AgentProcess(member, path, helm, workdir / f"{member.name}-agent.log", own)
            agents[member.name].start()
        else:
            registration.register(
                management,
                name=member.name,
                namespace=NAMESPACE,
                kubeconfig=Path(member.kubeconfig).read_bytes(),
                labels=labels,
            )
    try:
        yield agents
    finally:
        for agent in agents.values():
            agent.stop()
        for member in state.members:
            pull_registration.unregister(management, name=member.name, namespace=NAMESPACE)


def work_of(management: Client, member: str) -> list[dict[str, Any]]:
    namespace = pullmode.hub_namespace(f"{NAMESPACE}/{member}")
    return [w.to_dict() for w in management.list(kinds.resource("MemberWork"), namespace=namespace)]
