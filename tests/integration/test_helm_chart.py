"""The Helm chart (deploy/chart/fleetwave) with the pinned helm, on a management API server of its own.

- `helm lint` is clean; `helm template` renders a locked-down controller from the values, refuses
  bad values by the schema, and its output passes the API server's server-side dry run;
- `helm install` as a user would; then the controller runs out of cluster with a bound token of the
  chart's ServiceAccount (TokenRequest API) and carries a promotion (with a manual gate) and a staged
  update run (with an approval) to completion: the chart's RBAC is enough (any refusal the controller
  logs fails the test) and not more (what it grants is exactly `mgmt.rbac`'s rules, and the reviews
  below are denied);
- `helm upgrade` changes the controller's arguments; `helm uninstall` leaves nothing of the release
  but the CRDs (kept by `helm.sh/resource-policy: keep`).

The hub is its own etcd + kube-apiserver + controller-manager (no scheduler: the controller's pod is
admitted, in a namespace enforcing the restricted Pod Security Standard, and stays Pending):
installing the chart next to the session's `fleetwave install` would fight over the same
cluster-scoped names. The members are the session fleet's.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import json
import os
import ssl
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
import yaml
from lightkube import ApiError, Client
from lightkube.models.authorization_v1 import ResourceAttributes, SubjectAccessReviewSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.models.rbac_v1 import RoleRef, Subject
from lightkube.resources.apps_v1 import Deployment
from lightkube.resources.authentication_v1 import SelfSubjectReview
from lightkube.resources.authorization_v1 import SubjectAccessReview
from lightkube.resources.core_v1 import ConfigMap, Event, Namespace, Pod, ServiceAccount
from lightkube.resources.flowcontrol_apiserver_v1 import PriorityLevelConfiguration
from lightkube.resources.rbac_authorization_v1 import ClusterRole, RoleBinding
from lightkube.types import PatchType
from promotion_support import (
    ControllerThread,
    deleted_after,
    service_account_kubeconfig,
    settings,
    stage_phases,
    wait_for,
)
from typer.testing import CliRunner

from fleetwave import __version__
from fleetwave.api import crds, models
from fleetwave.cli import app
from fleetwave.cli.exit_codes import EXIT_FORBIDDEN
from fleetwave.kube import client as kubeclient
from fleetwave.kube import kinds
from fleetwave.local import binaries, fleet
from fleetwave.mgmt import manifests, rbac, registration

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "deploy" / "chart" / "fleetwave"
RELEASE, NS = "fleetwave", "fleetwave-system"
CONTROLLER = f"{RELEASE}-controller"  # the chart's names for release "fleetwave" are install's
SA_USER = f"system:serviceaccount:{NS}:{CONTROLLER}"
API = f"{kinds.GROUP}/{kinds.VERSION}"
ENVS = {"member-1": "dev", "member-2": "staging", "member-3": "prod"}


# The image the chart is given (it refuses to render without one); never pulled by these tests.
REPOSITORY = "registry.example.com/fleetwave"
IMAGE = ("--set", f"image.repository={REPOSITORY}")


class Helm:
    """The pinned helm against one kubeconfig, with its own config/cache/data homes; templates and
    installs name the image, which the chart requires."""

    def __init__(self, binary: str, kubeconfig: str, home: Path) -> None:
        self.binary, self.kubeconfig = binary, kubeconfig
        self.env = {
            **os.environ,
            "HELM_CONFIG_HOME": str(home / "config"),
            "HELM_CACHE_HOME": str(home / "cache"),
            "HELM_DATA_HOME": str(home / "data"),
        }

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            [self.binary, "--kubeconfig", self.kubeconfig, *args],
            capture_output=True,
            text=True,
            env=self.env,
            timeout=300,
            check=False,
        )
        if check:
            assert proc.returncode == 0, f"helm {' '.join(args)}:\n{proc.stdout}\n{proc.stderr}"
        return proc

    def upgrade(self, *settings: str) -> None:
        """`helm upgrade` of the release, keeping its values but for `--set` of each of `settings`."""
        sets = [arg for setting in settings for arg in ("--set", setting)]
        self.run("upgrade", RELEASE, str(CHART), "--namespace", NS, "--reuse-values", *sets)

    def template(self, *values: str) -> list[dict[str, Any]]:
        out = self.run("template", RELEASE, str(CHART), "--namespace", NS, *IMAGE, *values).stdout
        return [d for d in yaml.safe_load_all(out) if d]


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory, bins: binaries.Binaries) -> Iterator[fleet.FleetState]:
    state_dir = tmp_path_factory.mktemp("chart-hub")
    # API Priority and Fairness on, as in every real cluster: the chart's FlowSchema is tested on it.
    now = dt.datetime.now(dt.UTC)
    state = fleet.up(state_dir, members={}, now=now, bin_dir=bins.directory, flow_control=True)
    try:
        yield state
    finally:
        fleet.down(state_dir)


@pytest.fixture(scope="module")
def hub_client(hub: fleet.FleetState) -> Client:
    return kubeclient.client(kubeclient.config_from_file(hub.cluster(fleet.MANAGEMENT).kubeconfig))


@pytest.fixture(scope="module")
def helm(hub: fleet.FleetState, bins: binaries.Binaries, tmp_path_factory: pytest.TempPathFactory) -> Helm:
    return Helm(bins.path("helm"), hub.cluster(fleet.MANAGEMENT).kubeconfig, tmp_path_factory.mktemp("helm"))


def _kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind]


def test_helm_lint_is_clean(helm: Helm) -> None:
    for values in (
        [],
        ["--set", "upstreamApis.enabled=true", "--set", "metrics.serviceMonitor.enabled=true"],
        ["--set", "watchNamespaces={team-a,team-b}", "--set", "upstreamApis.enabled=true"],
    ):
        out = helm.run("lint", "--strict", str(CHART), *IMAGE, *values).stdout
        assert "1 chart(s) linted, 0 chart(s) failed" in out, out
        assert not [line for line in out.splitlines() if line.startswith("[")], out  # no INFO/WARNING/ERROR


def test_the_rendered_controller_is_locked_down_and_takes_its_settings_from_values(helm: Helm) -> None:
    docs = helm.template(
        "--set",
        "controller.shards=3",
        "--set",
        "replicaCount=3",
        "--set",
        "controller.logLevel=DEBUG",
        "--set",
        "controller.sandbox.memoryMiB=512",
        "--set",
        "controller.leaseDuration=30",
        "--set",
        "controller.logFormat=json",
        "--set",
        "controller.localContentKinds={ConfigMap,apps/Deployment}",
    )
    (deployment,) = _kind(docs, "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    assert deployment["spec"]["replicas"] == 3
    assert pod["serviceAccountName"] == CONTROLLER
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    (container,) = pod["containers"]
    assert container["image"] == f"{REPOSITORY}:{__version__}"
    sc = container["securityContext"]
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["capabilities"] == {"drop": ["ALL"]}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}
    args = container["args"]
    assert args[:2] == ["controller", "run"]
    for expected in (
        f"--namespace={NS}",
        "--bind-address=0.0.0.0",
        "--shards=3",
        "--log-level=DEBUG",
        "--log-format=json",
        "--local-content-kind=ConfigMap",
        "--local-content-kind=apps/Deployment",
        "--health-memory-mib=512",
        "--lease-duration=30",
        "--no-upstream-apis",
    ):
        assert expected in args, args
    # The metrics Service selects the controller's pods; the PDB too; no ServiceMonitor unless asked.
    (service,) = _kind(docs, "Service")
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()
    (pdb,) = _kind(docs, "PodDisruptionBudget")
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert not _kind(docs, "ServiceMonitor")
    assert not [a for a in args if a.startswith("--notify-secret")]
    (notified,) = _kind(helm.template("--set", "notifications.secretName=hooks"), "Deployment")
    assert "--notify-secret=hooks" in notified["spec"]["template"]["spec"]["containers"][0]["args"]
    (monitor,) = _kind(helm.template("--set", "metrics.serviceMonitor.enabled=true"), "ServiceMonitor")
    assert monitor["spec"]["endpoints"][0]["port"] == "metrics"


def test_upstream_apis_add_their_crds_and_rules_and_hide_the_native_placement_kinds(helm: Helm) -> None:
    plain = {d["metadata"]["name"]: d for d in _kind(helm.template(), "CustomResourceDefinition")}
    docs = helm.template("--set", "upstreamApis.enabled=true")
    crds = {d["metadata"]["name"]: d for d in _kind(docs, "CustomResourceDefinition")}
    assert set(plain) < set(crds)
    assert any(n.endswith(".placement.kubernetes-fleet.io") for n in crds)
    assert any(n.endswith(".config.projectsveltos.io") for n in crds)
    hidden = crds[f"clusterresourceplacements.{kinds.GROUP}"]
    assert not any(v["served"] for v in hidden["spec"]["versions"])
    assert all(v["served"] for v in plain[f"clusterresourceplacements.{kinds.GROUP}"]["spec"]["versions"])
    assert (
        "--upstream-apis" in _kind(docs, "Deployment")[0]["spec"]["template"]["spec"]["containers"][0]["args"]
    )
    roles = {d["metadata"]["name"] for d in _kind(docs, "ClusterRole")}
    users = {f"{RELEASE}-{role}" for role in ("view", "edit", "admin", "profile-editor")}
    assert roles == {CONTROLLER, f"{CONTROLLER}-upstream-apis", *users}


def test_the_chart_refuses_to_render_without_an_image_and_pins_one_by_digest(helm: Helm) -> None:
    proc = helm.run("template", RELEASE, str(CHART), "--namespace", NS, check=False)
    assert proc.returncode != 0
    assert "image.repository is not set" in proc.stderr, proc.stderr
    digest = "sha256:" + "ab" * 32
    (deployment,) = _kind(helm.template("--set", f"image.digest={digest}"), "Deployment")
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"] == f"{REPOSITORY}@{digest}"


def test_names_crd_keeping_user_roles_network_policy_and_extras_follow_the_values(helm: Helm) -> None:
    renamed = helm.template("--set", "fullnameOverride=fw")
    assert {d["metadata"]["name"] for d in _kind(renamed, "Deployment")} == {"fw-controller"}
    crds = _kind(helm.template(), "CustomResourceDefinition")
    assert all(c["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep" for c in crds)
    loose = _kind(helm.template("--set", "crds.keep=false"), "CustomResourceDefinition")
    assert not any("helm.sh/resource-policy" in (c["metadata"].get("annotations") or {}) for c in loose)
    roles = {d["metadata"]["name"]: d for d in _kind(helm.template(), "ClusterRole")}
    view, edit = roles[f"{RELEASE}-view"], roles[f"{RELEASE}-edit"]
    assert view["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-view"] == "true"
    # Pull members' work carries their content (Secret-sourced parts too): an admin's to read alone.
    assert set(view["rules"][0]["resources"]) == {m.plural for m in models.KINDS.values()} - {"memberworks"}
    assert view["rules"][0]["verbs"] == ["get", "list", "watch"]
    assert "approvalrequests/status" in edit["rules"][1]["resources"]  # approving is an edit
    assert "memberclusters" not in edit["rules"][0]["resources"]  # adding a cluster is an admin's
    assert "memberclusters" in roles[f"{RELEASE}-admin"]["rules"][0]["resources"]
    assert "memberworks" not in edit["rules"][0]["resources"]  # nobody but the controller writes work
    assert roles[f"{RELEASE}-admin"]["rules"][1] == {
        "apiGroups": ["fleetwave.io"],
        "resources": ["memberworks"],
        "verbs": ["get", "list", "watch"],
    }
    assert not _kind(helm.template(), "NetworkPolicy")
    (policy,) = _kind(helm.template("--set", "networkPolicy.enabled=true"), "NetworkPolicy")
    assert [p["port"] for rule in policy["spec"]["ingress"] for p in rule["ports"]] == ["metrics", "health"]
    extras = helm.template(
        "--set",
        "controller.extraEnv[0].name=EXTRA",
        "--set-string",
        "controller.extraEnv[0].value=1",
        "--set",
        "controller.extraVolumes[0].name=certs",
        "--set",
        "controller.extraVolumes[0].emptyDir.medium=Memory",
        "--set",
        "controller.extraVolumeMounts[0].name=certs",
        "--set",
        "controller.extraVolumeMounts[0].mountPath=/certs",
    )
    pod = _kind(extras, "Deployment")[0]["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert {"name": "EXTRA", "value": "1"} in container["env"]
    assert {"name": "certs", "mountPath": "/certs"} in container["volumeMounts"]
    assert {"name": "certs", "emptyDir": {"medium": "Memory"}} in pod["volumes"]
    assert container["startupProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}


def test_bad_values_are_refused_by_the_schema_with_the_path_named(helm: Helm) -> None:
    for setting, path in (("controller.shards=0", "/controller/shards"), ("controler.shards=2", "controler")):
        proc = helm.run("template", RELEASE, str(CHART), *IMAGE, "--set", setting, check=False)
        assert proc.returncode != 0
        assert path in proc.stderr, proc.stderr


def test_rendered_manifests_pass_a_server_side_dry_run(
    helm: Helm, hub: fleet.FleetState, hub_client: Client, bins: binaries.Binaries
) -> None:
    restricted = {"pod-security.kubernetes.io/enforce": "restricted"}
    hub_client.apply(Namespace(metadata=ObjectMeta(name=NS, labels=restricted)), force=True)
    watched = ["--set", f"watchNamespaces={{{NS},default}}", "--set", "upstreamApis.enabled=true"]
    every_option = ["--set", "networkPolicy.enabled=true", "--set", "controller.extraEnv[0].name=X"]
    for values in ([], ["--set", "upstreamApis.enabled=true"], watched, every_option):
        rendered = helm.run("template", RELEASE, str(CHART), "--namespace", NS, *IMAGE, *values).stdout
        proc = subprocess.run(
            [
                bins.path("kubectl"),
                "--kubeconfig",
                hub.cluster(fleet.MANAGEMENT).kubeconfig,
                "apply",
                "--server-side",
                "--dry-run=server",
                "-f",
                "-",
            ],
            input=rendered,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr
        assert "PodSecurity" not in proc.stderr, proc.stderr  # the pod template meets "restricted"
        assert proc.stdout.count("serverside-applied (server dry run)") == len(
            [d for d in yaml.safe_load_all(rendered) if d]
        ), proc.stdout
    assert not list(
        hub_client.list(kinds.builtin_resource("apiextensions.k8s.io/v1", "CustomResourceDefinition"))
    )


@pytest.fixture(scope="module")
def installed(helm: Helm, hub_client: Client) -> str:
    # The namespace enforces the "restricted" Pod Security Standard: the API server refuses the
    # controller's pod unless it runs as non-root, without privilege escalation, capabilities or a
    # seccomp profile other than RuntimeDefault.
    restricted = {"pod-security.kubernetes.io/enforce": "restricted"}
    hub_client.apply(Namespace(metadata=ObjectMeta(name=NS, labels=restricted)), force=True)
    helm.run("install", RELEASE, str(CHART), "--namespace", NS, *IMAGE)
    return RELEASE


def _rules(role: Any) -> list[dict[str, Any]]:
    return [
        {k: v for k, v in r.to_dict().items() if v is not None} for r in role.rules or []
    ]  # as the manifest wrote them


def test_installed_rbac_is_exactly_the_install_rules(installed: str, hub_client: Client) -> None:
    cluster_role = hub_client.get(
        kinds.builtin_resource("rbac.authorization.k8s.io/v1", "ClusterRole"), CONTROLLER
    )
    role = hub_client.get(
        kinds.builtin_resource("rbac.authorization.k8s.io/v1", "Role"), CONTROLLER, namespace=NS
    )
    assert _rules(cluster_role) == [r.manifest() for r in rbac.cluster_rules()]
    assert _rules(role) == [r.manifest() for r in rbac.namespace_rules()]
    # The hub has no scheduler: the pod stays Pending, but it was admitted in a restricted namespace.
    pods = wait_for(
        lambda: list(hub_client.list(Pod, namespace=NS, labels={"app.kubernetes.io/instance": RELEASE})),
        what="the controller's pod created",
    )
    assert pods[0].spec.serviceAccountName == CONTROLLER
    refused = [e.message for e in hub_client.list(Event, namespace=NS) if e.reason == "FailedCreate"]
    assert not refused, refused


def _review(client: Client, verb: str, resource: str, group: str = "", namespace: str | None = None) -> bool:
    sub = ""
    if "/" in resource:
        resource, sub = resource.split("/", 1)
    review = SubjectAccessReview(
        spec=SubjectAccessReviewSpec(
            user=SA_USER,
            groups=["system:serviceaccounts", f"system:serviceaccounts:{NS}", "system:authenticated"],
            resourceAttributes=ResourceAttributes(
                verb=verb, resource=resource, subresource=sub or None, group=group, namespace=namespace
            ),
        )
    )
    result = client.create(review)
    return bool(result.status and result.status.allowed)


def _priority_level(kubeconfig: bytes, path: str, tmp_path: Path) -> str:
    """The UID of the API Priority and Fairness level the API server put a GET of `path` in (its
    response header), sent with `kubeconfig`'s token."""
    config = yaml.safe_load(kubeconfig)
    (cluster,) = config["clusters"]
    (user,) = config["users"]
    ca = tmp_path / "ca.crt"
    ca.write_bytes(base64.b64decode(cluster["cluster"]["certificate-authority-data"]))
    headers = {"Authorization": f"Bearer {user['user']['token']}"}
    trusted = ssl.create_default_context(cafile=str(ca))
    answer = httpx2.get(f"{cluster['cluster']['server']}{path}", headers=headers, verify=trusted, timeout=30)
    return answer.headers["X-Kubernetes-PF-PriorityLevel-UID"]


