"""WorkQueue: de-duplication, delayed adds on a fake clock, backoff, exclusivity and shutdown."""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Callable
from types import SimpleNamespace

import pytest

from fleetwave.runtime import queueing
from fleetwave.runtime.controller import Controller, Result, besides_status


class FakeClock:
    """Virtual time: callbacks fire only when the test advances the clock."""

    def __init__(self) -> None:
        self.t = 1000.0
        self._heap: list[tuple[float, int, _Handle]] = []
        self._seq = itertools.count()

    def now(self) -> float:
        return self.t

    def call_at(self, when: float, callback: Callable[[], None]) -> _Handle:
        handle = _Handle(callback)
        heapq.heappush(self._heap, (when, next(self._seq), handle))
        return handle

    def advance(self, seconds: float) -> None:
        target = self.t + seconds
        while self._heap and self._heap[0][0] <= target:
            when, _, handle = heapq.heappop(self._heap)
            self.t = when
            if not handle.cancelled:
                handle.callback()
        self.t = target

    @property
    def live_timers(self) -> int:
        return sum(1 for _, _, h in self._heap if not h.cancelled)


class _Handle:
    def __init__(self, callback: Callable[[], None]) -> None:
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


def make(base: float = 0.005, cap: float = 300.0) -> tuple[queueing.WorkQueue[str], FakeClock]:
    clock = FakeClock()
    return queueing.WorkQueue(clock=clock, backoff=queueing.Backoff(base=base, cap=cap)), clock


async def test_repeated_adds_of_a_waiting_key_collapse_into_one() -> None:
    q, _ = make()
    for key in ["a", "b", "a", "a", "b"]:
        q.add(key)
    assert len(q) == 2
    assert [await q.get(), await q.get()] == ["a", "b"]
    assert len(q) == 0


async def test_a_key_readded_while_processing_waits_for_done_and_then_runs_again() -> None:
    q, _ = make()
    q.add("a")
    assert await q.get() == "a"
    q.add("a")
    q.add("a")
    assert len(q) == 0, "must not be handed to a second worker while the first holds it"
    q.done("a")
    assert len(q) == 1
    assert await q.get() == "a"
    q.done("a")
    assert len(q) == 0


async def test_add_after_is_not_ready_before_its_time_and_ready_at_it() -> None:
    q, clock = make()
    q.add_after("a", 5.0)
    clock.advance(4.999)
    assert len(q) == 0
    clock.advance(0.001)
    assert len(q) == 1
    assert await q.get() == "a"


async def test_delayed_keys_come_out_in_deadline_order_not_insertion_order() -> None:
    q, clock = make()
    q.add_after("late", 3.0)
    q.add_after("early", 1.0)
    q.add_after("middle", 2.0)
    clock.advance(10.0)
    assert [await q.get() for _ in range(3)] == ["early", "middle", "late"]


async def test_an_earlier_add_after_replaces_a_later_one_for_the_same_key() -> None:
    q, clock = make()
    q.add_after("a", 10.0)
    q.add_after("a", 2.0)
    assert q.pending_timer("a") == pytest.approx(clock.now() + 2.0)
    assert clock.live_timers == 1
    clock.advance(2.0)
    assert len(q) == 1


async def test_a_later_add_after_does_not_postpone_an_earlier_one() -> None:
    q, clock = make()
    q.add_after("a", 2.0)
    q.add_after("a", 10.0)
    clock.advance(2.0)
    assert len(q) == 1
    assert await q.get() == "a"
    q.done("a")
    clock.advance(20.0)
    assert len(q) == 0, "the later timer was dropped, not kept as a second wake-up"


async def test_a_non_positive_delay_adds_immediately() -> None:
    q, _ = make()
    q.add_after("a", 0)
    q.add_after("b", -1)
    assert len(q) == 2


async def test_rate_limited_delays_double_per_failure_up_to_the_cap() -> None:
    q, clock = make(base=0.01, cap=0.05)
    expected = [0.01, 0.02, 0.04, 0.05, 0.05]
    for delay in expected:
        q.add_rate_limited("a")
        assert q.pending_timer("a") == pytest.approx(clock.now() + delay)
        clock.advance(delay)
        assert await q.get() == "a"
        q.done("a")
    assert q.num_requeues("a") == len(expected)


async def test_forget_resets_the_backoff_to_the_base_delay() -> None:
    q, clock = make(base=0.01)
    for _ in range(4):
        q.add_rate_limited("a")
        clock.advance(1.0)
        await q.get()
        q.done("a")
    q.forget("a")
    assert q.num_requeues("a") == 0
    q.add_rate_limited("a")
    assert q.pending_timer("a") == pytest.approx(clock.now() + 0.01)


