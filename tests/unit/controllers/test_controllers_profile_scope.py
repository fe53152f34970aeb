"""A namespaced Profile compiled into its generated ClusterProfile (ADR 0110): pure decisions."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetwave import translate
from fleetwave.api.models import ClusterProfile
from fleetwave.controllers.fleet import members
from fleetwave.controllers.sveltos import namespaced_profile, profile_scope
from fleetwave.core import selectors

OWN = "team-a"
NOW = datetime(2026, 1, 1, tzinfo=UTC)
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def _refused(spec: dict[str, Any]) -> str:
    with pytest.raises(profile_scope.Refused) as e:
        profile_scope.confine(OWN, spec)
    return str(e.value)


def test_the_generated_name_is_upstreams_prefix_unique_per_namespace_and_fits_a_label() -> None:
    assert profile_scope.generated_name("team-a", "web") == "p--team-a.web"
    # A namespace has no dot: `a-b.c` and `a.b-c` never meet.
    assert profile_scope.generated_name("a-b", "c") != profile_scope.generated_name("a", "b-c")
    long = profile_scope.generated_name("n" * 63, "x" * 253)
    assert len(long) <= 63
    assert DNS_SUBDOMAIN.match(long)
    assert long != profile_scope.generated_name("n" * 63, "x" * 252)


def test_the_selector_is_anded_with_the_namespace_and_an_empty_one_still_selects_nothing() -> None:
    spec = profile_scope.confine(OWN, {"clusterSelector": {"matchLabels": {"env": "prod"}}})
    assert spec["clusterSelector"] == {
        "matchLabels": {"env": "prod"},
        "matchExpressions": [{"key": translate.NAMESPACE_LABEL, "operator": "In", "values": [OWN]}],
    }
    assert "clusterSelector" not in profile_scope.confine(OWN, {"clusterSelector": {}})


def test_cluster_refs_default_to_the_profiles_namespace_and_another_is_refused() -> None:
    spec = profile_scope.confine(OWN, {"clusterRefs": [{"kind": "SveltosCluster", "name": "c1"}]})
    assert spec["clusterRefs"] == [{"kind": "SveltosCluster", "name": "c1", "namespace": OWN}]
    message = _refused({"clusterRefs": [{"name": "c1", "namespace": OWN}, {"name": "c2", "namespace": "b"}]})
    assert message.startswith("spec.clusterRefs[1].namespace: b: a Profile selects only clusters")


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        (
            {"policyRefs": [{"kind": "ConfigMap", "name": "x", "namespace": "b"}]},
            "spec.policyRefs[0].namespace",
        ),
        (
            {"kustomizationRefs": [{"kind": "ConfigMap", "name": "k", "namespace": "b"}]},
            "spec.kustomizationRefs[0].namespace",
        ),
        (
            {
                "helmCharts": [
                    {"releaseName": "r", "valuesFrom": [{"kind": "Secret", "name": "v", "namespace": "b"}]}
                ]
            },
            "spec.helmCharts[0].valuesFrom[0].namespace",
        ),
        (
            {
                "kustomizationRefs": [
                    {"name": "k", "valuesFrom": [{"kind": "ConfigMap", "name": "v", "namespace": "b"}]}
                ]
            },
            "spec.kustomizationRefs[0].valuesFrom[0].namespace",
        ),
        (
            {"patchesFrom": [{"kind": "ConfigMap", "name": "p", "namespace": "b"}]},
            "spec.patchesFrom[0].namespace",
        ),
        (
            {
                "templateResourceRefs": [
                    {"identifier": "i", "resource": {"kind": "Secret", "name": "s", "namespace": "b"}}
                ]
            },
            "spec.templateResourceRefs[0].resource.namespace",
        ),
        (
            {
                "templateResourceRefs": [
                    {
                        "identifier": "i",
                        "resource": {"kind": "Secret", "name": "s", "namespace": "{{ .Cluster.x }}"},
                    }
                ]
            },
            "spec.templateResourceRefs[0].resource.namespace",
        ),
        (
            {
                "helmCharts": [
                    {
                        "releaseName": "r",
                        "registryCredentialsConfig": {"credentials": {"name": "c", "namespace": "b"}},
                    }
                ]
            },
            "spec.helmCharts[0].registryCredentialsConfig.credentials.namespace",
        ),
        (
            {
                "helmCharts": [
                    {"releaseName": "r", "registryCredentialsConfig": {"ca": {"name": "c", "namespace": "b"}}}
                ]
            },
            "spec.helmCharts[0].registryCredentialsConfig.ca.namespace",
        ),
    ],
)
def test_a_content_reference_to_another_namespace_is_refused_naming_the_field(
    spec: dict[str, Any], field: str
) -> None:
    assert _refused(spec).startswith(f"{field}: "), _refused(spec)


def test_content_references_without_a_namespace_get_the_profiles() -> None:
    spec = profile_scope.confine(
        OWN,
        {
            "policyRefs": [{"kind": "ConfigMap", "name": "x"}],
            "kustomizationRefs": [{"name": "k", "valuesFrom": [{"kind": "ConfigMap", "name": "v"}]}],
            "helmCharts": [
                {
                    "releaseName": "r",
                    "valuesFrom": [{"kind": "Secret", "name": "v"}],
                    "registryCredentialsConfig": {"credentials": {"name": "c"}, "ca": {"name": "ca"}},
                }
            ],
            "patchesFrom": [{"kind": "ConfigMap", "name": "p"}],
            "templateResourceRefs": [
                {"identifier": "i", "resource": {"kind": "Secret", "name": "{{ .Cluster.n }}"}}
            ],
        },
    )
    assert spec["policyRefs"][0]["namespace"] == OWN
    assert spec["kustomizationRefs"][0]["namespace"] == OWN
    assert spec["kustomizationRefs"][0]["valuesFrom"][0]["namespace"] == OWN
    assert spec["helmCharts"][0]["valuesFrom"][0]["namespace"] == OWN
    assert spec["helmCharts"][0]["registryCredentialsConfig"]["credentials"]["namespace"] == OWN
    assert spec["helmCharts"][0]["registryCredentialsConfig"]["ca"]["namespace"] == OWN
    assert spec["patchesFrom"][0]["namespace"] == OWN
    assert spec["templateResourceRefs"][0]["resource"] == {
        "kind": "Secret",
        "name": "{{ .Cluster.n }}",
        "namespace": OWN,
    }


def test_namespaces_on_the_member_are_the_tenants_to_choose() -> None:
    check = {
        "name": "c",
        "featureID": "Resources",
        "group": "",
        "version": "v1",
        "kind": "Pod",
        "namespace": "kube-system",
    }
    patch = {"patch": "x", "target": {"kind": "Deployment", "namespace": "other"}}
    spec = profile_scope.confine(OWN, {"validateHealths": [check], "patches": [patch]})
    assert spec["validateHealths"] == [check]
    assert spec["patches"] == [patch]


def test_local_deployment_is_refused_and_depends_on_names_the_generated_profiles() -> None:
    local = {"kind": "ConfigMap", "name": "x", "namespace": OWN, "deploymentType": "Local"}
    assert _refused({"policyRefs": [local]}).startswith("spec.policyRefs[0].deploymentType: Local")
    spec = profile_scope.confine(OWN, {"dependsOn": ["base"]})
    assert spec["dependsOn"] == ["p--team-a.base"]


def test_the_generated_profile_names_its_profile_and_only_it_is_recognised() -> None:
    generated = profile_scope.generate(OWN, "web", {})
    body = {"metadata": {"labels": dict(generated.labels), "annotations": dict(generated.annotations)}}
    assert profile_scope.owner_of(body) == (OWN, "web")
    # An annotation claiming another namespace than the label says is nobody's.
    forged = {
        "metadata": {
            "labels": dict(generated.labels),
            "annotations": {profile_scope.PROFILE_ANNOTATION: "b/web"},
        }
    }
    assert profile_scope.owner_of(forged) is None
    assert profile_scope.owner_of({"metadata": {}}) is None
    assert namespaced_profile.profile_of(body) == ["team-a/web"]


def test_the_status_mirrors_the_generated_profile_under_the_profiles_generation() -> None:
    raw = {"metadata": {"name": "web", "namespace": OWN, "generation": 4}}
    ref = {"apiVersion": "v", "kind": "SveltosCluster", "namespace": OWN, "name": "c1"}
    ready = {"type": "Ready", "status": "True", "reason": "Ready", "message": "", "observedGeneration": 2}
    current = {
        "metadata": {"generation": 2},
        "status": {
            "matchingClusters": [ref],
            "updatedClusters": {"hash": "h", "clusters": [ref]},
            "conditions": [ready],
        },
    }
    status = namespaced_profile.mirror(raw, "p--team-a.web", current, NOW)
    assert status["matchingClusters"] == [ref]
    assert status["updatedClusters"] == {"hash": "h", "clusters": [ref]}
    assert status["clusterSummaries"] == ["p--team-a.web-sveltos-c1"]
    assert status["conditions"] == [{**ready, "observedGeneration": 4}]
    # Conditions of an older spec of the generated profile are not shown as this Profile's.
    stale = {**current, "metadata": {"generation": 3}}
    waiting = namespaced_profile.mirror(raw, "p--team-a.web", stale, NOW)["conditions"]
    assert [(c["status"], c["reason"]) for c in waiting] == [("False", "Generating")]


# --- the property: never another namespace's cluster, never another namespace's content ---------

NAMESPACES = st.sampled_from([OWN, "team-b", "kube-system", ""])
NAMES = st.sampled_from(["c1", "c2", "edge"])
LABELS = st.dictionaries(st.sampled_from(["env", "tier"]), st.sampled_from(["prod", "dev"]), max_size=2)


@st.composite
def _refs(draw: st.DrawFn) -> dict[str, Any]:
    ns = draw(NAMESPACES)
    return {"kind": "ConfigMap", "name": draw(NAMES), **({"namespace": ns} if ns else {})}


@st.composite
def _specs(draw: st.DrawFn) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if draw(st.booleans()):
        spec["clusterSelector"] = {"matchLabels": draw(LABELS)}
    else:
        refs = draw(st.lists(st.tuples(NAMESPACES, NAMES), max_size=3))
        spec["clusterRefs"] = [{"name": n, **({"namespace": ns} if ns else {})} for ns, n in refs]
    spec["policyRefs"] = draw(st.lists(_refs(), max_size=2))
    spec["patchesFrom"] = draw(st.lists(_refs(), max_size=1))
    chart = {
        "repositoryURL": "https://c.example",
        "chartName": "c",
        "releaseName": "r",
        "releaseNamespace": "r",
    }
    spec["helmCharts"] = [{**chart, "valuesFrom": draw(st.lists(_refs(), max_size=2))}]
    resource = draw(_refs())
    spec["templateResourceRefs"] = [{"identifier": "i", "resource": resource}]
    return spec


def _fleet(clusters: list[tuple[str, str, dict[str, str]]]) -> Any:
    """Clusters by namespace/name (the last of a key wins); a cluster's namespace is never empty."""
    by_key = {(ns or "default", name): labels for ns, name, labels in clusters}
    return members.fleet(
        members.Member(
            key=f"{ns}/{name}",
            namespace=ns,
            name=name,
            labels=labels,
            ready=True,
            paused=False,
            secret=(ns, "k", None),
        )
        for (ns, name), labels in by_key.items()
    )