def test_the_controllers_lease_requests_are_in_the_leader_election_priority_level(
    installed: str, hub: fleet.FleetState, hub_client: Client, helm: Helm, tmp_path: Path
) -> None:
    assert not _kind(helm.template("--set", "leaseFlowSchema.enabled=false"), "FlowSchema")
    as_controller = service_account_kubeconfig(
        hub.cluster(fleet.MANAGEMENT).kubeconfig, namespace=NS, name=CONTROLLER
    )
    leases = f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases"
    leader_election = hub_client.get(PriorityLevelConfiguration, "leader-election").metadata.uid
    assert _priority_level(as_controller, f"{leases}/{CONTROLLER}", tmp_path) == leader_election
    # Lists (an informer's) stay in the ServiceAccount's level; so do Leases of other namespaces.
    elsewhere = "/apis/coordination.k8s.io/v1/namespaces/default/leases/x"
    assert _priority_level(as_controller, leases, tmp_path) != leader_election
    assert _priority_level(as_controller, elsewhere, tmp_path) != leader_election


def test_the_charts_account_is_denied_what_it_does_not_need(installed: str, hub_client: Client) -> None:
    denied = [
        ("create", "pods/exec", "", "default"),
        ("get", "nodes/proxy", "", None),
        ("update", "secrets", "", "default"),
        ("create", "secrets", "", "default"),
        ("delete", "secrets", "", NS),
        ("create", "clusterroles", "rbac.authorization.k8s.io", None),
        ("escalate", "clusterroles", "rbac.authorization.k8s.io", None),
        ("impersonate", "users", "", None),
        ("delete", "customresourcedefinitions", "apiextensions.k8s.io", None),
        ("update", "clusterpromotions", kinds.GROUP, None),
    ]
    for verb, resource, group, namespace in denied:
        assert not _review(hub_client, verb, resource, group, namespace), (verb, resource, namespace)
    for verb, resource, group, namespace in (
        ("patch", "clusterprofiles", kinds.GROUP, None),
        ("create", "configmaps", "", NS),
        ("update", "leases", "coordination.k8s.io", NS),
    ):
        assert _review(hub_client, verb, resource, group, namespace), (verb, resource, namespace)


