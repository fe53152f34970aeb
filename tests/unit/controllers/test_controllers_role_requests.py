"""RoleRequests (ADR 0111): what a tenant admin is granted in a member, and what is refused."""

from __future__ import annotations

from typing import Any

import pytest

from fleetwave.api.tenancy import RoleRequestSpec
from fleetwave.controllers.fleet import role_requests, tenancy

ADMIN = tenancy.TenantAdmin("eng", "eng")
ROLE = {
    "apiVersion": tenancy.RBAC,
    "kind": "Role",
    "metadata": {"name": "eng-full-access"},
    "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}],
}
CLUSTER_ROLE = {**ROLE, "kind": "ClusterRole", "metadata": {"name": "eng-reader"}}


def test_each_role_is_granted_with_a_binding_to_the_tenant_admin_and_labelled_with_the_request() -> None:
    objects = tenancy.member_objects("full-access", ADMIN, [ROLE, CLUSTER_ROLE])
    kinds = [(o["kind"], o["metadata"]["name"], o["metadata"].get("namespace")) for o in objects]
    assert kinds == [
        ("ServiceAccount", "eng", "eng"),
        ("Role", "eng-full-access", "eng"),  # a Role without a namespace goes to the admin's
        ("RoleBinding", "full-access-role-eng-full-access", "eng"),
        ("ClusterRole", "eng-reader", None),
        ("ClusterRoleBinding", "full-access-clusterrole-eng-reader", None),
    ]
    subjects = {str(o.get("subjects")) for o in objects if o["kind"].endswith("Binding")}
    assert subjects == {str([{"kind": "ServiceAccount", "name": "eng", "namespace": "eng"}])}
    assert all(o["metadata"]["labels"][tenancy.REQUEST_LABEL] == "full-access" for o in objects)
    assert "labels" not in ROLE["metadata"]  # the role as read is not changed


@pytest.mark.parametrize(
    "obj",
    [
        {"apiVersion": tenancy.RBAC, "kind": "ClusterRoleBinding", "metadata": {"name": "x"}},
        {"apiVersion": tenancy.RBAC, "kind": "RoleBinding", "metadata": {"name": "x"}},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}},
        {"apiVersion": "rbac.authorization.k8s.io/v1beta1", "kind": "Role", "metadata": {"name": "x"}},
    ],
)
def test_only_roles_and_cluster_roles_can_be_granted(obj: dict[str, Any]) -> None:
    problem = tenancy.roles_problem([ROLE, obj])
    assert problem.startswith("roleRefs may hold only Roles and ClusterRoles"), problem
    assert tenancy.roles_problem([ROLE, CLUSTER_ROLE]) == ""


def test_more_roles_than_the_bound_are_refused() -> None:
    assert "more than" in tenancy.roles_problem([ROLE] * (tenancy.MAX_ROLES + 1))


def test_a_cluster_that_stops_matching_loses_its_grant_and_every_matching_one_is_granted() -> None:
    assert tenancy.plan({"dev/dev", "qa/qa"}, {"dev/dev", "prod/prod"}) == (
        ["dev/dev", "qa/qa"],
        ["prod/prod"],
    )


class _Cache:
    def get(self, kind: str, namespace: str | None, name: str) -> None:
        return None

    def memo(self, *_: Any, **__: Any) -> frozenset[tuple[str, str]]:
        return frozenset()

    def has(self, kind: str) -> bool:
        return False


class _Ctx:
    cache, namespace, watched, local_content_kinds = _Cache(), "fleetwave-system", None, None


def _spec(**fields: Any) -> RoleRequestSpec:
    return RoleRequestSpec.model_validate(
        {"serviceAccountName": "eng", "serviceAccountNamespace": "eng", **fields}
    )


def test_a_role_request_setting_expiration_seconds_is_refused_by_name() -> None:
    problem, objects = role_requests._grants(_Ctx(), "r", _spec(expirationSeconds=600))  # type: ignore[arg-type]
    assert problem.startswith("spec.expirationSeconds: fleetwave issues no token")
    assert objects == []


def test_role_refs_are_read_only_outside_fleetwaves_namespace_and_must_exist() -> None:
    in_ours = _spec(roleRefs=[{"kind": "ConfigMap", "namespace": "fleetwave-system", "name": "r"}])
    problem, _ = role_requests._grants(_Ctx(), "r", in_ours)  # type: ignore[arg-type]
    assert problem == (
        "spec.roleRefs[0] (ConfigMap fleetwave-system/r): fleetwave's own namespace is never a content source"
    )
    missing = _spec(roleRefs=[{"kind": "ConfigMap", "namespace": "default", "name": "r"}])
    problem, _ = role_requests._grants(_Ctx(), "r", missing)  # type: ignore[arg-type]
    assert problem == "spec.roleRefs[0] (ConfigMap default/r) not found"


def test_an_empty_selector_grants_nowhere_as_sveltos() -> None:
    assert role_requests._matching(_Ctx(), None) == {}  # type: ignore[arg-type]