def _namespaces_outside_member_side(value: Any, key: str = "") -> list[Any]:
    if key in ("validateHealths", "patches", "clusterRefs"):
        return []
    if isinstance(value, dict):
        return [
            *([value["namespace"]] if "namespace" in value and key != "clusterSelector" else []),
            *(n for k, v in value.items() for n in _namespaces_outside_member_side(v, k)),
        ]
    if isinstance(value, list):
        return [n for v in value for n in _namespaces_outside_member_side(v, key)]
    return []


@settings(max_examples=300, deadline=None)
@given(spec=_specs(), clusters=st.lists(st.tuples(NAMESPACES, NAMES, LABELS), max_size=6))
def test_a_profile_never_selects_another_namespaces_cluster_nor_names_its_content(
    spec: dict[str, Any], clusters: list[tuple[str, str, dict[str, str]]]
) -> None:
    try:
        generated = profile_scope.generate(OWN, "p", spec)
    except profile_scope.Refused:
        # Refused only when something named another namespace.
        named = [
            *_namespaces_outside_member_side(spec),
            *(r.get("namespace") for r in spec.get("clusterRefs") or []),
        ]
        assert any(n not in (None, "", OWN) for n in named)
        return
    assert set(_namespaces_outside_member_side(dict(generated.spec))) <= {OWN}
    profile = ClusterProfile.model_validate(
        {
            "apiVersion": "fleetwave.io/v1alpha1",
            "kind": "ClusterProfile",
            "metadata": {"name": generated.name},
            "spec": generated.spec,
        }
    )
    selector = translate.from_profile(profile).stages[0].selector
    fleet = _fleet(clusters)
    selected = [c for c in fleet.names if selectors.matches(selector, fleet.by_name[c].labels)]
    assert all(c.startswith(f"{OWN}/") for c in selected), selected