def _tenant(hub_client: Client, hub: fleet.FleetState, tenant: str, tmp_path: Path) -> str:
    """A tenant as a platform team makes one with the chart's roles: a ServiceAccount bound to
    fleetwave-view and fleetwave-edit in its own namespace only; its token's kubeconfig."""
    hub_client.apply(Namespace(metadata=ObjectMeta(name=tenant)), force=True)
    hub_client.apply(ServiceAccount(metadata=ObjectMeta(name="admin", namespace=tenant)), force=True)
    for role in ("view", "edit"):
        binding = RoleBinding(
            metadata=ObjectMeta(name=f"tenant-{role}", namespace=tenant),
            roleRef=RoleRef(
                apiGroup="rbac.authorization.k8s.io", kind="ClusterRole", name=f"{RELEASE}-{role}"
            ),
            subjects=[Subject(kind="ServiceAccount", name="admin", namespace=tenant)],
        )
        hub_client.apply(binding, force=True)
    path = tmp_path / f"{tenant}.kubeconfig"
    admin = hub.cluster(fleet.MANAGEMENT).kubeconfig
    path.write_bytes(service_account_kubeconfig(admin, namespace=tenant, name="admin"))
    return str(path)


def test_two_tenants_each_approve_only_their_own_runs_and_neither_grants_itself_member_rights(
    installed: str, hub_client: Client, hub: fleet.FleetState, tmp_path: Path
) -> None:
    tenants = {t: _tenant(hub_client, hub, t, tmp_path) for t in ("tenant-a", "tenant-b")}

    def approve(who: str, where: str) -> Any:
        argv = ["approve", "run", "web", "--stage", "prod", "-n", where, "--kubeconfig", tenants[who]]
        return CliRunner().invoke(app, argv)

    for who, other in (("tenant-a", "tenant-b"), ("tenant-b", "tenant-a")):
        foreign = approve(who, other)
        assert foreign.exit_code == EXIT_FORBIDDEN, foreign.output
        said = " ".join(foreign.output.split())
        assert "approvalrequests/status" in said
        assert f"in namespace {other}" in said
        own = approve(who, who)  # allowed: what stops it is that no such run exists there
        assert "StagedUpdateRun web not found" in own.output, own.output
        assert own.exit_code not in (0, EXIT_FORBIDDEN), own.output
        assert "not allowed" not in " ".join(own.output.split())
    # A RoleRequest grants rules in members: admin's, never part of edit or view.
    for role in ("view", "edit"):
        rules = hub_client.get(ClusterRole, f"{RELEASE}-{role}").rules or []
        assert not any(
            "rolerequests" in (r.resources or []) and set(r.verbs) - {"get", "list", "watch"} for r in rules
        )
    admin_rules = hub_client.get(ClusterRole, f"{RELEASE}-admin").rules or []
    assert any("rolerequests" in (r.resources or []) and "create" in r.verbs for r in admin_rules)


