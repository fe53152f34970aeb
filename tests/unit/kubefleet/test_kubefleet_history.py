"""Who holds a placement's content, from the run and placement ledgers."""

from __future__ import annotations

from fleetwave.controllers.kubefleet import history


def test_the_newest_event_per_cluster_wins_across_ledgers() -> None:
    run1 = {
        "deliveries": {
            "a": {"index": "1", "appliedAt": "2026-01-01T00:00:01Z", "doneAt": "x"},
            "b": {"index": "1", "appliedAt": "2026-01-01T00:00:01Z"},
        }
    }
    run2 = {
        "deliveries": {"a": {"index": "0", "appliedAt": "2026-01-01T00:00:05Z", "doneAt": "y"}},
        "deletions": {"b": {"doneAt": "2026-01-01T00:00:09Z"}},
    }
    held = history.latest([run1, run2])
    assert held["a"].index == "0"
    assert held["a"].done
    assert held["b"].index is None
    assert history.holding([run1, run2]) == {"a"}


def test_a_common_index_needs_every_cluster_on_the_same_index() -> None:
    held = history.latest(
        [
            {
                "deliveries": {
                    "a": {"index": "1", "appliedAt": "t", "doneAt": "t"},
                    "b": {"index": "1", "appliedAt": "t", "doneAt": "t"},
                }
            }
        ]
    )
    assert history.common_index(held, ["a", "b"]) == ("1", True)
    assert history.common_index(held, ["a", "b", "c"]) == (None, False)


def test_merging_what_latest_made_of_each_ledger_is_latest_over_all_of_them() -> None:
    """A placement's pass reads each run's ledger once per version and merges: the result must be
    what reading them all at once gives, ties included (the later ledger wins a tie)."""
    own = {
        "deliveries": {
            "a": {"index": "2", "appliedAt": "2026-01-01T00:00:05Z"},
            "b": {"index": "2", "appliedAt": "2026-01-01T00:00:07Z", "doneAt": "z"},
        }
    }
    run1 = {
        "deliveries": {"a": {"index": "1", "appliedAt": "2026-01-01T00:00:05Z", "doneAt": "x"}},
        "deletions": {"c": {"doneAt": "2026-01-01T00:00:03Z"}},
    }
    run2 = {"deliveries": {"b": {"index": "1", "appliedAt": "2026-01-01T00:00:06Z"}}}
    ledgers = [own, run1, run2]
    merged = history.merged(history.latest([ledger]) for ledger in ledgers)
    assert merged == history.latest(ledgers)
    assert merged["a"].index == "1"  # the same time: the later ledger's
    assert merged["b"].index == "2"  # newer in the first ledger
    assert merged["c"].index is None
