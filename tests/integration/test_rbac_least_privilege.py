"""The RBAC `fleetwave install` writes, checked against the real management API server (ADR 0047).

- SubjectAccessReviews for the controller's ServiceAccount: `nodes/proxy`, `pods/exec`,
  `pods/attach` and writes to Secrets outside the controller's namespace are denied; so is every
  verb on every resource and subresource the server serves, except an explicit list of what the
  controllers use (anything a ServiceAccount without roles may do anyway is left out);
- the same refusals for real requests sent with the ServiceAccount's own token;
- the shared controller fixture authenticates as that ServiceAccount (not as the admin), and a
  promotion rolls out under it (the full promotion and staged-run flows run under it in their own
  modules: `promotion_support.ControllerThread` fails a module on any RBAC refusal it logs).
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import yaml
from lightkube import ApiError, Client
from lightkube.models.authorization_v1 import ResourceAttributes, SubjectAccessReviewSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.authentication_v1 import SelfSubjectReview
from lightkube.resources.authorization_v1 import SubjectAccessReview
from lightkube.resources.core_v1 import ConfigMap, Secret
from promotion_support import (
    SERVICE_ACCOUNT_USER,
    ControllerThread,
    deleted_after,
    registered,
    running_controller,
    service_account_kubeconfig,
    stage_phases,
    wait_for,
)

from fleetwave.api import models
from fleetwave.controllers import kubefleet
from fleetwave.kube import client as kubeclient
from fleetwave.kube import kinds
from fleetwave.local import binaries, fleet
from fleetwave.mgmt import install, manifests, rbac

OWN = install.NAMESPACE
SA_GROUPS = ["system:serviceaccounts", f"system:serviceaccounts:{OWN}", "system:authenticated"]
TOP_VERBS = ("get", "list", "watch", "create", "update", "patch", "delete", "deletecollection")
SUB_VERBS = ("get", "create", "update", "patch", "delete")
READ = ("get", "list", "watch")
FW = kinds.GROUP


@dataclass(frozen=True, slots=True)
class Ask:
    group: str
    resource: str  # "pods" or "pods/exec"
    verb: str
    namespace: str | None = None  # None: cluster-wide (all namespaces, or a cluster-scoped resource)
    name: str | None = None


def _fw(kind: str) -> str:
    return models.KINDS[kind].plural


# What the controllers use, written out independently of `mgmt.rbac` (the specification the rules
# are checked against). Keys: (group, resource); values: verbs allowed cluster-wide.
CLUSTER_WIDE: dict[tuple[str, str], tuple[str, ...]] = {
    **{(FW, m.plural): READ for m in models.KINDS.values()},
    (FW, _fw("ClusterProfile")): (*READ, "create", "patch", "delete"),
    (FW, _fw("ClusterSummary")): (*READ, "create", "patch", "delete"),
    (FW, _fw("ClusterPromotion")): (*READ, "patch"),
    # Placements carry a cleanup finalizer (deleteStrategy), set by a merge patch.
    (FW, _fw("ClusterResourcePlacement")): (*READ, "patch"),
    (FW, _fw("ResourcePlacement")): (*READ, "patch"),
    (FW, _fw("ClusterResourceSnapshot")): (*READ, "create", "patch", "delete"),
    (FW, _fw("ResourceSnapshot")): (*READ, "create", "patch", "delete"),
    # Override snapshots (ADR 0088): cut from each override, pruned past the history limit.
    (FW, _fw("ClusterResourceOverrideSnapshot")): (*READ, "create", "patch", "delete"),
    (FW, _fw("ResourceOverrideSnapshot")): (*READ, "create", "patch", "delete"),
    (FW, _fw("ClusterApprovalRequest")): (*READ, "create"),
    (FW, _fw("ApprovalRequest")): (*READ, "create"),
    # Members carry Sveltos' registration labels (a merge patch of metadata.labels).
    (FW, _fw("MemberCluster")): (*READ, "patch"),
    # A Profile's and a RoleRequest's finalizer is a merge patch (ADR 0110, ADR 0111).
    (FW, _fw("Profile")): (*READ, "patch"),
    (FW, _fw("RoleRequest")): (*READ, "patch"),
    # A DryRun profile's report per cluster (ADR 0113): applied (an apply that creates needs create),
    # its status patched, deleted when the profile leaves DryRun.
    (FW, _fw("ClusterReport")): (*READ, "create", "patch", "delete"),
    # Pull members' work (ADR 0106): applied into their hub namespaces, deleted once withdrawn.
    (FW, _fw("MemberWork")): (*READ, "create", "patch", "delete"),
    # Pull members' agents' leases: their liveness, read in every namespace (written in none).
    ("coordination.k8s.io", "leases"): READ,
    **{
        (FW, f"{_fw(k)}/status"): ("patch",)
        for k in (
            "ClusterPromotion",
            "ClusterProfile",
            "ClusterSummary",
            "MemberCluster",
            "ClusterResourcePlacement",
            "ResourcePlacement",
            "ClusterStagedUpdateRun",
            "StagedUpdateRun",
            "ClusterApprovalRequest",
            "ApprovalRequest",
            # An eviction's verdict (ADR 0107).
            "ClusterResourcePlacementEviction",
            # Cluster sets (ADR 0108): users write them, the controller writes what they chose.
            "ClusterSet",
            "Set",
            "Profile",  # its generated profile's status, mirrored (ADR 0110)
            "RoleRequest",  # where its grants are in place (ADR 0111)
            "ClusterReport",  # what a DryRun would change (ADR 0113)
        )
    },
    **{
        (FW, f"{_fw(k)}/finalizers"): ("update",)
        for k in ("ClusterPromotion", "ClusterProfile", "ClusterStagedUpdateRun", "StagedUpdateRun")
    },
    **{("", r): READ for r in ("namespaces", "configmaps", "secrets", "serviceaccounts", "services")},
    **{("apps", r): READ for r in ("deployments", "statefulsets", "daemonsets")},
    **{("batch", r): READ for r in ("jobs", "cronjobs")},
    **{
        ("rbac.authorization.k8s.io", r): READ
        for r in ("roles", "rolebindings", "clusterroles", "clusterrolebindings")
    },
    ("", "events"): ("create", "patch"),
}
# Allowed in the controller's own namespace on top of the above (content snapshots, the Lease).
OWN_NAMESPACE: dict[tuple[str, str], tuple[str, ...]] = {
    ("", "configmaps"): ("create", "delete"),  # collecting snapshots nothing names (ADR 0084)
    ("", "secrets"): ("create",),
    ("coordination.k8s.io", "leases"): ("create", "get", "list", "update", "patch", "delete"),
}


def expected(ask: Ask) -> bool:
    key = (ask.group, ask.resource)
    if ask.verb in CLUSTER_WIDE.get(key, ()):
        return True
    return ask.namespace == OWN and ask.verb in OWN_NAMESPACE.get(key, ())


class Reviewer:
    """SubjectAccessReviews for one subject, remembered (the sweep asks many overlapping questions)."""

    def __init__(self, client: Client, user: str, groups: list[str]) -> None:
        self.client, self.user, self.groups = client, user, groups
        self._seen: dict[Ask, bool] = {}

    def allowed(self, ask: Ask) -> bool:
        if ask not in self._seen:
            resource, _, sub = ask.resource.partition("/")
            attributes = ResourceAttributes(
                group=ask.group,
                resource=resource,
                subresource=sub or None,
                verb=ask.verb,
                namespace=ask.namespace,
                name=ask.name,
            )
            spec = SubjectAccessReviewSpec(user=self.user, groups=self.groups, resourceAttributes=attributes)
            answer = self.client.create(SubjectAccessReview(spec=spec))
            self._seen[ask] = bool(answer.status and answer.status.allowed)
        return self._seen[ask]


@pytest.fixture(scope="module")
def installed(management: Client) -> None:
    install.install(management)


@pytest.fixture(scope="module")
def controller_sa(installed: None, management: Client) -> Reviewer:
    return Reviewer(management, SERVICE_ACCOUNT_USER, SA_GROUPS)


@pytest.fixture(scope="module")
def nobody(installed: None, management: Client) -> Reviewer:
    """A ServiceAccount without any role: what every service account may do anyway."""
    ns = f"nobody-{uuid.uuid4().hex[:6]}"
    groups = ["system:serviceaccounts", f"system:serviceaccounts:{ns}", "system:authenticated"]
    return Reviewer(management, f"system:serviceaccount:{ns}:nobody", groups)


@pytest.fixture(scope="module")
def sa_client(installed: None, local_fleet: fleet.FleetState) -> Iterator[Client]:
    """A client that authenticates with a token of the controller's ServiceAccount."""
    config = service_account_kubeconfig(local_fleet.cluster(fleet.MANAGEMENT).kubeconfig)
    with kubeclient.client(kubeclient.config_from_bytes(config)) as client:
        yield client