@pytest.fixture
def flows_namespace(hub_client: Client, members: dict[str, Client]) -> Iterator[str]:
    name = f"chart-{uuid.uuid4().hex[:6]}"
    for c in (hub_client, *members.values()):
        c.create(Namespace(metadata=ObjectMeta(name=name)))
    yield name
    for c in (hub_client, *members.values()):
        c.delete(Namespace, name)


def _landed(member: Client, namespace: str, name: str) -> str | None:
    try:
        return (member.get(ConfigMap, name, namespace=namespace).data or {}).get("from")
    except ApiError as e:
        if e.status.code == 404:
            return None
        raise


def _condition(obj: Any, type_: str) -> dict[str, Any]:
    return next((c for c in (obj.status or {}).get("conditions") or [] if c["type"] == type_), {})


def _promotion_flow(hub: Client, members: dict[str, Client], namespace: str) -> None:
    name = f"chart-{uuid.uuid4().hex[:6]}"
    app = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "hello", "namespace": namespace},
        "data": {"from": name},
    }
    content = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace},
        "data": {"content.yaml": yaml.safe_dump(app)},
    }
    stages = [
        {"name": env, "clusterSelector": {"matchLabels": {"env": env}}, "trigger": trigger}
        for env, trigger in (
            ("dev", {"auto": {"delay": "1s"}}),
            ("staging", {"manual": {"approved": False}}),
            ("prod", {"auto": {}}),
        )
    ]
    promotion = {
        "apiVersion": API,
        "kind": "ClusterPromotion",
        "metadata": {"name": name},
        "spec": {
            "profileSpec": {"policyRefs": [{"kind": "ConfigMap", "name": name, "namespace": namespace}]},
            "stages": stages,
        },
    }
    manifests.apply(hub, [content, promotion])
    with deleted_after(hub, name):
        # staging's manual trigger is the gate out of staging: prod waits for the approval.
        wait_for(lambda: stage_phases(hub, name).get("staging") == "WaitingAfter", what="staging gate")
        assert _landed(members["member-1"], namespace, "hello") == name
        assert _landed(members["member-2"], namespace, "hello") == name
        assert _landed(members["member-3"], namespace, "hello") is None  # held by the manual gate
        approve = [{"op": "replace", "path": "/spec/stages/1/trigger/manual/approved", "value": True}]
        hub.patch(kinds.resource("ClusterPromotion"), name, approve, patch_type=PatchType.JSON)
        wait_for(lambda: stage_phases(hub, name).get("prod") == "Succeeded", what="prod promoted")
        assert all(_landed(m, namespace, "hello") == name for m in members.values())


