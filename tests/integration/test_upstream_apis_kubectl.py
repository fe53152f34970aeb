"""The Sveltos API groups served by fleetwave (`install --upstream-apis`), driven the way the seeds
drive Sveltos: the real `kubectl` binary, manifests on stdin, the seeds' own commands verbatim.

The members are registered as SveltosClusters with Sveltos' default kubeconfig Secret name, the
promotion is Sveltos' YAML as written; fleetwave reconciles them in their own groups (ADR 0062).
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import upstream_support
import yaml
from lightkube import ApiError, Client
from lightkube.resources.core_v1 import ConfigMap, Namespace, ServiceAccount
from lightkube.resources.rbac_authorization_v1 import ClusterRole, Role, RoleBinding
from promotion_support import CHARTS, ENVS, ControllerThread, chart_version, wait_for
from typer.testing import CliRunner
from upstream_support import Kubectl

from fleetwave.api import crds, families
from fleetwave.cli import app
from fleetwave.local import binaries, chartrepo, fleet

CONFIG = "config.projectsveltos.io"


def _table(text: str) -> list[dict[str, str]]:
    """A `kubectl get` table as rows of column -> cell (cells never contain spaces here)."""
    lines = [line for line in text.splitlines() if line.strip()]
    header = lines[0].split()
    return [dict(zip(header, line.split(), strict=False)) for line in lines[1:] if line.split() != header]


@pytest.fixture(scope="module")
def kubectl(
    local_fleet: fleet.FleetState, bins: binaries.Binaries, tmp_path_factory: pytest.TempPathFactory
) -> Kubectl:
    cache = tmp_path_factory.mktemp("kube-cache")
    return Kubectl(bins.path("kubectl"), local_fleet.cluster(fleet.MANAGEMENT).kubeconfig, cache)


@pytest.fixture(scope="module")
def repo(bins: binaries.Binaries, tmp_path_factory: pytest.TempPathFactory) -> Iterator[chartrepo.ChartRepo]:
    charts = [(CHARTS / "hello", "1.0.0"), (CHARTS / "hello", "1.1.0")]
    with chartrepo.serve(bins.path("helm"), tmp_path_factory.mktemp("upstream-charts"), charts) as served:
        yield served


def _sveltos_clusters(state: fleet.FleetState) -> str:
    """Seed 002's set-up: a namespace per environment, a SveltosCluster in it labelled env=<env>, its
    kubeconfig in `<name>-sveltos-kubeconfig` (Sveltos' default name; the key Sveltos registers)."""
    docs: list[dict[str, Any]] = []
    for member in state.members:
        env = ENVS[member.name]
        kubeconfig = base64.b64encode(Path(member.kubeconfig).read_bytes()).decode()
        docs.append({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": env}})
        docs.append(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": f"{env}-sveltos-kubeconfig", "namespace": env},
                "data": {"kubeconfig": kubeconfig},
            }
        )
        docs.append(
            {
                "apiVersion": "lib.projectsveltos.io/v1beta1",
                "kind": "SveltosCluster",
                "metadata": {"name": env, "namespace": env, "labels": {"env": env}},
                "spec": {},
            }
        )
    return yaml.safe_dump_all(docs)


@pytest.fixture(scope="module")
def controller(
    local_fleet: fleet.FleetState, management: Client, bins: binaries.Binaries, kubectl: Kubectl
) -> Iterator[ControllerThread]:
    def register() -> None:
        kubectl("api-resources")  # kubectl caches discovery: refresh it after switching (ADR 0062)
        kubectl("apply -f -", stdin=_sveltos_clusters(local_fleet))

    def cleanup() -> None:
        kubectl("delete sveltoscluster --all -A --wait=false")

    with upstream_support.upstream_controller(
        local_fleet, management, bins, "upstream", register, cleanup=cleanup
    ) as thread:
        yield thread


def promotion(name: str, repo_url: str, *, staging: str) -> str:
    """A ClusterPromotion as Sveltos users write it (seed 002's shape, with the test's chart)."""
    return f"""apiVersion: config.projectsveltos.io/v1beta1
kind: ClusterPromotion
metadata:
  name: {name}
spec:
  profileSpec:
    syncMode: Continuous
    helmCharts:
    - repositoryURL: {repo_url}
      repositoryName: local
      chartName: local/hello
      chartVersion: 1.0.0
      releaseName: {name}
      releaseNamespace: {name}
      helmChartAction: Install
  stages:
  - name: dev
    clusterSelector:
      matchLabels:
        env: dev
    trigger:
      auto:
        delay: 1s
  - name: staging
    clusterSelector:
      matchLabels:
        env: staging
    trigger:
{staging}
  - name: prod-clusters
    clusterSelector:
      matchLabels:
        env: prod
"""


def _phases(kubectl: Kubectl, name: str) -> dict[str, str]:
    got = kubectl.yaml(f"get clusterpromotion.config.projectsveltos.io/{name} -o yaml")
    return {s["name"]: s.get("phase", "") for s in (got.get("status") or {}).get("stages") or []}


_THEIRS = "clusterpromotions.config.projectsveltos.io"  # the CRD "another controller" owns


def test_install_refuses_to_take_over_a_crd_another_controller_owns_and_applies_nothing(
    local_fleet: fleet.FleetState, kubectl: Kubectl
) -> None:
    # A clean slate whatever ran before: another module may have installed the upstream groups.
    ours = [c["metadata"]["name"] for c in crds.upstream_crds(families.upstream_families())]
    kubectl(f"delete crd --ignore-not-found {' '.join(ours)}")
    theirs = crds.upstream_crd(families.SVELTOS, "ClusterPromotion")
    theirs["metadata"]["labels"] = {"app.kubernetes.io/part-of": "sveltos"}
    kubectl("apply -f -", stdin=yaml.safe_dump(theirs))
    # Served before it is deleted again: the API server's CRD finalizer cannot list the instances of
    # a CRD whose storage still initializes, and its retries back off until the CRD has stayed
    # terminating for minutes (later modules' installs are refused meanwhile).
    wait_for(lambda: kubectl.succeeds(f"get {_THEIRS} -o name"), what=f"{_THEIRS} served")
    try:
        kubeconfig = local_fleet.cluster(fleet.MANAGEMENT).kubeconfig
        result = CliRunner().invoke(app, ["install", "--upstream-apis", "--kubeconfig", kubeconfig])
        assert result.exit_code == 2, result.output
        assert " ".join(result.output.split()) == (
            "error: install refused: CRD clusterpromotions.config.projectsveltos.io already exists and is "
            "owned by sveltos; fleetwave does not take over another controller's API (uninstall it first, or "
            "install fleetwave without --upstream-apis)"
        )
        assert "sveltosclusters" not in kubectl("get crd -o name")
    finally:
        kubectl(f"delete crd --wait=false {_THEIRS}")
        wait_for(lambda: _THEIRS not in kubectl("get crd -o name"), timeout=300, what=f"{_THEIRS} deleted")


def test_seed_002_commands_run_verbatim_against_the_sveltos_groups(
    controller: ControllerThread, kubectl: Kubectl, members: dict[str, Client], repo: chartrepo.ChartRepo
) -> None:
    clusters = _table(kubectl("get sveltoscluster -A --show-labels"))
    wait_for(
        lambda: all(r["READY"] == "true" for r in _table(kubectl("get sveltoscluster -A --show-labels"))),
        what="SveltosClusters ready",
    )
    clusters = _table(kubectl("get sveltoscluster -A --show-labels"))
    assert {r["NAME"]: r["NAMESPACE"] for r in clusters} == {
        "dev": "dev",
        "staging": "staging",
        "prod": "prod",
    }
    assert all(r["VERSION"].startswith("v1.") and f"env={r['NAME']}" in r["LABELS"] for r in clusters)
    # Sveltos' registration label, as seed 002 lists it: the version without its build suffix.
    wait_for(
        lambda: all(
            f"projectsveltos.io/k8s-version={r['VERSION'].partition('+')[0]}" in r["LABELS"]
            for r in _table(kubectl("get sveltoscluster -A --show-labels"))
        ),
        what="SveltosClusters labelled with their Kubernetes version",
    )

    name = "kyverno-prog-rollout-man"
    manual = "      manual:\n        approved: false"
    kubectl("apply -f -", stdin=promotion(name, repo.url, staging=manual))
    try:
        # Staging's manual trigger holds what comes after it (seed 002's "Mid-Validation").
        wait_for(lambda: _phases(kubectl, name).get("staging") == "WaitingAfter", what="staging gate")
        listed = kubectl("get clusterpromotion,clusterprofile,clustersummary -A")
        assert f"clusterpromotion.{CONFIG}/{name}" in listed
        assert f"clusterprofile.{CONFIG}/{name}-dev" in listed
        assert f"clustersummary.{CONFIG}/{name}-dev-sveltos-dev" in listed
        assert f"clustersummary.{CONFIG}/{name}-staging-sveltos-staging" in listed
        assert f"clusterprofile.{CONFIG}/{name}-prod-clusters" not in listed
        assert chart_version(members["member-2"], name, name) == "1.0.0"
        assert chart_version(members["member-3"], name, name) is None

        # Seed 002's command (its promotion's name is this one's).
        kubectl(
            f"patch clusterpromotion {name} --type=json -p "
            """'[{"op": "replace", "path": "/spec/stages/1/trigger/manual/approved", "value": true}]'"""
        )
        wait_for(lambda: _phases(kubectl, name).get("prod-clusters") == "Succeeded", what="prod stage done")
        assert chart_version(members["member-3"], name, name) == "1.0.0"

        got = kubectl.yaml(f"get clusterpromotion.{CONFIG}/{name} -o yaml")
        assert got["apiVersion"] == f"{CONFIG}/v1beta1"
        assert got["status"]["currentStageName"] == "prod-clusters"
        for stage in got["status"]["stages"]:  # seed 002's fields, in seed 002's words
            done = stage["lastSuccessfulAppliedTime"]
            assert stage["currentStatusDescription"] == f"Successfully provisioned ({done})"
            assert stage["lastStatusCheckTime"] >= stage["lastUpdateReconciledTime"]
        profile = kubectl.yaml(f"get clusterprofile.{CONFIG}/{name}-dev -o yaml")
        owner = profile["metadata"]["ownerReferences"][0]
        assert (owner["apiVersion"], owner["kind"], owner["name"]) == (
            f"{CONFIG}/v1beta1",
            "ClusterPromotion",
            name,
        )
        matching = profile["status"]["matchingClusters"]
        assert matching == [
            {
                "apiVersion": "lib.projectsveltos.io/v1beta1",
                "kind": "SveltosCluster",
                "namespace": "dev",
                "name": "dev",
            }
        ]
        # Seed 001's and seed 000's forms of the same questions.
        reordered = kubectl("get clusterprofile,clustersummary,clusterpromotion -A")
        assert f"clusterprofile.{CONFIG}/{name}-dev" in reordered
        assert kubectl.yaml(f"get clusterpromotion {name} -n dev -o yaml")["metadata"]["name"] == name
        summary = kubectl.yaml(f"get clustersummary.{CONFIG}/{name}-dev-sveltos-dev -n dev -o yaml")
        assert summary["spec"]["clusterType"] == "Sveltos"
        assert summary["metadata"]["ownerReferences"][0]["apiVersion"] == f"{CONFIG}/v1beta1"
        # Nothing of this rollout exists in fleetwave's own group.
        assert name not in kubectl("get clusterpromotions.fleetwave.io,clusterprofiles.fleetwave.io")
    finally:
        kubectl(f"delete clusterpromotion.{CONFIG} {name}")
    wait_for(
        lambda: chart_version(members["member-1"], name, name) is None, what="release withdrawn on delete"
    )


def test_fleetwave_status_and_approve_find_a_promotion_in_sveltos_group(
    controller: ControllerThread,
    kubectl: Kubectl,
    members: dict[str, Client],
    repo: chartrepo.ChartRepo,
    local_fleet: fleet.FleetState,
) -> None:
    """A Sveltos user's promotion (config.projectsveltos.io) is shown and approved by fleetwave's own
    commands, with no flag to say which group it lives in."""
    name = "cli-in-sveltos-group"
    kubeconfig = local_fleet.cluster(fleet.MANAGEMENT).kubeconfig
    manual = "      manual:\n        approved: false"
    kubectl("apply -f -", stdin=promotion(name, repo.url, staging=manual))
    try:
        wait_for(lambda: chart_version(members["member-2"], name, name) == "1.0.0", what="staging delivered")
        wait_for(
            lambda: _phases(kubectl, name).get("staging") == "WaitingAfter", what="staging's manual gate"
        )

        def shown() -> dict[str, Any] | None:
            said = CliRunner().invoke(
                app, ["status", "promotion", name, "-o", "json", "--kubeconfig", kubeconfig]
            )
            assert said.exit_code == 0, said.output
            return yaml.safe_load(said.output)

        view = wait_for(shown, what="fleetwave status")
        assert view["name"] == name
        assert [s["name"] for s in view["stages"]] == ["dev", "staging", "prod-clusters"]
        assert chart_version(members["member-3"], name, name) is None  # held by the manual gate

        approved = CliRunner().invoke(
            app, ["approve", "promotion", name, "--stage", "staging", "--kubeconfig", kubeconfig]
        )
        assert approved.exit_code == 0, approved.output
        assert f"clusterpromotion/{name} stage staging approved" in approved.output
        wait_for(
            lambda: chart_version(members["member-3"], name, name) == "1.0.0", what="prod after approval"
        )
    finally:
        kubectl(f"delete clusterpromotion.{CONFIG}/{name} --wait=false")


APPLY_PROBE = """apiVersion: config.projectsveltos.io/v1beta1
kind: ClusterProfile
metadata:
  name: apply-probe
spec:
  clusterSelector:
    matchLabels:
      fleetwave-test: nothing-matches
"""


def test_apply_writes_a_sveltos_manifest_to_the_served_sveltos_group(
    controller: ControllerThread, kubectl: Kubectl, local_fleet: fleet.FleetState
) -> None:
    kubeconfig = local_fleet.cluster(fleet.MANAGEMENT).kubeconfig
    try:
        done = CliRunner().invoke(app, ["apply", "-f", "-", "--kubeconfig", kubeconfig], input=APPLY_PROBE)
        assert done.exit_code == 0, done.output
        assert done.output.strip() == "clusterprofile/apply-probe applied"  # not "(from ...)": no mapping
        stored = kubectl.yaml(f"get clusterprofiles.{CONFIG} apply-probe -o yaml")
        assert stored["spec"]["clusterSelector"] == {"matchLabels": {"fleetwave-test": "nothing-matches"}}
        assert "NotFound" in kubectl("get clusterprofiles.fleetwave.io apply-probe", ok=False)
    finally:
        kubectl(f"delete clusterprofiles.{CONFIG} apply-probe --ignore-not-found")


DRY_RUN_PROFILE = """apiVersion: v1
kind: ConfigMap
metadata:
  name: dry-run-content
  namespace: default
data:
  content.yaml: |
    apiVersion: v1
    kind: ConfigMap
    metadata:
      name: dry-run-would-create
      namespace: default
    data:
      v: "1"
---
apiVersion: config.projectsveltos.io/v1beta1
kind: ClusterProfile
metadata:
  name: dry-run-probe
spec:
  syncMode: DryRun
  clusterSelector:
    matchLabels:
      env: dev
  policyRefs:
  - kind: ConfigMap
    name: dry-run-content
    namespace: default
"""


def test_a_dry_run_profile_reports_in_the_sveltos_groups_cluster_report(
    controller: ControllerThread, kubectl: Kubectl, local_fleet: fleet.FleetState
) -> None:
    kubeconfig = local_fleet.cluster(fleet.MANAGEMENT).kubeconfig
    try:
        kubectl("apply -f -", stdin=DRY_RUN_PROFILE)
        # Sveltos' own command: the report is a config.projectsveltos.io ClusterReport (ADR 0113).
        report = wait_for(
            lambda: (
                kubectl.yaml(f"get clusterreports.{CONFIG} -n dev dry-run-probe--sveltos--dev -o yaml")
                if "dry-run-probe--sveltos--dev" in kubectl(f"get clusterreports.{CONFIG} -A", ok=False)
                else None
            ),
            what="the DryRun report in the Sveltos group",
        )
        [entry] = report["status"]["resourceReports"]
        assert (entry["resource"]["name"], entry["action"]) == ("dry-run-would-create", "Create")
        assert "NotFound" in kubectl(
            "get clusterreports.fleetwave.io -n dev dry-run-probe--sveltos--dev", ok=False
        )
        args = [
            "status",
            "profile",
            "dry-run-probe",
            "--dry-run-report",
            "-o",
            "json",
            "--kubeconfig",
            kubeconfig,
        ]
        shown = CliRunner().invoke(app, args)
        assert shown.exit_code == 0, shown.output
        assert "dry-run-would-create" in shown.output
        # Deleting the profile deletes its summaries, and garbage collection their reports.
        kubectl(f"delete clusterprofiles.{CONFIG} dry-run-probe")
        wait_for(
            lambda: "dry-run-probe" not in kubectl(f"get clusterreports.{CONFIG} -A", ok=False),
            what="the report gone with its profile",
        )
    finally:
        kubectl(f"delete clusterprofiles.{CONFIG} dry-run-probe --ignore-not-found")
        kubectl("delete configmap -n default dry-run-content --ignore-not-found")


def test_register_also_registers_the_member_in_the_served_upstream_groups(
    controller: ControllerThread, kubectl: Kubectl, local_fleet: fleet.FleetState
) -> None:
    kubeconfig = local_fleet.cluster(fleet.MANAGEMENT).kubeconfig
    member = local_fleet.members[0]
    argv = ["cluster", "register", "reg-probe", "--cluster-kubeconfig", member.kubeconfig]
    argv += ["-l", "fleetwave-test=register", "--kubeconfig", kubeconfig]
    try:
        done = CliRunner().invoke(app, argv)
        assert done.exit_code == 0, done.output
        assert "sveltoscluster.lib.projectsveltos.io/reg-probe registered too" in done.output
        assert "membercluster.cluster.kubernetes-fleet.io/reg-probe registered too" in done.output
        sveltos = kubectl.yaml("get sveltoscluster -n fleetwave-system reg-probe -o yaml")
        assert sveltos["spec"] == {
            "kubeconfigName": "reg-probe-kubeconfig",
            "kubeconfigKeyName": "kubeconfig",
        }
        labels = dict(sveltos["metadata"]["labels"])
        labels.pop("projectsveltos.io/k8s-version", None)  # the controller may have labelled it already
        assert labels == {"fleetwave-test": "register"}
        fleet_member = kubectl.yaml("get memberclusters.cluster.kubernetes-fleet.io reg-probe -o yaml")
        assert fleet_member["metadata"]["labels"] == {"fleetwave-test": "register"}
        # The controller serving the Sveltos group reaches the member through what register wrote.
        wait_for(
            lambda: (
                kubectl.yaml("get sveltoscluster -n fleetwave-system reg-probe -o yaml").get("status") or {}
            ).get("ready"),
            what="the registered SveltosCluster ready",
        )
    finally:
        kubectl("delete sveltoscluster -n fleetwave-system reg-probe --ignore-not-found --wait=false")
        kubectl("delete memberclusters.cluster.kubernetes-fleet.io reg-probe --ignore-not-found --wait=false")
        kubectl("delete memberclusters.fleetwave.io -n fleetwave-system reg-probe --ignore-not-found")
        kubectl("delete secret -n fleetwave-system reg-probe-kubeconfig --ignore-not-found")


TENANT_ROLE = """apiVersion: v1
kind: ConfigMap
metadata:
  name: eng-full-access
  namespace: default
data:
  role.yaml: |
    apiVersion: rbac.authorization.k8s.io/v1
    kind: Role
    metadata:
      name: eng-full-access
      namespace: eng
    rules:
    - apiGroups: ["*"]
      resources: ["*"]
      verbs: ["*"]
---
apiVersion: lib.projectsveltos.io/v1beta1
kind: RoleRequest
metadata:
  name: eng-full-access
spec:
  serviceAccountName: eng
  serviceAccountNamespace: eng
  clusterSelector:
    matchLabels:
      env: dev
  roleRefs:
  - name: eng-full-access
    namespace: default
    kind: ConfigMap
"""


def _tenant_content(*, with_cluster_role: bool) -> str:
    """A tenant's profile (Sveltos' serviceaccount labels) and its content: a ConfigMap in its own
    namespace and, when asked, a ClusterRole its RoleRequest does not grant."""
    extra = (
        """
  clusterrole.yaml: |
    apiVersion: rbac.authorization.k8s.io/v1
    kind: ClusterRole
    metadata:
      name: eng-takes-over
    rules:
    - apiGroups: ["*"]
      resources: ["*"]
      verbs: ["*"]"""
        if with_cluster_role
        else ""
    )
    return f"""apiVersion: v1
kind: ConfigMap
metadata:
  name: eng-content
  namespace: default
data:
  configmap.yaml: |
    apiVersion: v1
    kind: ConfigMap
    metadata:
      name: eng-settings
      namespace: eng
    data:
      level: debug{extra}
---
apiVersion: config.projectsveltos.io/v1beta1
kind: ClusterProfile
metadata:
  name: eng-settings
  labels:
    projectsveltos.io/serviceaccount-name: eng
    projectsveltos.io/serviceaccount-namespace: eng
spec:
  clusterSelector:
    matchLabels:
      env: dev
  policyRefs:
  - name: eng-content
    namespace: default
    kind: ConfigMap
"""


def _feature(kubectl: Kubectl) -> dict[str, Any]:
    got = kubectl.yaml("get clustersummary.config.projectsveltos.io eng-settings-sveltos-dev -n dev -o yaml")
    features = (got.get("status") or {}).get("featureSummaries") or [{}]
    return dict(features[0])


def _exists(client: Client, kind: type[Any], name: str, namespace: str | None = None) -> bool:
    try:
        client.get(kind, name, namespace=namespace)
    except ApiError as e:
        if e.status.code == 404:
            return False
        raise
    return True


def test_a_tenant_admin_deploys_only_what_its_role_request_grants_and_nothing_half(
    controller: ControllerThread, kubectl: Kubectl, members: dict[str, Client]
) -> None:
    dev = members["member-1"]
    kubectl("apply -f -", stdin=TENANT_ROLE)
    try:
        wait_for(
            lambda: _exists(dev, RoleBinding, "eng-full-access-role-eng-full-access", "eng"),
            what="the RoleRequest's grant on the dev member",
        )
        assert _exists(dev, ServiceAccount, "eng", "eng")
        assert _exists(dev, Role, "eng-full-access", "eng")
        info = kubectl.yaml("get rolerequest.lib.projectsveltos.io eng-full-access -o yaml")["status"]
        assert [(i["cluster"]["name"], i["status"]) for i in info["clusterInfo"]] == [("dev", "Provisioned")]

        # The tenant's content holds a ClusterRole it was not granted: the member's API server
        # refuses it (the delivery acts as the tenant), and nothing of the content is applied.
        kubectl("apply -f -", stdin=_tenant_content(with_cluster_role=True))
        wait_for(lambda: _feature(kubectl).get("status") == "Failed", what="the tenant's refused feature")
        message = _feature(kubectl)["failureMessage"]
        assert "refused for tenant admin eng/eng" in message, message
        assert "forbidden" in message, message
        assert not _exists(dev, ClusterRole, "eng-takes-over")
        assert not _exists(dev, ConfigMap, "eng-settings", "eng")  # not half-applied

        # Within its grant, the same tenant delivers.
        kubectl("apply -f -", stdin=_tenant_content(with_cluster_role=False))
        wait_for(lambda: _exists(dev, ConfigMap, "eng-settings", "eng"), what="the tenant's content")
        wait_for(lambda: _feature(kubectl).get("status") == "Provisioned", what="the tenant's feature")
    finally:
        kubectl("delete clusterprofile.config.projectsveltos.io eng-settings --ignore-not-found --wait=false")
        kubectl("delete rolerequest.lib.projectsveltos.io eng-full-access --ignore-not-found")
    # Deleting the request withdraws the grant (the namespace stays: the tenant's content lives there).
    wait_for(lambda: not _exists(dev, Role, "eng-full-access", "eng"), what="the grant withdrawn")
    assert not _exists(dev, RoleBinding, "eng-full-access-role-eng-full-access", "eng")
    assert _exists(dev, Namespace, "eng")
