"""Which summaries a deleted ClusterProfile withdraws next: maxUpdate at a time (pure)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from fleetwave.controllers.sveltos.profile_withdrawal import next_batch


def test_without_max_update_every_summary_goes_at_once() -> None:
    assert next_batch([("b", False), ("a", False), ("c", True)], None) == ["a", "b"]


def test_one_at_a_time_waits_for_the_one_leaving() -> None:
    assert next_batch([("a", True), ("b", False)], 1) == []
    assert next_batch([("b", False), ("a", False)], 1) == ["a"]


def test_a_percentage_is_of_all_the_profiles_summaries_rounded_up() -> None:
    summaries = [(f"s{i}", False) for i in range(10)]
    assert next_batch(summaries, "25%") == ["s0", "s1", "s2"]


def test_an_unparsable_max_update_withdraws_at_once_rather_than_never() -> None:
    assert next_batch([("a", False), ("b", False)], "many") == ["a", "b"]


@given(
    st.lists(
        st.tuples(st.text(min_size=1, max_size=4), st.booleans()), unique_by=lambda t: t[0], max_size=30
    ),
    st.integers(min_value=1, max_value=12),
)
def test_never_more_than_max_update_leave_at_once_and_progress_is_always_made(
    summaries: list[tuple[str, bool]], limit: int
) -> None:
    batch = next_batch(summaries, limit)
    leaving = sum(1 for _, deleting in summaries if deleting)
    assert set(batch) <= {n for n, deleting in summaries if not deleting}
    assert leaving + len(batch) <= max(limit, leaving)
    if leaving == 0 and any(not d for _, d in summaries):
        assert batch  # something always moves when nothing is leaving
