"""Seed 004's staged update run with a pull member (issue 44): member-3 (canary, order 1) joins
through a real agent process; the run's stages, approval and rollback read the same whichever mode
a member is in. Then the faults: the agent killed mid-stage and back, a second agent for the same
member standing by behind the lease, and unregistering revoking the agent's hub access."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from lightkube import ApiError, Client
from lightkube.models.authorization_v1 import ResourceAttributes, SubjectAccessReviewSpec
from lightkube.resources.authorization_v1 import SubjectAccessReview
from lightkube.resources.coordination_v1 import Lease
from promotion_support import ControllerThread, running_controller, wait_for
from pull_support import AgentProcess, hub_server_and_ca
from test_kubefleet_staged_runs import (
    MEMBER_NS,
    SEED_LABELS,
    apply,
    cm_value,
    cond,
    found,
    get,
    run_doc,
    seed_approve,
    seed_strategy,
    two_snapshots,
)

from fleetwave.api import pullmode
from fleetwave.kube import client as kubeclient
from fleetwave.kube import kinds
from fleetwave.local import binaries, fleet
from fleetwave.mgmt import agent_install, install, manifests, pull_registration, registration

PULL = "member-3"
HUB_NS = pullmode.hub_namespace(f"{MEMBER_NS}/{PULL}")


@pytest.fixture(scope="module")
def agent(
    local_fleet: fleet.FleetState,
    management: Client,
    bins: binaries.Binaries,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[AgentProcess]:
    install.install(management)
    server, ca = hub_server_and_ca(local_fleet)
    workdir = tmp_path_factory.mktemp("pull-kf")
    started = None
    for member in local_fleet.members:
        if member.name == PULL:
            made = pull_registration.register_pull(
                management,
                name=PULL,
                namespace=MEMBER_NS,
                labels=SEED_LABELS[PULL],
                hub_server=server,
                hub_ca=ca,
            )
            (workdir / "hub.kubeconfig").write_bytes(made.hub_kubeconfig)
            started = AgentProcess(
                member, workdir / "hub.kubeconfig", bins.path("helm"), workdir / "agent.log"
            )
            started.start("--cluster-namespace", MEMBER_NS)
        else:
            registration.register(
                management,
                name=member.name,
                namespace=MEMBER_NS,
                kubeconfig=Path(member.kubeconfig).read_bytes(),
                labels=SEED_LABELS[member.name],
            )
    assert started is not None
    try:
        yield started
    finally:
        started.stop()
        for member in local_fleet.members:
            pull_registration.unregister(management, name=member.name, namespace=MEMBER_NS)


@pytest.fixture(scope="module")
def controller(
    agent: AgentProcess, local_fleet: fleet.FleetState, bins: binaries.Binaries, management: Client
) -> Iterator[ControllerThread]:
    with running_controller(local_fleet, bins.path("helm"), "pull-kf") as thread:
        wait_for(lambda: _ready(management), what="the pull member ready (its agent connected)")
        yield thread


def _ready(management: Client) -> bool:
    status = management.get(kinds.resource("MemberCluster"), PULL, namespace=MEMBER_NS).status or {}
    return bool(status.get("ready"))


def _placement(management: Client, prefix: str, hub_ns: str, *, wait: str) -> str:
    """Seed 004's placement with its two snapshots and the strategy `strategy-<hub_ns>`."""
    crp = f"{prefix}-{hub_ns}"
    two_snapshots(management, crp, hub_ns)
    apply(management, seed_strategy(f"strategy-{hub_ns}", wait=wait))
    return crp


def _succeeded(management: Client, run: str) -> bool:
    return cond(get(management, "ClusterStagedUpdateRun", run), "Succeeded").get("status") == "True"