async def test_backoff_is_per_key() -> None:
    q, clock = make(base=1.0)
    for _ in range(3):
        q.add_rate_limited("a")
        clock.advance(10.0)
        await q.get()
        q.done("a")
    q.add_rate_limited("b")
    assert q.pending_timer("b") == pytest.approx(clock.now() + 1.0)


async def test_waited_reports_time_spent_ready_before_get() -> None:
    q, clock = make()
    q.add("a")
    clock.advance(0.25)
    assert await q.get() == "a"
    assert q.waited("a") == pytest.approx(0.25)


async def test_get_blocks_until_a_key_is_added() -> None:
    q, _ = make()
    getter = asyncio.create_task(q.get())
    done, _ = await asyncio.wait({getter}, timeout=0)
    assert not done
    q.add("a")
    assert await getter == "a"


async def test_shutdown_wakes_every_waiting_getter_and_cancels_timers() -> None:
    q, clock = make()
    getters = [asyncio.create_task(q.get()) for _ in range(3)]
    await asyncio.wait(getters, timeout=0)
    q.add_after("later", 1.0)
    q.shutdown()
    for getter in getters:
        with pytest.raises(queueing.ShutDown):
            await getter
    assert clock.live_timers == 0
    q.add("x")
    assert len(q) == 0
    with pytest.raises(queueing.ShutDown):
        await q.get()


async def test_a_cancelled_getter_does_not_swallow_a_key() -> None:
    q, _ = make()
    first = asyncio.create_task(q.get())
    second = asyncio.create_task(q.get())
    await asyncio.wait({first, second}, timeout=0)
    q.add("a")  # wakes `first`...
    first.cancel()  # ...which is cancelled before it runs
    assert await second == "a"


async def test_workers_never_process_one_key_concurrently_and_see_every_last_add() -> None:
    """Four workers, keys re-added while in flight: at most one holder per key at any time, and
    every key is processed at least once after its final add."""
    q: queueing.WorkQueue[int] = queueing.WorkQueue()
    holders: dict[int, int] = {}
    max_holders = 0
    last_add: dict[int, int] = {}
    last_start: dict[int, int] = {}
    tick = itertools.count()

    async def worker() -> None:
        nonlocal max_holders
        while True:
            try:
                key = await q.get()
            except queueing.ShutDown:
                return
            holders[key] = holders.get(key, 0) + 1
            max_holders = max(max_holders, holders[key])
            last_start[key] = next(tick)
            for _ in range(3):
                await asyncio.sleep(0)  # yield so other workers and adders interleave
            holders[key] -= 1
            q.done(key)

    workers = [asyncio.create_task(worker()) for _ in range(4)]
    for i in range(200):
        key = i % 5
        last_add[key] = next(tick)
        q.add(key)
        await asyncio.sleep(0)
    while len(q) or any(holders.values()):  # noqa: ASYNC110 - yields only; no timing involved
        await asyncio.sleep(0)
    q.shutdown()
    await asyncio.gather(*workers)
    assert max_holders == 1
    assert all(last_start[k] > last_add[k] for k in last_add)


class _Informer:
    """The one thing Controller.watch uses of an informer: its change handlers."""

    def __init__(self) -> None:
        self.handlers: list[Callable[[str, object], None]] = []

    def on_change(self, handler: Callable[[str, object], None]) -> None:
        self.handlers.append(handler)

    def emit(self, obj: object) -> None:
        for handler in self.handlers:
            handler("MODIFIED", obj)


async def test_a_delayed_watch_folds_every_change_of_its_window_into_one_reconcile() -> None:
    async def reconcile(_key: str) -> Result:
        return Result()

    q, clock = make()
    ctl: Controller[str] = Controller("c", reconcile, queue=q)
    informer = _Informer()
    ctl.watch(informer, lambda obj: [str(obj)], delay=0.5)  # type: ignore[arg-type]
    informer.emit("p")
    clock.advance(0.3)
    informer.emit("p")  # within the window: no second reconcile, and no later one either
    assert len(q) == 0
    clock.advance(0.2)
    assert len(q) == 1
    assert await asyncio.wait_for(q.get(), 1) == "p"
    q.done("p")
    clock.advance(1.0)
    assert len(q) == 0
    ctl.watch(informer, lambda obj: [f"{obj}-now"])  # type: ignore[arg-type]  # no delay: at once
    informer.emit("p")
    assert len(q) == 1