def _staged_run_flow(hub: Client, members: dict[str, Client], namespace: str) -> None:
    hub.create(ConfigMap(metadata=ObjectMeta(name="from-hub", namespace=namespace), data={"from": "run"}))
    crp, strategy, run = f"crp-{namespace}", f"strategy-{namespace}", f"run-{namespace}"
    docs: list[dict[str, Any]] = [
        {
            "apiVersion": API,
            "kind": "ClusterResourcePlacement",
            "metadata": {"name": crp},
            "spec": {
                "resourceSelectors": [{"group": "", "kind": "Namespace", "name": namespace, "version": "v1"}],
                "policy": {"placementType": "PickAll"},
                "strategy": {"type": "External"},
            },
        },
        {
            "apiVersion": API,
            "kind": "ClusterStagedUpdateStrategy",
            "metadata": {"name": strategy},
            "spec": {
                "stages": [
                    {
                        "name": "dev",
                        "labelSelector": {"matchLabels": {"env": "dev"}},
                        "afterStageTasks": [{"type": "Approval"}],
                    },
                    {
                        "name": "rest",
                        "labelSelector": {
                            "matchExpressions": [
                                {"key": "env", "operator": "In", "values": ["staging", "prod"]}
                            ]
                        },
                    },
                ]
            },
        },
    ]
    manifests.apply(hub, docs)
    wait_for(
        lambda: _found(hub, "ClusterResourceSnapshot", f"{crp}-0-snapshot"), what="the placement's snapshot"
    )
    run_doc = {
        "apiVersion": API,
        "kind": "ClusterStagedUpdateRun",
        "metadata": {"name": run},
        "spec": {"placementName": crp, "resourceSnapshotIndex": "0", "stagedRolloutStrategyName": strategy},
    }
    manifests.apply(hub, [run_doc])
    try:
        request = wait_for(
            lambda: _found(hub, "ClusterApprovalRequest", f"{run}-dev"), what="approval request"
        )
        assert request.spec == {"parentStageRollout": run, "targetStage": "dev"}
        assert _landed(members["member-1"], namespace, "from-hub") == "run"
        assert _landed(members["member-3"], namespace, "from-hub") is None  # waits for the approval
        approved = {
            "type": "Approved",
            "status": "True",
            "reason": "lgtm",
            "message": "lgtm",
            "lastTransitionTime": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "observedGeneration": 1,
        }
        hub.patch(
            kinds.resource("ClusterApprovalRequest").Status,
            f"{run}-dev",
            {"status": {"conditions": [approved]}},
            patch_type=PatchType.MERGE,
        )
        wait_for(
            lambda: (
                _condition(hub.get(kinds.resource("ClusterStagedUpdateRun"), run), "Succeeded").get("status")
                == "True"
            ),
            what="the run succeeded",
        )
        assert all(_landed(m, namespace, "from-hub") == "run" for m in members.values())
    finally:
        hub.delete(kinds.resource("ClusterResourcePlacement"), crp)
        wait_for(
            lambda: _found(hub, "ClusterResourcePlacement", crp) is None,
            what="placement withdrawn and deleted",
        )