def served_resources(management: Client) -> list[tuple[str, str, bool]]:
    """(group, resource or resource/subresource, namespaced) for everything the server serves."""
    out: list[tuple[str, str, bool]] = []
    with kubeclient.http(management.config, timeout=30.0) as http:
        paths = ["/api/v1"]
        groups = http.get("/apis").json()["groups"]
        paths += [f"/apis/{g['preferredVersion']['groupVersion']}" for g in groups]
        for path in paths:
            group = path.removeprefix("/apis/").rpartition("/")[0] if path.startswith("/apis/") else ""
            for r in http.get(path).json()["resources"]:
                out.append((group, r["name"], bool(r["namespaced"])))
    return out


# --- the rules as written -------------------------------------------------------------------------


def test_the_rules_name_no_wildcard_and_nothing_that_escalates() -> None:
    docs = install.rbac_documents()
    roles = [d for d in docs if d["kind"] in ("ClusterRole", "Role")]
    assert {d["kind"] for d in roles} == {"ClusterRole", "Role"}
    for role in roles:
        for rule in role["rules"]:
            for field in ("apiGroups", "resources", "verbs"):
                assert all("*" not in value for value in rule[field]), (role["kind"], rule)
            assert not {"escalate", "bind", "impersonate"} & set(rule["verbs"]), rule
            assert "nonResourceURLs" not in rule