def test_a_generated_profile_as_the_api_server_stores_it_is_not_written_again() -> None:
    """The spec is dumped with every default the schema fills in, so the stored profile holds it and
    a pass writes nothing; a changed spec, a lost label or a deletion in progress is written again."""
    parsed = ClusterProfile.model_validate(
        {
            "apiVersion": "fleetwave.io/v1alpha1",
            "kind": "ClusterProfile",
            "metadata": {"name": "x"},
            "spec": {
                "clusterSelector": {"matchLabels": {"env": "prod"}},
                "policyRefs": [{"kind": "ConfigMap", "name": "c"}],
            },
        }
    )
    spec = parsed.spec.model_dump(mode="json", by_alias=True, exclude_none=True)
    wanted = profile_scope.generate(OWN, "web", spec)
    stored_spec = ClusterProfile.model_validate(
        {
            "apiVersion": "fleetwave.io/v1alpha1",
            "kind": "ClusterProfile",
            "metadata": {"name": "x"},
            "spec": wanted.spec,
        }
    ).spec.model_dump(mode="json", by_alias=True, exclude_none=True)
    meta = {"name": wanted.name, "labels": dict(wanted.labels), "annotations": dict(wanted.annotations)}
    stored = {"metadata": meta, "spec": stored_spec}
    assert namespaced_profile._holds(stored, wanted)
    assert not namespaced_profile._holds({**stored, "spec": {**stored_spec, "tier": 1}}, wanted)
    assert not namespaced_profile._holds({**stored, "metadata": {**meta, "labels": {}}}, wanted)
    assert not namespaced_profile._holds({**stored, "metadata": {**meta, "deletionTimestamp": "t"}}, wanted)