def _found(client: Client, kind: str, name: str) -> Any | None:
    try:
        return client.get(kinds.resource(kind), name)
    except ApiError as e:
        if e.status.code == 404:
            return None
        raise


def test_the_controller_with_the_charts_service_account_token_runs_both_flows(
    installed: str,
    hub: fleet.FleetState,
    hub_client: Client,
    local_fleet: fleet.FleetState,
    members: dict[str, Client],
    flows_namespace: str,
    bins: binaries.Binaries,
) -> None:
    for member in local_fleet.members:
        registration.register(
            hub_client,
            name=member.name,
            namespace=NS,
            kubeconfig=Path(member.kubeconfig).read_bytes(),
            labels={"env": ENVS[member.name]},
        )
    chosen = settings(bins.path("helm"), f"chart-{uuid.uuid4().hex[:4]}")
    thread = ControllerThread(hub.cluster(fleet.MANAGEMENT).kubeconfig, chosen)  # namespace: fleetwave-system
    thread.start()
    try:
        # What the controller authenticates with: a bound token of the chart's ServiceAccount.
        config = yaml.safe_load(thread.kubeconfig)
        (user,) = config["users"]
        assert set(user["user"]) == {"token"}
        with kubeclient.client(kubeclient.config_from_bytes(thread.kubeconfig)) as as_controller:
            review = as_controller.create(SelfSubjectReview(metadata=ObjectMeta()))
        assert review.status.userInfo.username == SA_USER
        _promotion_flow(hub_client, members, flows_namespace)
        _staged_run_flow(hub_client, members, flows_namespace)
    finally:
        thread.stop()
    assert thread.error is None, thread.error  # includes: no request refused by the chart's RBAC


