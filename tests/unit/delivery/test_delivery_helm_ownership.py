"""Who keeps a helm release two profiles install (ADR 0063), decided from its release labels (pure)."""

from __future__ import annotations

from fleetwave.api.sveltos import HelmChart
from fleetwave.delivery import helmplan as hp


def release(**labels: str) -> hp.Release:
    return hp.Release("web", "apps", 3, "deployed", "web", "1.0.0", {}, dict(labels))


OWNED = {hp.OWNER_LABEL: "summary-a", hp.TIER_LABEL: "100"}


def test_the_owner_an_unowned_release_and_a_lower_tier_may_install() -> None:
    assert hp.owned_elsewhere(release(**OWNED), hp.Ownership("summary-a")) == ""
    assert hp.owned_elsewhere(release(), hp.Ownership("summary-b")) == ""  # nobody's: taken over
    assert hp.owned_elsewhere(None, hp.Ownership("summary-b")) == ""  # not installed yet
    assert hp.owned_elsewhere(release(**OWNED), hp.Ownership("summary-b", tier=99)) == ""
    assert hp.owned_elsewhere(release(**OWNED), None) == ""  # no owner asked (fleetwave CLI)


def test_an_equal_or_higher_tier_is_refused_naming_the_owner() -> None:
    refused = hp.owned_elsewhere(release(**OWNED), hp.Ownership("summary-b"))
    assert refused.startswith("conflict: release apps/web is deployed by summary-a (tier 100)")
    assert hp.owned_elsewhere(release(**OWNED), hp.Ownership("summary-b", tier=200))
    garbled = release(**{hp.OWNER_LABEL: "summary-a", hp.TIER_LABEL: "high"})
    assert "(tier 100)" in hp.owned_elsewhere(garbled, hp.Ownership("summary-b"))


def test_a_release_is_removed_for_its_owner_and_an_unlabelled_one_only_when_known_as_ours() -> None:
    ours = ("summary-a", "summary/fleet/web-m1")
    assert hp.removable(release(**OWNED), ours, owned_only=False)
    assert hp.removable(release(**OWNED), ours, owned_only=True)
    assert hp.removable(release(**{hp.OWNER_LABEL: "summary/fleet/web-m1"}), ours, owned_only=True)
    assert not hp.removable(release(**{hp.OWNER_LABEL: "summary-b"}), ours, owned_only=False)
    # No label: the caller's own content names it (removed), or only a status others write (kept).
    assert hp.removable(release(), ours, owned_only=False)
    assert not hp.removable(release(), ours, owned_only=True)
    # No owner to prove it by: only a caller that knows the release may remove it.
    assert hp.removable(release(**OWNED), None, owned_only=False)
    assert not hp.removable(release(**OWNED), None, owned_only=True)


def test_the_owner_labels_go_to_helm_and_count_for_up_to_date() -> None:
    chart = HelmChart.model_validate(
        {
            "repositoryURL": "https://charts.example.com",
            "repositoryName": "r",
            "chartName": "r/web",
            "chartVersion": "1.0.0",
            "releaseName": "web",
            "releaseNamespace": "apps",
        }
    )
    ours = hp.Ownership("summary-a", tier=50)
    argv = hp.upgrade_argv(chart, hp.chart_source(chart), "/v.yaml", dry_run=False, ownership=ours)
    assert argv[argv.index("--labels") + 1] == "fleetwave.io/deployed-by=summary-a,fleetwave.io/tier=50"
    assert argv.index("--labels") < argv.index("--")
    same = {"chart_name": "web", "chart_version": "1.0.0", "values": {}}
    assert hp.is_up_to_date(
        release(**{hp.OWNER_LABEL: "summary-a", hp.TIER_LABEL: "50"}), **same, ownership=ours
    )
    # Taken over, or a new tier: helm runs again so the labels say who has it now.
    assert not hp.is_up_to_date(release(**OWNED), **same, ownership=ours)


def test_a_release_labelled_by_the_same_owner_before_an_upgrade_is_still_its_own() -> None:
    ours = hp.Ownership("ClusterProfile-web", formerly=("summary-a",))
    assert hp.owned_elsewhere(release(**OWNED), ours) == ""
    assert ours.owners() == ("ClusterProfile-web", "summary-a")
    assert ours.labels()[hp.OWNER_LABEL] == "ClusterProfile-web"  # relabelled on the next upgrade
    assert hp.owned_elsewhere(release(**OWNED), hp.Ownership("ClusterProfile-web", formerly=("summary-z",)))
