"""Which summaries a deleted ClusterProfile withdraws next: maxUpdate at a time (pure), and the
deletions the profile controller asked for until its cache shows them (`Withdrawals`)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from fleetwave.controllers.shared.keys import SummaryKey
from fleetwave.controllers.sveltos import profile_withdrawal
from fleetwave.controllers.sveltos.profile_withdrawal import Withdrawals, next_batch


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


A, B, C = SummaryKey("fleet", "web-a"), SummaryKey("fleet", "web-b"), SummaryKey("fleet", "web-c")


def test_a_deletion_asked_for_is_in_flight_until_the_cache_no_longer_holds_the_summary() -> None:
    withdrawals = Withdrawals()
    assert withdrawals.in_flight("uid-web", [A, B]) == frozenset()
    withdrawals.asked("uid-web", [A])
    assert withdrawals.in_flight("uid-web", [A, B]) == {A}
    assert withdrawals.in_flight("uid-db", [A, B]) == frozenset()  # per profile
    assert withdrawals.in_flight("uid-web", [B]) == frozenset()  # gone from the cache: forgotten
    assert withdrawals.in_flight("uid-web", [A, B]) == frozenset()  # and not in flight again
    withdrawals.asked("uid-web", [B])
    withdrawals.done("uid-web")
    assert withdrawals.in_flight("uid-web", [B]) == frozenset()


class _Profile:
    """A deleted profile with maxUpdate 1, its summaries as the cache holds them, and what it deletes."""

    def __init__(self, *keys: SummaryKey) -> None:
        self.cached = list(keys)
        self.deleted: list[tuple[str, str | None]] = []
        self.raw = {"metadata": {"name": "web", "uid": "uid-web"}, "spec": {"maxUpdate": 1}}

    def ctx(self) -> Any:
        async def delete(_resource: Any, name: str, *, namespace: str | None, **_: Any) -> None:
            self.deleted.append((name, namespace))

        async def event(*_: Any) -> None:
            return None

        def labelled(kind: str, label: str, value: str) -> list[dict[str, Any]]:
            assert (kind, value) == ("ClusterSummary", "web")
            return [{"metadata": {"namespace": k.namespace, "name": k.name}} for k in self.cached]

        return SimpleNamespace(
            cache=SimpleNamespace(labelled=labelled),
            client=SimpleNamespace(delete=delete),
            resource=lambda kind: kind,
            event=event,
        )


async def test_a_wake_up_before_the_cache_shows_a_deletion_starts_no_next_batch() -> None:
    profile, withdrawals = _Profile(A, B, C), Withdrawals()
    ctx = profile.ctx()
    assert await profile_withdrawal._withdraw_next(ctx, withdrawals, None, profile.raw)
    assert profile.deleted == [("web-a", "fleet")]
    # Woken again while the cache still holds web-a without its deletion timestamp.
    assert await profile_withdrawal._withdraw_next(ctx, withdrawals, None, profile.raw)
    assert profile.deleted == [("web-a", "fleet")]
    profile.cached = [B, C]  # web-a is gone
    assert await profile_withdrawal._withdraw_next(ctx, withdrawals, None, profile.raw)
    assert profile.deleted == [("web-a", "fleet"), ("web-b", "fleet")]


async def test_a_process_that_asked_nothing_goes_by_what_the_cache_shows() -> None:
    # Another profile controller (a restart, another family) has no record of web-a's deletion.
    profile = _Profile(A, B)
    ctx = profile.ctx()
    await profile_withdrawal._withdraw_next(ctx, Withdrawals(), None, profile.raw)
    await profile_withdrawal._withdraw_next(ctx, Withdrawals(), None, profile.raw)
    assert profile.deleted == [("web-a", "fleet"), ("web-a", "fleet")]