def _ready(hub: Client, kind: str, name: str) -> dict[str, Any]:
    return _condition(hub.get(kinds.resource(kind), name), "Ready")


def test_watch_namespaces_bind_namespaced_rights_there_only_and_the_rest_is_refused_in_status(
    installed: str,
    helm: Helm,
    hub: fleet.FleetState,
    hub_client: Client,
    members: dict[str, Client],
    flows_namespace: str,
    bins: binaries.Binaries,
) -> None:
    """`watchNamespaces` (ADR 0074): the chart binds every namespaced right (Secrets included) in the
    watched namespaces and its own only; the controller run with the same `--watch-namespace` and a
    token of the chart's account needs nothing more (no refusal), delivers content from a watched
    namespace, and refuses, in status, a profile or a placement that reads another one."""
    other = f"unwatched-{uuid.uuid4().hex[:6]}"
    hub_client.create(Namespace(metadata=ObjectMeta(name=other)))
    secret_ref = {"kind": "Secret", "name": "team-secret", "namespace": other}
    try:
        helm.upgrade(f"watchNamespaces={{{flows_namespace}}}")
        for namespace in (flows_namespace, NS):
            assert _review(hub_client, "watch", "secrets", "", namespace), namespace
            assert _review(hub_client, "list", "configmaps", "", namespace), namespace
        for namespace in (other, None):  # None: cluster-wide
            assert not _review(hub_client, "get", "secrets", "", namespace), namespace
            assert not _review(hub_client, "list", "configmaps", "", namespace), namespace
        assert _review(hub_client, "list", "namespaces")  # cluster-scoped: still cluster-wide

        page = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "scoped", "namespace": flows_namespace},
        }
        manifests.apply(
            hub_client,
            [
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"name": "scoped-content", "namespace": flows_namespace},
                    "data": {"content.yaml": yaml.safe_dump({**page, "data": {"from": "watched"}})},
                },
                {
                    "apiVersion": API,
                    "kind": "ClusterProfile",
                    "metadata": {"name": "scoped-in"},
                    "spec": {
                        "clusterSelector": {"matchLabels": {"env": "dev"}},
                        "policyRefs": [
                            {"kind": "ConfigMap", "name": "scoped-content", "namespace": flows_namespace}
                        ],
                    },
                },
                {
                    "apiVersion": API,
                    "kind": "ClusterProfile",
                    "metadata": {"name": "scoped-out"},
                    "spec": {"clusterSelector": {"matchLabels": {"env": "dev"}}, "policyRefs": [secret_ref]},
                },
                {
                    "apiVersion": API,
                    "kind": "ClusterResourcePlacement",
                    "metadata": {"name": "scoped-out"},
                    "spec": {
                        "resourceSelectors": [
                            {"group": "", "kind": "Namespace", "name": other, "version": "v1"}
                        ],
                        "policy": {"placementType": "PickAll"},
                    },
                },
            ],
        )
        chosen = dataclasses.replace(
            settings(bins.path("helm"), f"scoped-{uuid.uuid4().hex[:4]}"), watch_namespaces=(flows_namespace,)
        )
        thread = ControllerThread(hub.cluster(fleet.MANAGEMENT).kubeconfig, chosen)
        thread.start()
        try:
            wait_for(
                lambda: _landed(members["member-1"], flows_namespace, "scoped") == "watched", what="delivered"
            )
            refused = wait_for(
                lambda: (
                    (c := _ready(hub_client, "ClusterProfile", "scoped-out")).get("reason") == "InvalidSpec"
                    and c
                ),
                what="the unwatched reference refused",
            )
            assert refused["message"] == (
                f"spec.policyRefs[0]: Secret {other}/team-secret: namespace {other} is not watched by this "
                f"controller (it watches {', '.join(sorted({flows_namespace, NS}))}; see --watch-namespace)"
            )
            placement = wait_for(
                lambda: (
                    _condition(
                        hub_client.get(kinds.resource("ClusterResourcePlacement"), "scoped-out"),
                        "ClusterResourcePlacementScheduled",
                    ).get("status")
                    == "False"
                    and hub_client.get(kinds.resource("ClusterResourcePlacement"), "scoped-out")
                ),
                what="the placement of an unwatched namespace refused",
            )
            message = _condition(placement, "ClusterResourcePlacementScheduled")["message"]
            assert f"selects the content of namespace {other} is not watched" in message, message
            assert _landed(members["member-1"], other, "anything") is None
        finally:
            for kind, name in (
                ("ClusterResourcePlacement", "scoped-out"),
                ("ClusterProfile", "scoped-out"),
                ("ClusterProfile", "scoped-in"),
            ):
                hub_client.delete(kinds.resource(kind), name)
            wait_for(
                lambda: (
                    _landed(members["member-1"], flows_namespace, "scoped") is None
                    and _found(hub_client, "ClusterResourcePlacement", "scoped-out") is None
                ),
                what="the profile's content withdrawn and the placement gone",
            )
            thread.stop()
        assert thread.error is None, thread.error  # includes: no request refused by the scoped RBAC
    finally:
        # An empty list, not null: with --reuse-values, helm keeps the previous release's values as the
        # chart's defaults, so a null is undone by the next upgrade and the namespace comes back.
        helm.run(
            "upgrade",
            RELEASE,
            str(CHART),
            "--namespace",
            NS,
            "--reuse-values",
            "--set-json",
            "watchNamespaces=[]",
        )
        hub_client.delete(Namespace, other)