def _profile(generation: int, status: str, labels: dict[str, str] | None = None) -> object:
    meta = SimpleNamespace(
        name="p",
        namespace=None,
        uid="u1",
        generation=generation,
        deletionTimestamp=None,
        labels=labels or {},
        annotations={},
        ownerReferences=[],
        finalizers=None,
    )
    return SimpleNamespace(metadata=meta, status=status)


class _EventInformer(_Informer):
    def emit_as(self, event: str, obj: object) -> None:
        for handler in self.handlers:
            handler(event, obj)


def test_a_watch_besides_status_follows_spec_metadata_and_removal_but_not_status_writes() -> None:
    async def reconcile(_key: str) -> Result:
        return Result()

    q, _ = make()
    ctl: Controller[str] = Controller("c", reconcile, queue=q)
    informer = _EventInformer()
    woken: list[str] = []
    ctl.enqueue = lambda key, delay=0.0, urgent=False: woken.append(key)  # type: ignore[method-assign]
    ctl.watch(informer, lambda obj: ["owner"], signature=besides_status)  # type: ignore[arg-type]
    informer.emit_as("ADDED", _profile(1, ""))
    informer.emit_as("MODIFIED", _profile(1, "1 of 3 ready"))
    informer.emit_as("MODIFIED", _profile(1, "3 of 3 ready"))
    assert woken == ["owner"]
    informer.emit_as("MODIFIED", _profile(2, "3 of 3 ready"))  # spec edited
    informer.emit_as("MODIFIED", _profile(2, "3 of 3 ready", {"stage": "prod"}))  # relabelled
    informer.emit_as("DELETED", _profile(2, "3 of 3 ready", {"stage": "prod"}))  # gone as it was
    informer.emit_as("ADDED", _profile(1, ""))  # made again
    assert woken == ["owner"] * 5


# --- two lanes (ADR 0117): a key whose own timer fired goes before keys woken by events ----------


async def take(q: queueing.WorkQueue[str], n: int) -> list[str]:
    """The next `n` keys `get` hands out; a key that never comes fails the test instead of hanging."""
    return [await asyncio.wait_for(q.get(), 1) for _ in range(n)]


async def test_a_key_whose_own_timer_fired_is_handed_out_before_keys_woken_earlier_by_events() -> None:
    q, clock = make()
    q.add_after("gate", 2.0)
    for key in ["e1", "e2", "e3"]:
        q.add(key)
    clock.advance(2.0)
    assert len(q) == 4
    assert await take(q, 4) == ["gate", "e1", "e2", "e3"]


async def test_each_lane_is_first_in_first_out() -> None:
    q, clock = make()
    q.add("e1")
    q.add_after("t1", 1.0)
    q.add("e2")
    q.add_after("t2", 2.0)
    q.add("e3")
    clock.advance(2.0)
    assert await take(q, 5) == ["t1", "t2", "e1", "e2", "e3"]


async def test_a_key_waiting_in_the_event_lane_moves_to_the_timer_lane_once_and_is_handed_out_once() -> None:
    q, clock = make()
    q.add("e1")
    q.add("k")
    q.add("e2")
    q.add_after("k", 1.0)
    clock.advance(1.0)
    assert len(q) == 3, "one key in two lanes is still one ready key"
    assert await take(q, 3) == ["k", "e1", "e2"]
    assert len(q) == 0
    for key in ["k", "e1", "e2"]:
        q.done(key)
    assert len(q) == 0
    q.add("k")  # its stale event-lane entry must not stand in for (or hide) a new add
    q.add("e3")
    assert await take(q, 2) == ["k", "e3"]


async def test_an_event_for_a_key_already_in_the_timer_lane_does_not_demote_it() -> None:
    q, clock = make()
    q.add("e1")
    q.add_after("k", 1.0)
    clock.advance(1.0)
    q.add("k")
    assert len(q) == 2
    assert await take(q, 2) == ["k", "e1"]


async def test_a_timer_firing_while_its_key_is_in_flight_puts_it_first_once_done_and_not_twice() -> None:
    q, clock = make()
    q.add("k")
    assert await take(q, 1) == ["k"]
    q.add("e1")
    q.add_after("k", 1.0)
    clock.advance(1.0)
    assert len(q) == 1, "the key in flight is not handed to a second worker"
    q.add("k")  # an event as well: still one re-run
    q.done("k")
    assert await take(q, 2) == ["k", "e1"]
    q.done("k")
    q.done("e1")
    assert len(q) == 0