def test_a_namespace_deep_in_a_free_form_part_is_found_without_recursing() -> None:
    nested: dict[str, Any] = {"namespace": "team-b"}
    for _ in range(5000):
        nested = {"x": [nested]}
    chart = {"releaseName": "r", "signatureVerification": nested}
    message = _refused({"helmCharts": [chart]})
    assert message.startswith("spec.helmCharts[0].signatureVerification.x[0].x[0]")
    assert message.endswith(
        ".namespace: team-b: a Profile reads content only from its own namespace (team-a)"
    )


def test_a_profile_acts_only_as_a_tenant_admin_of_its_own_namespace() -> None:
    own = {
        "projectsveltos.io/serviceaccount-name": "admin",
        "projectsveltos.io/serviceaccount-namespace": OWN,
    }
    assert (
        profile_scope.generate(OWN, "web", {}, own).labels["projectsveltos.io/serviceaccount-name"] == "admin"
    )
    other = {**own, "projectsveltos.io/serviceaccount-namespace": "someone-else"}
    with pytest.raises(profile_scope.Refused, match="acts only as a ServiceAccount of its own namespace"):
        profile_scope.generate(OWN, "web", {}, other)


def test_in_a_tenants_namespace_a_profile_without_labels_acts_as_its_one_tenant_admin() -> None:
    generated = profile_scope.generate(OWN, "web", {}, None, ("eng",))
    assert generated.labels["projectsveltos.io/serviceaccount-name"] == "eng"
    assert generated.labels["projectsveltos.io/serviceaccount-namespace"] == OWN
    with pytest.raises(profile_scope.Refused, match="several tenant admins"):
        profile_scope.generate(OWN, "web", {}, None, ("eng", "ops"))
    assert "projectsveltos.io/serviceaccount-name" not in profile_scope.generate(OWN, "web", {}).labels


def test_the_clusters_a_profiles_sets_chose_join_its_cluster_refs_and_only_its_namespaces() -> None:
    spec = {"setRefs": ["blue"], "clusterRefs": [{"name": "c0"}]}
    chosen = {f"{OWN}/c2", f"{OWN}/c1", "team-b/c9"}  # a Set of another namespace cannot be named
    confined = profile_scope.confine(OWN, spec, chosen)
    assert "setRefs" not in confined
    assert confined["clusterRefs"] == [
        {"name": "c0", "namespace": OWN},
        {"namespace": OWN, "name": "c1"},
        {"namespace": OWN, "name": "c2"},
    ]
    assert "clusterRefs" not in profile_scope.confine(OWN, {"setRefs": ["empty"]})  # chose nothing yet