def test_secrets_are_read_by_one_rule_and_written_only_by_create_in_the_own_namespace() -> None:
    docs = {d["kind"]: d for d in install.rbac_documents()}
    cluster_secret_rules = [r for r in docs["ClusterRole"]["rules"] if "secrets" in r["resources"]]
    assert len(cluster_secret_rules) == 1
    assert cluster_secret_rules[0]["verbs"] == ["get", "list", "watch"]
    own = [r for r in docs["Role"]["rules"] if "secrets" in r["resources"]]
    assert [r["verbs"] for r in own] == [["create"]]
    assert docs["Role"]["metadata"]["namespace"] == OWN


def test_every_kind_the_controllers_watch_is_readable() -> None:
    """The informers' kinds come from the controllers' own tables: a kind added there must be added
    to `mgmt.rbac` (and to this module's CLUSTER_WIDE) or this fails."""
    watched = {(FW, m.plural) for m in models.KINDS.values()}
    watched |= {("", "configmaps"), ("", "secrets"), ("coordination.k8s.io", "leases")}
    for resource in kubefleet.SELECTABLE.values():
        info = resource._api_info
        watched.add((info.resource.group, info.plural))
    readable = {
        (rule.group, r)
        for rule in rbac.cluster_rules()
        if set(READ) <= set(rule.verbs)
        for r in rule.resources
    }
    assert watched == readable
    assert all(set(READ) <= set(CLUSTER_WIDE[key]) for key in watched)