async def test_an_event_while_in_flight_re_runs_the_key_in_the_event_lane() -> None:
    q, clock = make()
    q.add("k")
    assert await take(q, 1) == ["k"]
    q.add("k")
    q.add_after("t", 1.0)
    clock.advance(1.0)
    q.done("k")
    assert await take(q, 2) == ["t", "k"]


async def test_retries_after_failures_wait_in_the_event_lane() -> None:
    q, clock = make(base=1.0)
    q.add("e1")
    q.add_rate_limited("failing")
    clock.advance(1.0)
    assert await take(q, 2) == ["e1", "failing"]


async def test_a_delayed_watch_wakes_its_key_in_the_event_lane_and_a_requeue_after_in_the_timer_lane() -> (
    None
):
    async def reconcile(key: str) -> Result:
        return Result(requeue_after=1.0) if key == "gate" else Result()

    q, clock = make()
    ctl: Controller[str] = Controller("c", reconcile, queue=q, deadlines_first=True)
    informer = _Informer()
    ctl.watch(informer, lambda obj: [str(obj)], delay=0.5)  # type: ignore[arg-type]
    ctl.enqueue("gate")
    assert await take(q, 1) == ["gate"]
    await ctl._process("gate")  # the pass asks to run again in 1 s: its own timer
    q.done("gate")
    informer.emit("folded")
    q.add("e1")
    clock.advance(1.0)
    assert await take(q, 3) == ["gate", "e1", "folded"]


@pytest.mark.parametrize(
    ("deadlines_first", "result", "order"),
    [
        (True, Result(requeue_after=1.0), ["k", "e1"]),
        (True, Result(requeue_after=1.0, poll=True), ["e1", "k"]),  # a re-check is not a deadline
        (False, Result(requeue_after=1.0), ["e1", "k"]),  # timers that are safety nets
    ],
)
async def test_only_a_deadline_of_a_controller_that_puts_them_first_goes_first(
    deadlines_first: bool, result: Result, order: list[str]
) -> None:
    async def reconcile(_key: str) -> Result:
        return result

    q, clock = make()
    ctl: Controller[str] = Controller("c", reconcile, queue=q, deadlines_first=deadlines_first)
    ctl.enqueue("k")
    assert await take(q, 1) == ["k"]
    await ctl._process("k")
    q.done("k")
    q.add("e1")
    clock.advance(1.0)
    assert await take(q, 2) == order


async def test_an_urgent_watch_puts_its_keys_before_keys_woken_by_other_news() -> None:
    """A staged run's approval: the run it names goes before the other runs already waiting, so the
    person who approved sees the next stage start without waiting for every other run's pass."""

    async def reconcile(_key: str) -> Result:
        return Result()

    q, _ = make()
    ctl: Controller[str] = Controller("c", reconcile, queue=q)
    news, approvals = _Informer(), _Informer()
    ctl.watch(news, lambda obj: [str(obj)])  # type: ignore[arg-type]
    ctl.watch(approvals, lambda obj: [str(obj)], urgent=True)  # type: ignore[arg-type]
    news.emit("run-1")
    news.emit("run-2")
    approvals.emit("run-3")
    news.emit("run-4")
    assert await take(q, 4) == ["run-3", "run-1", "run-2", "run-4"]


async def test_news_folded_before_a_deadline_does_not_displace_the_deadline() -> None:
    # A promotion's gate falls due at +2 s (its own timer); its summaries' progress asks for a pass
    # within 0.25 s (ADR 0120). Both passes come, each from its own lane: the deadline's is not
    # served behind other keys' news.
    q, clock = make()
    q.add_after("p", 2.0, queueing.Lane.TIMER)
    q.add_after("p", 0.25, queueing.Lane.EVENT)
    assert q.pending_timer("p") == pytest.approx(clock.now() + 0.25)
    clock.advance(0.25)
    q.add("other")  # news of another key, woken after the fold fired
    assert await q.get() == "p"
    q.done("p")
    assert await q.get() == "other"
    q.done("other")
    q.add("late-news")
    clock.advance(1.75)
    assert await q.get() == "p"  # the deadline, ahead of news that came before it
    q.done("p")
    assert await q.get() == "late-news"


