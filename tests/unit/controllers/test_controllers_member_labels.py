"""Sveltos' registration labels on members: the version label follows the member's version."""

from __future__ import annotations

import pytest

from fleetwave.controllers.fleet import member_labels as ml


@pytest.mark.parametrize(
    ("git_version", "label"),
    [
        ("v1.34.2", "v1.34.2"),
        ("v1.34.2+k3s1", "v1.34.2"),  # seed 002's k3s members
        ("v1.31.0-gke.1234000", "v1.31.0"),
        ("1.30.1-eks-abc", "v1.30.1"),
        ("v1.034.2", "v1.34.2"),
        ("", None),
        (None, None),
        ("main", None),
        ("v1.34", None),
    ],
)
def test_the_version_label_is_the_members_semantic_version_without_its_build(
    git_version: str | None, label: str | None
) -> None:
    assert ml.version_label(git_version) == label


def test_a_member_that_upgrades_gets_its_new_version_label_and_nothing_else_changes() -> None:
    labels = {"env": "prod", ml.K8S_VERSION_LABEL: "v1.33.4"}
    assert ml.labels_patch(labels, "v1.34.1+k3s1", pull=False) == {ml.K8S_VERSION_LABEL: "v1.34.1"}
    assert ml.labels_patch({**labels, ml.K8S_VERSION_LABEL: "v1.34.1"}, "v1.34.1+k3s1", pull=False) == {}


def test_a_version_that_cannot_be_read_keeps_the_last_label() -> None:
    assert ml.labels_patch({ml.K8S_VERSION_LABEL: "v1.33.4"}, None, pull=False) == {}


def test_only_a_pull_member_is_labelled_as_running_an_agent_and_the_label_is_never_removed() -> None:
    assert ml.labels_patch({}, "v1.34.1", pull=True) == {
        ml.K8S_VERSION_LABEL: "v1.34.1",
        ml.AGENT_LABEL: "present",
    }
    assert (
        ml.labels_patch({ml.AGENT_LABEL: "present", ml.K8S_VERSION_LABEL: "v1.34.1"}, "v1.34.1", False) == {}
    )
