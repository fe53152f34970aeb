"""Seed 004 (KubeFleet's staged update how-to) run verbatim against fleetwave with `--upstream-apis`:
every command goes through bash and the real `kubectl` (heredocs, `$(date ...)`, `--patch-file`,
`kubectl edit` with an editor that changes value1 to value2), and the printed tables are checked
column by column. The seed's objects are its own, re-indented (tests/unit/api/seed004_objects.yaml).

Members are `cluster.kubernetes-fleet.io` MemberClusters labelled as the seed's fleet (member1:
environment=canary, order=2; member2: environment=staging; member3: environment=canary, order=1)
whose kubeconfigs are where fleetwave looks for them (`<name>-kubeconfig` in fleetwave-system).
"""

from __future__ import annotations

import base64
import os
import re
import subprocess
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import upstream_support
import yaml
from lightkube import ApiError, Client
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.apps_v1 import Deployment
from lightkube.resources.core_v1 import ConfigMap, Namespace
from promotion_support import ControllerThread, settings, wait_for

from fleetwave.api import families, snapshot_admission
from fleetwave.controllers.fleet import members as member_rules
from fleetwave.local import binaries, fleet
from fleetwave.mgmt import install

SEED_OBJECTS = Path(__file__).resolve().parents[1] / "unit" / "api" / "seed004_objects.yaml"
SEED_COMMANDS = Path(__file__).with_name("seed004_commands.txt")
# The seed's fleet, on the local members.
LABELS = {
    "member-1": {"environment": "canary", "order": "2"},
    "member-2": {"environment": "staging"},
    "member-3": {"environment": "canary", "order": "1"},
}


def seed_command(name: str) -> str:
    for line in SEED_COMMANDS.read_text(encoding="utf-8").splitlines():
        key, _, command = line.partition("\t")
        if key == name:
            return command
    raise KeyError(name)


def seed_objects() -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(SEED_OBJECTS.read_text(encoding="utf-8")) if d]


class Shell:
    """bash with the management cluster's KUBECONFIG and the pinned kubectl first on PATH."""

    def __init__(self, bin_dir: Path, kubeconfig: str, workdir: Path) -> None:
        self.env = {
            **os.environ,
            "KUBECONFIG": kubeconfig,
            "PATH": f"{bin_dir}:{os.environ['PATH']}",
            "KUBECACHEDIR": str(workdir / "kube-cache"),  # this module's own discovery cache
        }
        self.workdir = workdir

    def __call__(self, script: str, **env: str) -> str:
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", script],
            env={**self.env, **env},
            cwd=self.workdir,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, f"{script}\n{done.stdout}\n{done.stderr}"
        return done.stdout

    def apply_heredoc(self, doc: dict[str, Any]) -> str:
        """The seed's `kubectl apply -f - << EOF ... EOF`, with one of its objects."""
        return self(f"kubectl apply -f - << EOF\n{yaml.safe_dump(doc, sort_keys=False)}EOF\n")


