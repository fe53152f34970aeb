"""With watched namespaces (ADR 0074) the RBAC grants nothing namespaced cluster-wide: every right on
a namespaced resource is bound in the watched namespaces only, and no right is lost or added."""

from __future__ import annotations

from typing import Any

from fleetwave.api import families
from fleetwave.mgmt import install, rbac

NAMESPACED = {"configmaps", "secrets", "serviceaccounts", "services", "deployments", "memberclusters"}


def _grants(rules: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    return {(r["apiGroups"][0], res, v) for r in rules for res in r["resources"] for v in r["verbs"]}


def _by(docs: list[dict[str, Any]], kind: str) -> dict[tuple[str, str | None], dict[str, Any]]:
    return {(d["metadata"]["name"], d["metadata"].get("namespace")): d for d in docs if d["kind"] == kind}


def test_split_keeps_every_grant_and_puts_each_on_its_scope() -> None:
    for rules in (rbac.cluster_rules(), [r for f in families.UPSTREAM for r in rbac.family_rules(f)]):
        cluster, namespaced = rbac.split(rules)
        every = _grants([r.manifest() for r in rules])
        assert _grants([r.manifest() for r in cluster]) | _grants([r.manifest() for r in namespaced]) == every
        assert not _grants([r.manifest() for r in cluster]) & _grants([r.manifest() for r in namespaced])


def test_no_namespaced_read_is_granted_cluster_wide_when_namespaces_are_watched() -> None:
    docs = install.rbac_documents(watch=("team-b", "team-a"))
    roles = _by(docs, "ClusterRole")
    cluster_wide = _grants(roles[(rbac.NAME, None)]["rules"])
    assert not {res for _, res, _ in cluster_wide} & NAMESPACED
    assert ("", "secrets", "get") not in cluster_wide
    assert ("", "namespaces", "list") in cluster_wide  # a cluster-scoped kind stays cluster-wide
    assert ("", "events", "create") in cluster_wide  # events of cluster-scoped objects go to default
    watched = _grants(roles[(rbac.WATCHED_NAME, None)]["rules"])
    assert ("", "secrets", "watch") in watched
    assert ("fleetwave.io", "clustersummaries", "create") in watched
    assert not {res for _, res, _ in watched} & {"namespaces", "clusterroles", "clusterprofiles"}
    bindings = _by(docs, "RoleBinding")
    where = sorted(ns for name, ns in bindings if name == rbac.WATCHED_NAME)
    assert where == ["fleetwave-system", "team-a", "team-b"]  # the controller's own namespace too
    for (name, _ns), binding in bindings.items():
        if name == rbac.WATCHED_NAME:
            assert binding["roleRef"] == {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": rbac.WATCHED_NAME,
            }
    assert set(_by(docs, "ClusterRoleBinding")) == {(rbac.NAME, None)}


def test_without_watched_namespaces_the_install_is_unchanged() -> None:
    docs = install.rbac_documents()
    assert [d["kind"] for d in docs] == [
        "Namespace",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
    ]
    assert _grants(docs[2]["rules"]) == _grants([r.manifest() for r in rbac.cluster_rules()])