def test_a_staged_run_with_a_pull_member_waits_for_approval_then_rolls_back(
    controller: ControllerThread,
    agent: AgentProcess,
    management: Client,
    members: dict[str, Client],
    hub_ns: str,
) -> None:
    crp = _placement(management, "pull-placement", hub_ns, wait="2s")
    run = f"pull-run-{hub_ns}"
    apply(management, run_doc(run, crp, "1", f"strategy-{hub_ns}"))
    wait_for(
        lambda: found(management, "ClusterApprovalRequest", f"{run}-canary"),
        what="the canary approval request",
        explain=agent.output,
    )
    assert {m: cm_value(c, hub_ns) for m, c in members.items()} == dict.fromkeys(members, "value2")
    status = get(management, "ClusterStagedUpdateRun", run).status
    delivered = status["deliveries"][f"{MEMBER_NS}/{PULL}"]
    assert delivered["appliedAt"] <= status["deliveries"][f"{MEMBER_NS}/member-1"]["appliedAt"], status
    seed_approve(management, "ClusterApprovalRequest", f"{run}-canary")
    wait_for(lambda: _succeeded(management, run), what="run succeeded")

    rollback = f"pull-run-2-{hub_ns}"
    apply(management, run_doc(rollback, crp, "0", f"strategy-{hub_ns}"))
    wait_for(
        lambda: found(management, "ClusterApprovalRequest", f"{rollback}-canary"), what="rollback approval"
    )
    assert cm_value(members[PULL], hub_ns) == "value1"
    seed_approve(management, "ClusterApprovalRequest", f"{rollback}-canary")
    wait_for(lambda: _succeeded(management, rollback), what="rollback succeeded")


def test_the_agent_killed_mid_stage_holds_the_run_with_the_members_name_and_it_resumes(
    controller: ControllerThread,
    agent: AgentProcess,
    management: Client,
    members: dict[str, Client],
    hub_ns: str,
) -> None:
    crp = _placement(management, "pull-fault", hub_ns, wait="1s")
    agent.kill()
    run = f"pull-fault-run-{hub_ns}"
    apply(management, run_doc(run, crp, "1", f"strategy-{hub_ns}"))

    def waiting_message() -> str | None:
        status = get(management, "ClusterStagedUpdateRun", run).status or {}
        entry = (status.get("deliveries") or {}).get(f"{MEMBER_NS}/{PULL}") or {}
        message = str(entry.get("message") or "")
        return message if f"{MEMBER_NS}/{PULL}" in message and "agent" in message else None

    message = wait_for(waiting_message, timeout=150, what="the run naming the pull member it waits for")
    assert cm_value(members[PULL], hub_ns) is None  # nothing reached it while its agent was down
    assert found(management, "ClusterApprovalRequest", f"{run}-canary") is None  # the stage holds
    agent.start("--cluster-namespace", MEMBER_NS)
    wait_for(
        lambda: found(management, "ClusterApprovalRequest", f"{run}-canary"),
        what="the stage done once the agent is back",
        explain=agent.output,
    )
    assert cm_value(members[PULL], hub_ns) == "value2"
    assert "agent" in message


def test_a_second_agent_for_the_member_stands_by_behind_the_lease(
    controller: ControllerThread,
    agent: AgentProcess,
    management: Client,
    local_fleet: fleet.FleetState,
    bins: binaries.Binaries,
    tmp_path: Path,
) -> None:
    member = local_fleet.cluster(PULL)
    second = AgentProcess(member, agent.hub_kubeconfig, bins.path("helm"), tmp_path / "second.log")
    second.start("--cluster-namespace", MEMBER_NS)
    try:
        time.sleep(8)  # long enough for the second agent to sync and try the lease a few times
        lease = management.get(Lease, pullmode.LEASE_NAME, namespace=HUB_NS)
        assert lease.spec.holderIdentity == agent.identity
        assert second.proc is not None
        assert second.proc.poll() is None  # alive, standing by
        assert "is the leader" not in second.output()
    finally:
        second.stop()


