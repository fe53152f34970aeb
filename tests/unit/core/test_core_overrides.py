"""Per-cluster overrides (core.overrides): upstream's selection, order, variables and failures."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as s

from fleetwave.core import model as m
from fleetwave.core import overrides as co

PROD = co.Member("member-1", {"env": "prod", "region": "west"})
DEV = co.Member("member-2", {"env": "dev"})
ENV_PROD = (m.Selector(match_labels=(("env", "prod"),)),)


def ns(name: str = "app") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def cm(name: str = "cfg", namespace: str = "app", **data: str) -> dict[str, Any]:
    meta = {"name": name, "namespace": namespace}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data or {"color": "blue"}}


def cro(name: str, *rules: co.Rule, target: co.Target | None = None, **kw: Any) -> co.Override:
    target = target or co.Target("", "v1", "Namespace", "app")
    return co.Override(name, None, f"h-{name}", (target,), rules, **kw)


def ro(name: str, *rules: co.Rule, namespace: str = "app", obj: str = "cfg", **kw: Any) -> co.Override:
    target = co.Target("", "v1", "ConfigMap", obj, namespace)
    return co.Override(name, namespace, f"h-{name}", (target,), rules, **kw)


def patch(op: str, path: str, value: Any = None, clusters: Any = ENV_PROD) -> co.Rule:
    return co.Rule(clusters, patches=(co.Patch(op, path, value),))


LABEL = patch("add", "/metadata/labels", {"cluster-name": "${MEMBER-CLUSTER-NAME}"})


def test_a_namespace_override_labels_the_namespace_and_its_objects_on_matching_clusters_only() -> None:
    objects = [ns(), cm()]
    got = co.render([cro("label-0", LABEL)], PROD, objects)
    assert [o["metadata"]["labels"] for o in got.objects] == [{"cluster-name": "member-1"}] * 2
    assert got.cluster_overrides == ("label-0",)
    untouched = co.render([cro("label-0", LABEL)], DEV, objects)
    assert list(untouched.objects) == objects
    assert untouched.cluster_overrides == ()
    assert objects[1]["metadata"] == {"name": "cfg", "namespace": "app"}  # the input is not edited


def test_resource_overrides_follow_cluster_overrides_and_win_on_the_same_field() -> None:
    both = [
        ro("data-0", patch("replace", "/data/color", "red")),
        cro("c-0", patch("replace", "/data/color", "x")),
    ]
    got = co.render(co.for_placement(both, [cm()], "crp", None), PROD, [cm()])
    assert got.objects[0]["data"] == {"color": "red"}
    assert (got.cluster_overrides, got.resource_overrides) == (("c-0",), (("app", "data-0"),))


def test_a_delete_rule_leaves_the_object_out_on_matching_clusters() -> None:
    gone = ro("drop-0", co.Rule(ENV_PROD, delete=True))
    assert co.render([gone], PROD, [ns(), cm()]).objects == (ns(),)
    assert co.render([gone], DEV, [ns(), cm()]).objects == (ns(), cm())


def test_no_cluster_selector_matches_no_cluster_and_empty_terms_match_all() -> None:
    assert not co.rule_matches(co.Rule(None), PROD)
    assert co.rule_matches(co.Rule(()), DEV)
    assert not co.rule_matches(co.Rule((None,)), PROD)  # a term without labelSelector


def test_cluster_label_variables_are_filled_and_a_missing_label_fails_naming_it() -> None:
    region = ro(
        "r-0", patch("add", "/data/region", "${MEMBER-CLUSTER-LABEL-KEY-region}-${MEMBER-CLUSTER-NAME}")
    )
    assert co.render([region], PROD, [cm()]).objects[0]["data"]["region"] == "west-member-1"
    anywhere = ro("r-0", patch("add", "/data/zone", "${MEMBER-CLUSTER-LABEL-KEY-zone}", clusters=()))
    with pytest.raises(co.OverrideError, match="cluster member-2 has no label zone"):
        co.render([anywhere], DEV, [cm()])


def test_a_bad_path_fails_naming_the_override_rule_patch_and_object() -> None:
    bad = ro("bad-0", patch("add", "/data/a", "1"), patch("replace", "/spec/missing", "x"))
    with pytest.raises(co.OverrideError) as e:
        co.render([bad], PROD, [ns(), cm()])
    message = str(e.value)
    assert "ResourceOverride snapshot app/bad-0, rule 1, patch 0 (replace /spec/missing)" in message
    assert 'ConfigMap "app/cfg"' in message


def test_an_override_may_not_change_what_object_it_is() -> None:
    rename = ro("rename-0", patch("replace", "/metadata/name", "other"))
    with pytest.raises(co.OverrideError, match="changed the identity"):
        co.render([rename], PROD, [cm()])


def test_two_overrides_of_one_kind_on_one_object_fail_naming_both() -> None:
    twice = [ro("a-0", patch("add", "/data/x", "1")), ro("b-0", patch("add", "/data/y", "2"))]
    with pytest.raises(co.OverrideError, match="selected by both ResourceOverride snapshot app/a-0 and"):
        co.render(twice, PROD, [cm()])


def test_for_placement_keeps_overrides_aimed_at_it_that_select_its_objects() -> None:
    aimed = ro("mine-0", LABEL, placement=co.PlacementRef("crp"))
    other = ro("other-0", LABEL, placement=co.PlacementRef("another"))
    elsewhere = ro("elsewhere-0", LABEL, obj="unplaced")
    rp_only = ro("rp-0", LABEL, placement=co.PlacementRef("crp", "Namespaced"))
    found = co.for_placement([aimed, other, elsewhere, rp_only], [cm()], "crp", None)
    assert [o.name for o in found] == ["mine-0"]
    assert [o.name for o in co.for_placement([rp_only], [cm()], "crp", "app")] == ["rp-0"]


def test_the_digest_is_the_contents_unless_an_override_applies_and_follows_its_revision() -> None:
    label = cro("label-0", LABEL)
    assert co.digest("c", [label], DEV) == "c"
    first = co.digest("c", [label], PROD)
    assert first != "c"
    edited = co.Override("label-1", None, "h-new", label.targets, label.rules)
    assert co.digest("c", [edited], PROD) != first
    assert co.revision("c", []) == "c"
    assert co.revision("c", [label]) != co.revision("c", [edited])


_names = s.text("abcdefgh", min_size=1, max_size=6)
_objects = s.lists(
    s.builds(cm, name=_names, namespace=s.sampled_from(["app", "web"]), color=_names), max_size=4
)
_labels = s.dictionaries(s.sampled_from(["env", "tier"]), s.sampled_from(["prod", "dev"]), max_size=2)


@given(_objects, _labels)
def test_no_override_is_the_identity(objects: list[dict[str, Any]], labels: dict[str, str]) -> None:
    assert list(co.render([], co.Member("m", labels), objects).objects) == objects


@given(_objects, _labels)
def test_a_rule_no_cluster_matches_changes_nothing(
    objects: list[dict[str, Any]], labels: dict[str, str]
) -> None:
    never = (m.Selector(match_labels=(("env", "never"),)),)
    unmatched = [
        cro("c-0", co.Rule(never, delete=True), target=co.Target("", "v1", "Namespace", "app")),
        ro("r-0", patch("replace", "/nothing/here", 1, clusters=never), obj="a"),
    ]
    got = co.render(unmatched, co.Member("m", labels), objects)
    assert list(got.objects) == objects
    assert (got.cluster_overrides, got.resource_overrides) == ((), ())
