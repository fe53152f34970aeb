"""The one table of built-in placeable kinds, and the three things derived from it: what a placement
may select, the informers over those kinds, and the controller's right to read them."""

from __future__ import annotations

import pytest

from fleetwave.controllers.kubefleet import SELECTABLE, selection
from fleetwave.kube import kinds, placeable
from fleetwave.mgmt import rbac

TABLE = {(i.gvk.group, i.plural) for i in placeable.BUILTIN}


@pytest.mark.parametrize("info", placeable.BUILTIN, ids=lambda i: i.gvk.kind)
def test_each_row_is_what_kubernetes_calls_the_kind(info: kinds.KindInfo) -> None:
    assert kinds.builtin(info.gvk) == info  # plural and scope as lightkube's built-in table has them


def test_kinds_are_unique() -> None:
    assert len({i.gvk.kind for i in placeable.BUILTIN}) == len(placeable.BUILTIN)


def test_the_rbac_rules_read_exactly_the_placeable_kinds() -> None:
    rules = rbac.placeable_rules()
    assert all(r.verbs == rbac.READ and not r.resource_names for r in rules)
    granted = [(r.group, resource) for r in rules for resource in r.resources]
    assert len(granted) == len(set(granted))  # each once
    assert set(granted) == TABLE
    assert all(r in rbac.cluster_rules() for r in rules)


def test_no_other_rule_reads_a_builtin_kind() -> None:
    """Reading a built-in kind is granted for placements only: a kind dropped from the table loses
    its right, and a right on a built-in kind needs a row (ConfigMaps and Secrets have one)."""
    reads = {
        (r.group, resource)
        for r in rbac.cluster_rules()
        if r.group != rbac.GROUP and set(rbac.READ) <= set(r.verbs)
        for resource in r.resources
    }
    # Leases are read for pull members' agents' liveness (ADR 0106), never placed.
    assert reads - {("coordination.k8s.io", "leases")} == TABLE


def test_with_watched_namespaces_each_kind_is_read_in_its_own_scope() -> None:
    cluster, namespaced = rbac.split(rbac.placeable_rules())
    assert {(r.group, p) for r in cluster for p in r.resources} == {
        (i.gvk.group, i.plural) for i in placeable.BUILTIN if not i.namespaced
    }
    assert {(r.group, p) for r in namespaced for p in r.resources} == {
        (i.gvk.group, i.plural) for i in placeable.BUILTIN if i.namespaced
    }


def test_selection_and_the_informers_cover_exactly_the_table() -> None:
    expected = {(i.gvk.api_version, i.gvk.kind, i.namespaced) for i in placeable.BUILTIN}
    assert {(k.api_version, k.name, k.namespaced) for k in selection.KINDS.values()} == expected
    assert list(SELECTABLE) == [i.gvk.kind for i in placeable.BUILTIN]