# --- what the API server says ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "ask",
    [
        Ask("", "nodes/proxy", "get"),
        Ask("", "nodes/proxy", "create"),
        Ask("", "pods/exec", "create"),
        Ask("", "pods/exec", "get"),
        Ask("", "pods/attach", "create"),
        Ask("", "pods/attach", "get"),
        Ask("", "pods/portforward", "create"),
        Ask("", "services/proxy", "get"),
        Ask("", "serviceaccounts/token", "create"),
        Ask("", "pods", "list"),
        Ask("", "nodes", "list"),
        Ask("", "secrets", "create", "default"),
        Ask("", "secrets", "update", "default"),
        Ask("", "secrets", "patch", "kube-system"),
        Ask("", "secrets", "delete", "kube-system"),
        Ask("", "secrets", "deletecollection", "default"),
        Ask("", "secrets", "create"),  # in every namespace at once
        Ask("", "secrets", "update", OWN),  # not even its own: snapshots are immutable
        Ask("", "secrets", "patch", OWN),
        Ask("", "secrets", "delete", OWN),
        Ask("", "configmaps", "update", "default"),
        Ask("", "configmaps", "create", "default"),
        Ask("", "configmaps", "delete", "default"),  # only its own snapshots' namespace
        Ask("", "configmaps", "update", OWN),  # snapshots are immutable: created, then deleted
        Ask("coordination.k8s.io", "leases", "delete", "kube-system", "kube-scheduler"),
        Ask("coordination.k8s.io", "leases", "update", "kube-system", install.SERVICE_ACCOUNT),
        Ask("rbac.authorization.k8s.io", "clusterroles", "escalate"),
        Ask("rbac.authorization.k8s.io", "clusterroles", "bind"),
        Ask("rbac.authorization.k8s.io", "clusterrolebindings", "create"),
        Ask("", "users", "impersonate"),
        Ask("", "serviceaccounts", "impersonate", OWN),
        Ask(FW, "clusterpromotions", "delete"),
        Ask(FW, "memberclusters", "update"),
    ],
    ids=lambda a: f"{a.verb}-{a.resource}-{a.namespace or 'all'}",
)
def test_denied(controller_sa: Reviewer, ask: Ask) -> None:
    assert not controller_sa.allowed(ask)


@pytest.mark.parametrize(
    "ask",
    [
        Ask("", "secrets", "list"),  # member kubeconfigs and content, in every namespace
        Ask("", "secrets", "watch"),
        Ask("", "secrets", "get", "default"),
        Ask("", "secrets", "create", OWN),  # content snapshots of Secret content
        Ask("", "configmaps", "create", OWN),
        Ask("", "configmaps", "delete", OWN),  # collecting snapshots; a Secret one through its anchor
        Ask("", "events", "create", "default"),
        Ask("", "events", "patch", "some-tenant"),
        Ask("coordination.k8s.io", "leases", "create", OWN),
        Ask("coordination.k8s.io", "leases", "get", OWN, install.SERVICE_ACCOUNT),
        Ask("coordination.k8s.io", "leases", "update", OWN, install.SERVICE_ACCOUNT),
        Ask(FW, "clusterprofiles", "patch"),
        Ask(FW, "clustersummaries", "create", "tenant-a"),
        Ask(FW, "clustersummaries/status", "patch", "tenant-a"),
        Ask(FW, "clusterstagedupdateruns/status", "patch"),
        Ask(FW, "clusterpromotions/finalizers", "update"),
        Ask("apps", "deployments", "watch"),
        Ask("rbac.authorization.k8s.io", "clusterroles", "list"),
    ],
    ids=lambda a: f"{a.verb}-{a.resource}-{a.namespace or 'all'}",
)
def test_allowed(controller_sa: Reviewer, ask: Ask) -> None:
    assert controller_sa.allowed(ask)


def test_nothing_the_server_serves_is_granted_beyond_the_list(
    controller_sa: Reviewer, nobody: Reviewer, management: Client, namespace: str
) -> None:
    """Every verb on every resource and subresource, cluster-wide, in a tenant's namespace and in the
    controller's own: allowed exactly when the list says so (or any service account may)."""
    served = served_resources(management)
    assert ("", "nodes/proxy", False) in served
    assert ("", "pods/exec", True) in served
    assert (FW, "clustersummaries/status", True) in served
    extra, missing = [], []
    for group, resource, namespaced in served:
        verbs = SUB_VERBS if "/" in resource else TOP_VERBS
        places: tuple[str | None, ...] = (None, namespace, OWN) if namespaced else (None,)
        for verb, place in itertools.product(verbs, places):
            ask = Ask(group, resource, verb, place)
            granted = controller_sa.allowed(ask)
            if granted and not expected(ask) and not nobody.allowed(ask):
                extra.append(ask)
            if expected(ask) and not granted:
                missing.append(ask)
    assert not extra, f"granted beyond what the controllers use: {extra}"
    assert not missing, f"needed by the controllers but not granted: {missing}"