async def test_news_due_after_a_pending_deadline_is_left_to_the_deadlines_pass() -> None:
    q, clock = make()
    q.add_after("p", 0.5, queueing.Lane.TIMER)
    q.add_after("p", 1.0, queueing.Lane.EVENT)  # later than the deadline: its pass reads the news
    assert clock.live_timers == 1
    q.add_after("p", 0.25, queueing.Lane.EVENT)  # sooner: a fold of its own
    assert clock.live_timers == 2
    q.add_after("p", 0.1, queueing.Lane.TIMER)  # a sooner deadline: the fold goes into its pass
    assert clock.live_timers == 1
    assert q.pending_timer("p") == pytest.approx(clock.now() + 0.1)
    clock.advance(0.1)
    assert await q.get() == "p"
    q.done("p")
    clock.advance(5.0)
    assert len(q) == 0


async def test_a_getter_kept_for_deadlines_takes_only_keys_whose_own_timer_fired() -> None:
    q, clock = make()
    kept = asyncio.create_task(q.get(timer_lane_only=True))
    q.add("news")
    done, _ = await asyncio.wait({kept}, timeout=0)
    assert not done  # news waits for an ordinary getter
    q.add_after("gate", 1.0)
    clock.advance(1.0)
    assert await kept == "gate"
    assert await take(q, 1) == ["news"]


async def test_a_deadline_wakes_the_getter_kept_for_it_before_an_ordinary_one() -> None:
    q, clock = make()
    ordinary = asyncio.create_task(q.get())
    kept = asyncio.create_task(q.get(timer_lane_only=True))
    await asyncio.wait({ordinary, kept}, timeout=0)
    q.add_after("gate", 1.0)
    clock.advance(1.0)
    assert await kept == "gate"
    q.add("news")
    assert await ordinary == "news"


async def test_a_key_moved_to_the_timer_lane_is_a_deadline_for_the_kept_getter_once() -> None:
    q, clock = make()
    q.add("k")  # news first: the event lane
    q.add_after("k", 1.0)
    clock.advance(1.0)  # its own timer fires while it waits: it moves to the timer lane
    assert await q.get(timer_lane_only=True) == "k"
    q.done("k")
    kept = asyncio.create_task(q.get(timer_lane_only=True))
    done, _ = await asyncio.wait({kept}, timeout=0)
    assert not done  # handed out once: no deadline left behind
    assert len(q) == 0
    q.shutdown()
    with pytest.raises(queueing.ShutDown):
        await kept


async def test_a_controllers_deadline_workers_start_a_deadline_while_every_other_worker_is_busy() -> None:
    release = asyncio.Event()
    started: list[str] = []

    async def reconcile(key: str) -> Result:
        started.append(key)
        if key.startswith("busy"):
            await release.wait()  # a pass awaiting a slow API server
        return Result()

    q, clock = make()
    ctl: Controller[str] = Controller(
        "c", reconcile, workers=2, queue=q, deadlines_first=True, deadline_workers=1
    )
    running = asyncio.create_task(ctl.run())
    for key in ("busy-1", "busy-2", "news"):
        q.add(key)
    q.add_after("gate", 1.0)
    for _ in range(5):
        await asyncio.sleep(0)
    clock.advance(1.0)
    for _ in range(5):
        await asyncio.sleep(0)
    assert started == ["busy-1", "busy-2", "gate"]  # the news waits for a worker; the gate does not
    release.set()
    for _ in range(5):
        await asyncio.sleep(0)
    assert started[-1] == "news"
    running.cancel()
    await asyncio.gather(running, return_exceptions=True)


async def test_a_worker_yields_to_the_loop_between_passes_that_make_no_request() -> None:
    """Passes that never suspend (nothing to write) still let the loop run between them: a timer
    or a watch event due meanwhile is served after the pass in progress, not after the queue."""
    processed: list[str] = []

    async def reconcile(key: str) -> Result:
        processed.append(key)  # no await: a pass that finds nothing to write
        return Result()

    ctl: Controller[str] = Controller("c", reconcile)
    for i in range(50):
        ctl.enqueue(f"k{i}")
    seen_by_the_loop: list[int] = []

    async def sample() -> None:
        while not seen_by_the_loop or seen_by_the_loop[-1] < 50:
            seen_by_the_loop.append(len(processed))
            await asyncio.sleep(0)

    sampler = asyncio.create_task(sample())
    run = asyncio.create_task(ctl.run())
    await asyncio.wait_for(sampler, 5)
    run.cancel()
    await asyncio.gather(run, return_exceptions=True)
    assert len(processed) == 50
    assert max(b - a for a, b in itertools.pairwise(seen_by_the_loop)) <= 1