def _release_objects(bins: binaries.Binaries, kubeconfig: str, *, owned: bool = False) -> list[str]:
    """Every object, of every listable kind, that carries the release's instance label: those the
    release wrote, or (`owned`) those derived from them (ReplicaSets, Pods, Endpoints)."""
    proc = subprocess.run(
        [bins.path("kubectl"), "--kubeconfig", kubeconfig, "api-resources", "--verbs=list", "-o", "name"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    kinds_ = ",".join(proc.stdout.split())
    listed = subprocess.run(
        [
            bins.path("kubectl"),
            "--kubeconfig",
            kubeconfig,
            "get",
            kinds_,
            "--all-namespaces",
            "-l",
            f"app.kubernetes.io/instance={RELEASE}",
            "-o",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    items = json.loads(listed.stdout)["items"]
    return sorted(
        f"{i['kind']}/{i['metadata']['name']}"
        for i in items
        # Endpoints copy their Service's labels and carry no owner reference: derived all the same.
        if (bool(i["metadata"].get("ownerReferences")) or i["kind"] == "Endpoints") == owned
    )


def test_upgrade_changes_the_controller_and_uninstall_leaves_only_the_crds(
    installed: str, helm: Helm, hub: fleet.FleetState, hub_client: Client, bins: binaries.Binaries
) -> None:
    kubeconfig = hub.cluster(fleet.MANAGEMENT).kubeconfig
    before = _release_objects(bins, kubeconfig)
    assert "Deployment/fleetwave-controller" in before
    assert f"ValidatingAdmissionPolicy/{crds.MEMBER_SECRET_POLICY}" in before
    helm.upgrade("controller.logLevel=DEBUG", "metrics.service.enabled=false")
    args = hub_client.get(Deployment, CONTROLLER, namespace=NS).spec.template.spec.containers[0].args
    assert "--log-level=DEBUG" in args
    upgraded = _release_objects(bins, kubeconfig)
    assert set(before) - set(upgraded) == {"Service/fleetwave-controller-metrics"}

    helm.run("uninstall", RELEASE, "--namespace", NS, "--wait", "--timeout", "120s")
    left = _release_objects(bins, kubeconfig)
    kept = [o for o in before if o.startswith("CustomResourceDefinition/")]
    assert len(kept) == len(models.KINDS)  # every native kind's CRD, nothing else
    assert left == kept, "uninstall left more than the CRDs (helm.sh/resource-policy: keep)"
    # What the Deployment and the Service owned goes with them (the garbage collector).
    wait_for(
        lambda: not _release_objects(bins, kubeconfig, owned=True), timeout=90, what="owned objects gone"
    )