def test_the_service_accounts_own_token_is_refused_where_the_reviews_say(
    sa_client: Client, management: Client, namespace: str
) -> None:
    """Real requests, with the ServiceAccount's token: authorization is decided before the object
    is looked up, so a 403 (not a 404) for objects that do not exist."""
    foreign = Secret(metadata=ObjectMeta(name="stolen", namespace=namespace), stringData={"k": "v"})
    with pytest.raises(ApiError) as refused:
        sa_client.create(foreign)
    assert refused.value.status.code == 403
    management.create(Secret(metadata=ObjectMeta(name="theirs", namespace=namespace), stringData={"k": "v"}))
    assert sa_client.get(Secret, "theirs", namespace=namespace).metadata is not None  # read: needed
    for attempt in (
        lambda: sa_client.patch(Secret, "theirs", {"stringData": {"k": "w"}}, namespace=namespace),
        lambda: sa_client.delete(Secret, "theirs", namespace=namespace),
        lambda: sa_client.create(ConfigMap(metadata=ObjectMeta(name="x", namespace=namespace))),
    ):
        with pytest.raises(ApiError) as refused:
            attempt()
        assert refused.value.status.code == 403
    with kubeclient.http(sa_client.config, timeout=30.0) as http:
        for method, path in (
            ("GET", "/api/v1/nodes/kwok-node-0/proxy/"),
            ("POST", f"/api/v1/namespaces/{namespace}/pods/nope/exec?command=id&stdout=true"),
            ("POST", f"/api/v1/namespaces/{namespace}/pods/nope/attach?stdout=true"),
            ("GET", "/api/v1/pods"),
        ):
            response = http.request(method, path)
            assert response.status_code == 403, (method, path, response.status_code)


# --- the controller under that RBAC ------------------------------------------------------------


@pytest.fixture(scope="module")
def controller(
    installed: None, local_fleet: fleet.FleetState, management: Client, bins: binaries.Binaries
) -> Iterator[ControllerThread]:
    with (
        registered(management, local_fleet),
        running_controller(local_fleet, bins.path("helm"), "rbac") as thread,
    ):
        yield thread


def test_the_shared_controller_fixture_runs_as_the_service_account(controller: ControllerThread) -> None:
    with kubeclient.client(kubeclient.config_from_bytes(controller.kubeconfig)) as client:
        review = client.create(SelfSubjectReview())
    info = review.status.userInfo
    assert info.username == SERVICE_ACCOUNT_USER
    assert "system:masters" not in (info.groups or [])


def test_a_promotion_rolls_out_under_the_installed_rbac(
    controller: ControllerThread, management: Client, members: dict[str, Client], namespace: str
) -> None:
    """Content from a tenant's ConfigMap, pinned into a snapshot, delivered stage by stage; Events and
    status written; nothing refused (the fixture fails on any refusal the controller logs)."""
    name = f"rbac-{uuid.uuid4().hex[:6]}"
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
    promotion: dict[str, Any] = {
        "apiVersion": f"{kinds.GROUP}/{kinds.VERSION}",
        "kind": "ClusterPromotion",
        "metadata": {"name": name},
        "spec": {
            "profileSpec": {"policyRefs": [{"kind": "ConfigMap", "name": name, "namespace": namespace}]},
            "stages": [
                {
                    "name": "dev",
                    "clusterSelector": {"matchLabels": {"env": "dev"}},
                    "trigger": {"auto": {"delay": "1s"}},
                },
                {"name": "staging", "clusterSelector": {"matchLabels": {"env": "staging"}}},
            ],
        },
    }
    manifests.apply(management, [content, promotion])
    with deleted_after(management, name):
        wait_for(
            lambda: stage_phases(management, name).get("staging") == "Succeeded", what="staging promoted"
        )

        def landed(member: str) -> str | None:
            try:
                return (members[member].get(ConfigMap, "hello", namespace=namespace).data or {}).get("from")
            except ApiError as e:
                if e.status.code == 404:
                    return None
                raise

        assert wait_for(lambda: landed("member-1"), what="dev delivered") == name
        assert wait_for(lambda: landed("member-2"), what="staging delivered") == name
        assert landed("member-3") is None  # prod is in no stage
        snapshots = management.list(ConfigMap, namespace=OWN, labels={"fleetwave.io/content": "snapshot"})
        assert any(True for _ in snapshots)  # created by the ServiceAccount in its own namespace
