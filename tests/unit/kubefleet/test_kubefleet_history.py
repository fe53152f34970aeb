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