def table(text: str) -> list[dict[str, str]]:
    """A `kubectl get` table as rows of column -> cell, by the header's column positions (cells may be
    empty, as SUCCEEDED is while a run is in flight)."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return []  # "No resources found" goes to stderr
    header = lines[0]
    found = list(re.finditer(r"\S+", header))
    names, starts = [m.group(0) for m in found], [m.start() for m in found]
    rows = []
    for line in lines[1:]:
        cells = [
            line[s : (starts[i + 1] if i + 1 < len(starts) else None)].strip() for i, s in enumerate(starts)
        ]
        rows.append(dict(zip(names, cells, strict=True)))
    return rows


def _members(state: fleet.FleetState) -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for member in state.members:
        docs.append(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {
                    "name": families.kubeconfig_secret_name(member.name),
                    "namespace": install.NAMESPACE,
                    "labels": {member_rules.SECRET_LABEL: member.name},
                },
                "data": {"kubeconfig": base64.b64encode(Path(member.kubeconfig).read_bytes()).decode()},
            }
        )
        docs.append(
            {
                "apiVersion": "cluster.kubernetes-fleet.io/v1beta1",
                "kind": "MemberCluster",
                "metadata": {"name": member.name, "labels": LABELS[member.name]},
                "spec": {
                    "identity": {
                        "kind": "ServiceAccount",
                        "name": "fleet-member-agent",
                        "namespace": "fleet-system",
                    }
                },
            }
        )
    return docs


@pytest.fixture(scope="module")
def shell(
    local_fleet: fleet.FleetState, bins: binaries.Binaries, tmp_path_factory: pytest.TempPathFactory
) -> Shell:
    workdir = tmp_path_factory.mktemp("seed004")
    return Shell(bins.directory, local_fleet.cluster(fleet.MANAGEMENT).kubeconfig, workdir)


PLACEMENTS_CLUSTER = "clusterresourceplacements.placement.kubernetes-fleet.io"
PLACEMENTS_NAMESPACED = "resourceplacements.placement.kubernetes-fleet.io"


@pytest.fixture(scope="module")
def controller(
    local_fleet: fleet.FleetState, management: Client, bins: binaries.Binaries, shell: Shell
) -> Iterator[ControllerThread]:
    install.install(management)
    upstream_support.clear_native_kubefleet_objects(management)
    install.install(management, upstream_apis=True)
    # What ADR 0062 tells users: kubectl caches discovery; refresh it once after switching groups.
    shell("kubectl api-resources > /dev/null")
    shell(f"kubectl apply -f - << EOF\n{yaml.safe_dump_all(_members(local_fleet))}EOF\n")
    upstream = replace(settings(bins.path("helm"), "seed004"), upstream=families.upstream_families())
    thread = ControllerThread(local_fleet.cluster(fleet.MANAGEMENT).kubeconfig, upstream)
    thread.start()
    try:
        yield thread
    finally:
        # While the controller runs: placements carry a cleanup finalizer it removes (ADR 0063).
        shell(f"kubectl delete {PLACEMENTS_CLUSTER} --all --timeout=120s")
        shell(f"kubectl delete {PLACEMENTS_NAMESPACED} --all -A --timeout=120s")
        thread.stop()
        shell("kubectl delete memberclusters.cluster.kubernetes-fleet.io --all --wait=false")
        shell("kubectl delete ns test-namespace my-app-namespace --wait=false --ignore-not-found")
        for member in local_fleet.members:  # what the runs delivered
            shell(
                "kubectl delete ns test-namespace my-app-namespace --wait=false --ignore-not-found",
                KUBECONFIG=member.kubeconfig,
            )
        install.install(management)  # serve fleetwave.io's KubeFleet kinds again for later modules
        # and serve no upstream group: later modules' Sveltos-form manifests go to fleetwave.io.
        upstream_support.remove_upstream_groups(management)
    assert thread.error is None, thread.error


def cm_value(member: Client) -> str | None:
    try:
        return (member.get(ConfigMap, "test-cm", namespace="test-namespace").data or {}).get("key")
    except ApiError as e:
        if e.status.code == 404:
            return None
        raise


def assert_snapshot_edit_refused(shell: Shell, plural: str, name: str) -> None:
    edit = f"""kubectl patch {plural} {name} --type=merge -p '{{"spec":{{"selectedResources":[]}}}}'"""

    def refused() -> str | None:  # the policy takes effect asynchronously after install
        done = subprocess.run(
            ["bash", "-c", edit], env=shell.env, capture_output=True, text=True, timeout=60, check=False
        )
        return done.stderr if done.returncode != 0 else None

    message = wait_for(refused, what="the snapshot spec edit refused")
    assert "ValidatingAdmissionPolicy 'snapshots.fleetwave.io-immutable'" in message
    assert snapshot_admission.SPEC_MESSAGE.split(":")[0] in message


def approve_when_asked(shell: Shell, name: str, command: str) -> None:
    def asked() -> bool:
        rows = {r["NAME"]: r for r in table(shell("kubectl get clusterapprovalrequest"))}
        return name in rows

    wait_for(asked, timeout=180, what=f"ClusterApprovalRequest {name}")
    row = {r["NAME"]: r for r in table(shell("kubectl get clusterapprovalrequest"))}[name]
    assert (row["UPDATE-RUN"], row["STAGE"], row["APPROVED"], row["APPROVALACCEPTED"]) == (
        name.rsplit("-", 1)[0],
        "canary",
        "",
        "",
    )
    shell(command)


def test_install_refuses_to_hide_native_placements_and_changes_nothing(
    management: Client, shell: Shell
) -> None:
    install.install(management)
    upstream_support.clear_native_kubefleet_objects(management)
    placement = {
        "apiVersion": "fleetwave.io/v1alpha1",
        "kind": "ClusterResourcePlacement",
        "metadata": {"name": "native-placement"},
        "spec": {"resourceSelectors": [{"group": "", "version": "v1", "kind": "Namespace", "name": "x"}]},
    }
    shell(f"kubectl apply -f - << EOF\n{yaml.safe_dump(placement)}EOF\n")
    try:
        with pytest.raises(
            install.ForeignCRD, match=r"ClusterResourcePlacement objects exist in fleetwave.io"
        ):
            install.install(management, upstream_apis=True)
        served = (
            "kubectl get crd clusterresourceplacements.fleetwave.io -o jsonpath={.spec.versions[0].served}"
        )
        assert shell(served) == "true"  # nothing was hidden
        assert "native-placement" in shell("kubectl get clusterresourceplacements.fleetwave.io")
    finally:
        shell("kubectl delete clusterresourceplacements.fleetwave.io native-placement")


def test_seed_004_cluster_scoped_rollout_and_rollback_verbatim(
    controller: ControllerThread, shell: Shell, members: dict[str, Client]
) -> None:
    objects = seed_objects()
    shell("kubectl create ns test-namespace")
    shell("kubectl create cm test-cm --from-literal=key=value1 -n test-namespace")
    shell.apply_heredoc(objects[0])
    crp = wait_for(
        lambda: next(iter(table(shell("kubectl get crp example-placement"))), None), what="crp listed"
    )
    assert list(crp) == ["NAME", "GEN", "SCHEDULED", "SCHEDULED-GEN", "AVAILABLE", "AVAILABLE-GEN", "AGE"]
    # The placement is listed as soon as it is created; its first snapshot is cut a moment later.
    snapshots = wait_for(
        lambda: table(shell("kubectl get clusterresourcesnapshots --show-labels")), what="snapshot 0 listed"
    )
    assert [(r["NAME"], r["GEN"]) for r in snapshots] == [("example-placement-0-snapshot", "1")]
    assert snapshots[0]["LABELS"] == (
        "kubernetes-fleet.io/is-latest-snapshot=true,kubernetes-fleet.io/parent-CRP=example-placement,"
        "kubernetes-fleet.io/resource-index=0"
    )

    shell("kubectl edit cm test-cm -n test-namespace", KUBE_EDITOR="sed -i s/value1/value2/")
    assert "value2" in shell("kubectl get configmap test-cm -n test-namespace -o yaml")
    wait_for(
        lambda: len(table(shell("kubectl get clusterresourcesnapshots --show-labels"))) == 2,
        what="a second snapshot",
    )
    latest = shell("kubectl get clusterresourcesnapshots example-placement-1-snapshot -o yaml")
    snapshot = yaml.safe_load(latest)
    assert snapshot["apiVersion"] == "placement.kubernetes-fleet.io/v1"  # as the seed prints it
    assert snapshot["metadata"]["labels"]["kubernetes-fleet.io/is-latest-snapshot"] == "true"
    assert {o["kind"] for o in snapshot["spec"]["selectedResources"]} == {"Namespace", "ConfigMap"}
    # ADR 0112: in the upstream group too, a snapshot's spec cannot be edited (not even by an admin).
    assert_snapshot_edit_refused(shell, "clusterresourcesnapshots", "example-placement-1-snapshot")

    shell.apply_heredoc(objects[2])
    shell.apply_heredoc(objects[3])
    run = wait_for(
        lambda: next((r for r in table(shell("kubectl get csur example-run")) if r["INITIALIZED"]), None),
        what="run initialized",
    )
    assert list(run) == [
        "NAME",
        "PLACEMENT",
        "RESOURCE-SNAPSHOT",
        "POLICY-SNAPSHOT",
        "INITIALIZED",
        "SUCCEEDED",
        "AGE",
    ]
    assert (run["PLACEMENT"], run["RESOURCE-SNAPSHOT"], run["POLICY-SNAPSHOT"], run["INITIALIZED"]) == (
        "example-placement",
        "1",
        "0",
        "True",
    )
    approve_when_asked(
        shell,
        "example-run-canary",
        seed_command("approve-cluster-p"),
    )
    wait_for(
        lambda: table(shell("kubectl get csur example-run"))[0]["SUCCEEDED"] == "True",
        timeout=180,
        what="run succeeded",
    )
    approval = table(shell("kubectl get clusterapprovalrequest"))[0]
    assert (approval["APPROVED"], approval["APPROVALACCEPTED"]) == ("True", "True")
    assert {m: cm_value(c) for m, c in members.items()} == dict.fromkeys(members, "value2")
    done = yaml.safe_load(shell("kubectl get csur example-run -o yaml"))["status"]
    # Exactly as seed 004 prints a finished run's conditions.
    assert [(c["type"], c["status"], c["reason"], c["message"]) for c in done["conditions"]] == [
        (
            "Initialized",
            "True",
            "UpdateRunInitializedSuccessfully",
            "ClusterStagedUpdateRun initialized successfully",
        ),
        ("Progressing", "True", "UpdateRunStarted", ""),
        ("Succeeded", "True", "UpdateRunSucceeded", ""),
    ]
    assert all(c["observedGeneration"] == 1 for c in done["conditions"])
    assert done["policySnapshotIndexUsed"] == "0"
    assert done["deletionStageStatus"]["stageName"] == "kubernetes-fleet.io/deleteStage"

    # The placement's status follows its runs on its own reconcile, a moment after the run's.
    def crp_available() -> bool:
        row = table(shell("kubectl get crp example-placement"))[0]
        return (row["SCHEDULED"], row["AVAILABLE"]) == ("True", "True")

    wait_for(crp_available, what="crp available")

    # Rollback: the second run, approved with the seed's --patch-file.
    shell.apply_heredoc(objects[5])
    (shell.workdir / "approval.json").write_text(
        '{"status": {"conditions": [{"lastTransitionTime": "LTT", "message": "lgtm", '
        '"observedGeneration": 1, "reason": "lgtm", "status": "True", "type": "Approved"}]}}',
        encoding="utf-8",
    )
    shell("""sed -i "s/LTT/$(date -u +%Y-%m-%dT%H:%M:%SZ)/" approval.json""")
    approve_when_asked(
        shell,
        "example-run-2-canary",
        # The seed approves its second run "following the same steps": its command, for that run's request.
        seed_command("approve-cluster-file").replace("example-run-canary", "example-run-2-canary"),
    )
    wait_for(
        lambda: {m: cm_value(c) for m, c in members.items()} == dict.fromkeys(members, "value1"),
        timeout=180,
        what="rolled back to value1",
    )


def image_on(member: Client) -> str | None:
    try:
        deployment = member.get(Deployment, "web-app", namespace="my-app-namespace")
    except ApiError as e:
        if e.status.code == 404:
            return None
        raise
    spec = deployment.spec
    return spec.template.spec.containers[0].image if spec and spec.template.spec else None


def test_seed_004_namespaced_rollout_with_hyphenated_stages_and_rollback_verbatim(
    controller: ControllerThread, shell: Shell, members: dict[str, Client]
) -> None:
    objects = seed_objects()
    # A ResourcePlacement delivers into a namespace that must already exist on the members (upstream
    # places it with a ClusterResourcePlacement); the how-to leaves that step out.
    for member in members.values():
        member.create(Namespace(metadata=ObjectMeta(name="my-app-namespace")))
    shell("kubectl create ns my-app-namespace")
    shell("kubectl create deployment web-app --image=nginx:1.20 --port=80 -n my-app-namespace")
    shell("kubectl expose deployment web-app --port=80 --target-port=80 -n my-app-namespace")
    shell.apply_heredoc(objects[7])
    wait_for(lambda: table(shell("kubectl get resourcesnapshots -n my-app-namespace")), what="first snapshot")
    # The seed's `kubectl set image deployment/web-app web-app=nginx:1.21` cannot work on any cluster:
    # `kubectl create deployment --image=nginx:1.20` names the container after the image ("nginx").
    # kubectl refuses it before any request; the container's real name is used instead.
    refused = subprocess.run(
        ["bash", "-c", "kubectl set image deployment/web-app web-app=nginx:1.21 -n my-app-namespace"],
        env=shell.env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert 'unable to find container named "web-app"' in refused.stderr
    shell("kubectl set image deployment/web-app nginx=nginx:1.21 -n my-app-namespace")
    wait_for(
        lambda: len(table(shell("kubectl get resourcesnapshots -n my-app-namespace --show-labels"))) == 2,
        what="a second snapshot",
    )
    rows = {
        r["NAME"]: r["LABELS"]
        for r in table(shell("kubectl get resourcesnapshots -n my-app-namespace --show-labels"))
    }
    assert "kubernetes-fleet.io/is-latest-snapshot=true" in rows["web-app-placement-1-snapshot"]
    assert "kubernetes-fleet.io/parent-CRP=web-app-placement" in rows["web-app-placement-1-snapshot"]

    shell.apply_heredoc(objects[8])  # stages dev-clusters and prod-clusters, as in the seed
    shell.apply_heredoc(objects[9])
    assert "web-app-rollout-v1-21" in shell("kubectl describe sur web-app-rollout-v1-21 -n my-app-namespace")

    def asked() -> bool:
        return any(
            r["NAME"] == "web-app-rollout-v1-21-prod-clusters"
            for r in table(shell("kubectl get approvalrequests -n my-app-namespace"))
        )

    wait_for(asked, timeout=180, what="the prod-clusters approval request")
    shell(seed_command("approve-namespaced"))
    wait_for(
        lambda: (
            table(shell("kubectl get sur web-app-rollout-v1-21 -n my-app-namespace"))[0]["SUCCEEDED"]
            == "True"
        ),
        timeout=180,
        what="namespaced run succeeded",
    )
    assert {m: image_on(c) for m, c in members.items()} == dict.fromkeys(members, "nginx:1.21")
    wait_for(
        lambda: (
            table(shell("kubectl get resourceplacement web-app-placement -n my-app-namespace"))[0][
                "SCHEDULED"
            ]
            == "True"
        ),
        what="resource placement scheduled",
    )

    shell.apply_heredoc(objects[10])  # the rollback run, snapshot 0
    wait_for(
        lambda: any(
            r["NAME"] == "web-app-rollback-v1-20-prod-clusters"
            for r in table(shell("kubectl get approvalrequests -n my-app-namespace"))
        ),
        timeout=180,
        what="the rollback's approval request",
    )
    shell(seed_command("approve-namespaced").replace("web-app-rollout-v1-21", "web-app-rollback-v1-20"))
    wait_for(
        lambda: {m: image_on(c) for m, c in members.items()} == dict.fromkeys(members, "nginx:1.20"),
        timeout=180,
        what="rolled back to nginx:1.20",
    )