def test_unregistering_revokes_the_agents_hub_access_and_leaves_the_member_as_it_is(
    agent: AgentProcess,
    management: Client,
    local_fleet: fleet.FleetState,
    tmp_path: Path,
    members: dict[str, Client],
) -> None:
    server, ca = hub_server_and_ca(local_fleet)
    name = "member-2"  # registered here under another namespace, in pull mode, for this test alone
    made = pull_registration.register_pull(
        management, name=name, namespace="pull-unreg", labels={"x": "y"}, hub_server=server, hub_ca=ca
    )
    hub = kubeclient.client(kubeclient.member_config(made.hub_kubeconfig))
    listed = wait_for(  # the API server may still be initializing the storage of fresh CRDs (429)
        lambda: [list(hub.list(kinds.resource("MemberWork"), namespace=made.hub_namespace))],
        what="the agent reading its own namespace",
    )
    assert listed == [[]]
    with pytest.raises(ApiError) as refused:
        list(hub.list(kinds.resource("MemberWork"), namespace=HUB_NS))  # another member's
    assert refused.value.status.code == 403
    removed = pull_registration.unregister(management, name=name, namespace="pull-unreg")
    assert "membercluster/member-2" in removed
    assert f"namespace/{made.hub_namespace}" in removed

    def revoked() -> bool:
        try:
            list(hub.list(kinds.resource("MemberWork"), namespace=made.hub_namespace))
        except ApiError as e:
            return e.status.code in (401, 403)
        return False

    wait_for(revoked, timeout=60, what="the agent's token revoked")


def _agent_may(management: Client, verb: str, resource: str, group: str, namespace: str | None) -> bool:
    """A SubjectAccessReview for the pull member's agent (its hub ServiceAccount)."""
    user = f"system:serviceaccount:{HUB_NS}:{pullmode.AGENT_NAME}"
    groups = ["system:serviceaccounts", f"system:serviceaccounts:{HUB_NS}", "system:authenticated"]
    return _may(management, user, groups, verb, resource, group, namespace)


def _may(
    client: Client, user: str, groups: list[str], verb: str, resource: str, group: str, namespace: str | None
) -> bool:
    sub = ""
    if "/" in resource:
        resource, sub = resource.split("/", 1)
    attributes = ResourceAttributes(
        verb=verb, resource=resource, subresource=sub or None, group=group, namespace=namespace
    )
    review = SubjectAccessReview(
        spec=SubjectAccessReviewSpec(user=user, groups=groups, resourceAttributes=attributes)
    )
    made = client.create(review)
    return bool(made.status and made.status.allowed)


def _not_granted_within(
    client: Client,
    user: str,
    groups: list[str],
    asks: list[tuple[str, str, str, str | None]],
    *,
    seconds: float,
) -> list[tuple[str, str, str, str | None]]:
    """The asks (verb, resource, group, namespace) still not allowed once `seconds` have passed; []
    as soon as every one is."""
    deadline = time.monotonic() + seconds
    while True:
        refused = [a for a in asks if not _may(client, user, groups, *a)]
        if not refused or time.monotonic() > deadline:
            return refused
        time.sleep(0.2)


def test_the_agents_hub_identity_reads_its_own_work_and_writes_its_reports_and_nothing_else(
    agent: AgentProcess, management: Client
) -> None:
    other = pullmode.hub_namespace(f"{MEMBER_NS}/member-1")
    allowed = [
        ("list", "memberworks", kinds.GROUP, HUB_NS),
        ("watch", "memberworks", kinds.GROUP, HUB_NS),
        ("update", "memberworks/status", kinds.GROUP, HUB_NS),
        ("create", "leases", "coordination.k8s.io", HUB_NS),
        ("create", "events", "", HUB_NS),
    ]
    denied = [
        ("get", "secrets", "", HUB_NS),  # not even the Secrets of its own namespace
        ("list", "secrets", "", None),
        ("list", "memberworks", kinds.GROUP, other),  # another member's work
        ("list", "memberworks", kinds.GROUP, None),
        ("update", "memberworks", kinds.GROUP, HUB_NS),  # the work itself is the hub's
        ("delete", "memberworks", kinds.GROUP, HUB_NS),
        ("update", "memberworks/status", kinds.GROUP, other),
        ("update", "leases", "coordination.k8s.io", other),
        ("list", "clustersummaries", kinds.GROUP, MEMBER_NS),
        ("list", "configmaps", "", "fleetwave-system"),  # content snapshots
        ("create", "serviceaccounts/token", "", HUB_NS),
    ]
    for verb, resource, group, namespace in allowed:
        assert _agent_may(management, verb, resource, group, namespace), (verb, resource, namespace)
    for verb, resource, group, namespace in denied:
        assert not _agent_may(management, verb, resource, group, namespace), (verb, resource, namespace)


