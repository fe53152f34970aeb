"""A rollout's stages hash and revision hash are stored in every rollout's record: if a new
release computed either differently from the same spec, every rollout in progress would start
again after an upgrade. These values were computed by the release before the hashes were memoised
and narrowed (ADR 0143); they must never change."""

from __future__ import annotations

from typing import Any

from fleetwave.api.sveltos import ClusterProfile
from fleetwave.core import batching
from fleetwave.core import model as m
from fleetwave.translate import common
from fleetwave.translate import sveltos as tr


def _profile(spec: dict[str, Any]) -> ClusterProfile:
    raw = {"apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterProfile"}
    return ClusterProfile.model_validate({**raw, "metadata": {"name": "p"}, "spec": spec})


def test_the_stages_hash_of_a_spec_is_what_it_always_was() -> None:
    by_label = m.Selector(match_expressions=(m.Requirement("tier", m.Operator.NOT_IN, ("b", "a")),))
    stages = (
        m.StageSpec(
            name="dev", selector=m.Selector(match_labels=(("env", "dev"),)), max_in_flight=m.MaxInFlight(50)
        ),
        m.StageSpec(
            name="prod",
            selector=common.union(by_label, ["ns/c2", "ns/c1"]),
            max_in_flight=m.MaxInFlight(1),
            sorting_key="zone",
        ),
    )
    expected = "5ff9616644f3f29a6e6c373b9f670f662d63f3bc7ba0b032ef8adc6a6729aeae"
    assert batching.compute_stages_hash(stages) == expected
    assert batching.compute_stages_hash(stages) == expected  # and again, from the memo


def test_the_revision_hash_reads_only_the_judged_fields_as_it_always_did() -> None:
    judged = _profile(
        {
            "clusterRefs": [
                {
                    "apiVersion": "lib.projectsveltos.io/v1beta1",
                    "kind": "SveltosCluster",
                    "namespace": "ns",
                    "name": "c1",
                }
            ],
            "syncMode": "ContinuousWithDriftDetection",
            "validateHealths": [
                {
                    "name": "h",
                    "featureID": "Resources",
                    "group": "apps",
                    "version": "v1",
                    "kind": "Deployment",
                    "script": "function evaluate() return {healthy=true} end",
                }
            ],
        }
    )
    assert (
        tr.revision_hash(judged.spec, "abc")
        == "bb5b95dfed1b84b97cfc4490b43b85c055be30f2f15f10246f6eaef5763a91a4"
    )
    plain = "a4ed7a16dc15c0408d7e6d83d2fa933eaab57c669152aa0c87daa81528be2f62"
    assert tr.revision_hash(_profile({}).spec, "abc") == plain
    more_refs = _profile(
        {
            "clusterRefs": [
                {
                    "apiVersion": "lib.projectsveltos.io/v1beta1",
                    "kind": "SveltosCluster",
                    "namespace": "ns",
                    "name": "c9",
                }
            ]
        }
    )
    assert tr.revision_hash(more_refs.spec, "abc") == plain, "which clusters is not what a revision is"