def test_the_agents_member_rights_apply_what_profiles_deliver_but_never_impersonate_or_escalate(
    agent: AgentProcess, members: dict[str, Client]
) -> None:
    """The member-side rights `register --pull --agent-manifests` and the agent chart grant, applied
    to a real member and asked of its API server."""
    member, namespace = members["member-1"], "fa-sar"
    docs = agent_install.member_manifests(
        cluster="member-1",
        cluster_namespace=MEMBER_NS,
        hub_kubeconfig=b"x",
        image="example/fleetwave:1",
        namespace=namespace,
    )
    rbac = [
        d for d in docs if d["kind"] in ("Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding")
    ]
    manifests.apply(member, rbac)
    user = f"system:serviceaccount:{namespace}:{agent_install.NAME}"
    groups = ["system:serviceaccounts", f"system:serviceaccounts:{namespace}", "system:authenticated"]
    try:
        allowed = [
            ("create", "deployments", "apps", "default"),
            ("patch", "customresourcedefinitions", "apiextensions.k8s.io", None),
            ("create", "clusterroles", "rbac.authorization.k8s.io", None),
            ("delete", "secrets", "", "default"),
        ]
        denied = [
            ("impersonate", "users", "", None),
            ("impersonate", "serviceaccounts", "", "default"),
            ("escalate", "clusterroles", "rbac.authorization.k8s.io", None),
            ("bind", "clusterroles", "rbac.authorization.k8s.io", None),
            ("approve", "signers", "certificates.k8s.io", None),
        ]
        # The API server's authorizer learns new roles and bindings from its own watch, a moment
        # after they are written: the grants are asked until they hold (or the bound passes).
        assert _not_granted_within(member, user, groups, allowed, seconds=15.0) == []
        for verb, resource, group, ns in denied:
            assert not _may(member, user, groups, verb, resource, group, ns), (verb, resource, ns)
    finally:
        for doc in reversed(rbac):
            kind = kinds.builtin_resource(doc["apiVersion"], doc["kind"])
            member.delete(kind, doc["metadata"]["name"], namespace=doc["metadata"].get("namespace"))


def test_a_rotated_hub_credential_reaches_the_agent_without_a_restart_and_revokes_the_old_one(
    controller: ControllerThread,
    agent: AgentProcess,
    management: Client,
    members: dict[str, Client],
    local_fleet: fleet.FleetState,
    hub_ns: str,
) -> None:
    server, ca = hub_server_and_ca(local_fleet)
    old = agent.hub_kubeconfig.read_bytes()
    made = pull_registration.register_pull(
        management,
        name=PULL,
        namespace=MEMBER_NS,
        labels=SEED_LABELS[PULL],
        hub_server=server,
        hub_ca=ca,
        rotate=True,
    )
    swapped = agent.hub_kubeconfig.with_suffix(".new")
    swapped.write_bytes(made.hub_kubeconfig)
    swapped.replace(agent.hub_kubeconfig)  # as a Secret volume swaps its files
    assert agent.proc is not None
    pid = agent.proc.pid

    def refused() -> bool:
        try:
            list(
                kubeclient.client(kubeclient.member_config(old)).list(
                    kinds.resource("MemberWork"), namespace=HUB_NS
                )
            )
        except ApiError as e:
            return e.status.code == 401
        return False

    wait_for(refused, timeout=60, what="the old credential revoked")
    crp = _placement(management, "pull-rotated", hub_ns, wait="1s")
    run = f"pull-rotated-run-{hub_ns}"
    apply(management, run_doc(run, crp, "1", f"strategy-{hub_ns}"))
    wait_for(
        lambda: found(management, "ClusterApprovalRequest", f"{run}-canary"),
        what="the pull member delivered with the new credential",
        explain=agent.output,
    )
    assert cm_value(members[PULL], hub_ns) == "value2"
    assert (agent.proc.pid, agent.proc.poll()) == (pid, None)  # the same process, still running
    assert "the hub credential changed: reconnecting with it" in agent.output()
