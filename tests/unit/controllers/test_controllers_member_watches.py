"""Member watches: which streams a judgement's wake-up subscribes to, shared, bounded and released
(the streams are stand-ins here; tests/integration/test_member_watches.py runs real ones)."""

from __future__ import annotations

import asyncio
from typing import Any

from fleetwave.api.sveltos import ValidateHealth
from fleetwave.controllers.fleet import ports
from fleetwave.controllers.fleet.member_watches import Interest, MemberTarget, MemberWatches
from fleetwave.controllers.fleet.ports import interests
from fleetwave.delivery import content as ct

Stream = tuple[str, Interest]


class Streams:
    """Records each stream started and lets a test fire a change on it."""

    def __init__(self) -> None:
        self.running: dict[Stream, asyncio.Event] = {}
        self.changed: dict[Stream, object] = {}
        self.cancelled: list[Stream] = []
        self.started: list[Stream] = []

    async def run(self, target: MemberTarget, interest: Interest, changed: object) -> None:
        key = (target.name, interest)
        self.started.append(key)
        self.running[key] = asyncio.Event()
        self.changed[key] = changed
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled.append(key)
            self.running.pop(key, None)
            raise

    def fire(self, member: str, interest: Interest) -> None:
        changed = self.changed[(member, interest)]
        assert callable(changed)
        changed()


CM = Interest("v1", "ConfigMap", "apps")
DEPLOY = Interest("apps/v1", "Deployment", "apps")


def target(name: str = "m1", config: bytes = b"kubeconfig-1") -> MemberTarget:
    return MemberTarget(name, config)


async def settle() -> None:
    for _ in range(3):
        await asyncio.sleep(0)


async def test_subscribers_of_one_kind_share_one_stream_and_each_is_woken() -> None:
    streams = Streams()
    watches = MemberWatches(stream=streams.run)
    woken: list[str] = []
    watches.subscribe(target(), [CM], "a", lambda: woken.append("a"))
    watches.subscribe(target(), [CM, DEPLOY], "b", lambda: woken.append("b"))
    await settle()
    assert set(streams.running) == {("m1", CM), ("m1", DEPLOY)}
    streams.fire("m1", CM)
    assert sorted(woken) == ["a", "b"]
    woken.clear()
    streams.fire("m1", DEPLOY)
    assert woken == ["b"]
    await watches.close()


async def test_release_ends_streams_nobody_needs_and_keeps_shared_ones() -> None:
    streams = Streams()
    watches = MemberWatches(stream=streams.run)
    watches.subscribe(target(), [CM], "a", lambda: None)
    watches.subscribe(target(), [CM, DEPLOY], "b", lambda: None)
    await settle()
    watches.release("b")
    await settle()
    assert set(streams.running) == {("m1", CM)}
    assert streams.cancelled == [("m1", DEPLOY)]
    watches.release("a")
    await settle()
    assert streams.running == {}
    assert watches.streams() == 0
    await watches.close()


async def test_a_subscriber_that_reads_less_leaves_the_streams_it_no_longer_needs() -> None:
    streams = Streams()
    watches = MemberWatches(stream=streams.run)
    watches.subscribe(target(), [CM, DEPLOY], "a", lambda: None)
    await settle()
    watches.subscribe(target(), [CM], "a", lambda: None)
    await settle()
    assert set(streams.running) == {("m1", CM)}
    await watches.close()


async def test_a_kind_read_everywhere_covers_its_per_namespace_reads() -> None:
    streams = Streams()
    watches = MemberWatches(stream=streams.run)
    everywhere = Interest("v1", "ConfigMap", None)
    watches.subscribe(target(), [CM, everywhere, Interest("v1", "ConfigMap", "other")], "a", lambda: None)
    await settle()
    assert set(streams.running) == {("m1", everywhere)}
    await watches.close()


async def test_bounds_refuse_streams_past_the_limit_per_member_and_overall() -> None:
    streams = Streams()
    watches = MemberWatches(per_member=2, total=3, stream=streams.run)
    kinds = [Interest("v1", "ConfigMap", f"ns{i}") for i in range(3)]
    watches.subscribe(target("m1"), kinds, "a", lambda: None)
    watches.subscribe(target("m2"), kinds, "b", lambda: None)
    await settle()
    assert watches.streams() == 3
    assert sum(1 for member, _ in streams.running if member == "m1") == 2
    assert watches.refused == 3
    await watches.close()


async def test_off_when_no_stream_is_allowed_per_member() -> None:
    streams = Streams()
    watches = MemberWatches(per_member=0, stream=streams.run)
    watches.subscribe(target(), [CM], "a", lambda: None)
    await settle()
    assert streams.running == {}
    assert watches.refused == 1
    await watches.close()


async def test_a_subscriber_that_stops_renewing_is_dropped_after_the_idle_time() -> None:
    streams = Streams()
    now = [0.0]
    watches = MemberWatches(idle_seconds=60, clock=lambda: now[0], stream=streams.run)
    watches.subscribe(target(), [CM], "gone", lambda: None)
    now[0] = 30.0
    watches.subscribe(target(), [DEPLOY], "alive", lambda: None)
    await settle()
    now[0] = 61.0
    watches.subscribe(target(), [DEPLOY], "alive", lambda: None)  # any subscription expires the idle
    await settle()
    assert set(streams.running) == {("m1", DEPLOY)}
    await watches.close()


async def test_rotated_credentials_get_their_own_stream() -> None:
    streams = Streams()
    watches = MemberWatches(stream=streams.run)
    watches.subscribe(target(config=b"old"), [CM], "a", lambda: None)
    watches.subscribe(target(config=b"new"), [CM], "b", lambda: None)
    await settle()
    assert watches.streams() == 2
    await watches.close()
    assert streams.running == {}


def test_a_judgement_reads_its_checks_kinds_and_the_kinds_whose_readiness_lags() -> None:
    check = ValidateHealth.model_validate(
        {"name": "c", "featureID": "Resources", "group": "apps", "version": "v1", "kind": "Deployment"}
    )
    scoped = ValidateHealth.model_validate(
        {
            "name": "d",
            "featureID": "Resources",
            "group": "",
            "version": "v1",
            "kind": "ConfigMap",
            "namespace": "x",
        }
    )
    objects = [
        ("apps/v1", "Deployment", "web", "web"),
        ("v1", "ConfigMap", "web", "settings"),  # ready once it exists: nothing to wait for
        ("batch/v1", "Job", "web", "migrate"),
    ]
    assert interests([check, scoped], objects) == [
        Interest("apps/v1", "Deployment", None),
        Interest("v1", "ConfigMap", "x"),
        Interest("apps/v1", "Deployment", "web"),
        Interest("batch/v1", "Job", "web"),
    ]


async def test_a_change_seen_while_the_judgement_read_wakes_the_late_subscriber_at_once() -> None:
    streams = Streams()
    now = [10.0]
    watches = MemberWatches(clock=lambda: now[0], stream=streams.run)
    watches.subscribe(target(), [CM], "early", lambda: None)
    await settle()
    began = watches.now()  # a second judgement starts reading ...
    now[0] = 11.0
    streams.fire("m1", CM)  # ... the member changes before it subscribes ...
    woken: list[str] = []
    watches.subscribe(target(), [CM], "late", lambda: woken.append("late"), since=began)
    assert woken == ["late"]  # ... so it is woken at once instead of waiting for the poll
    watches.subscribe(target(), [CM], "later", lambda: woken.append("later"), since=now[0] + 1)
    assert woken == ["late"]
    await watches.close()


async def test_a_released_stream_lingers_for_the_next_judgement_then_ends() -> None:
    streams = Streams()
    now = [0.0]
    watches = MemberWatches(linger=0.2, clock=lambda: now[0], stream=streams.run)
    watches.subscribe(target(), [CM], "first", lambda: None)
    await settle()
    watches.release("first")
    await settle()
    assert set(streams.running) == {("m1", CM)}  # still open: the next rollout needs no new list
    woken: list[str] = []
    watches.subscribe(target(), [CM], "next", lambda: woken.append("next"))
    streams.fire("m1", CM)
    assert woken == ["next"]
    assert len(streams.started) == 1  # the same stream served both
    watches.release("next")
    now[0] = 1.0
    await asyncio.sleep(0.3)
    assert streams.running == {}
    await watches.close()


async def test_a_lingering_stream_gives_its_place_to_a_new_one_at_the_bound() -> None:
    streams = Streams()
    watches = MemberWatches(per_member=1, linger=60, stream=streams.run)
    watches.subscribe(target(), [CM], "a", lambda: None)
    await settle()
    watches.release("a")
    watches.subscribe(target(), [DEPLOY], "b", lambda: None)
    await settle()
    assert set(streams.running) == {("m1", DEPLOY)}
    assert watches.refused == 0
    await watches.close()


async def test_a_subscriber_with_a_filter_is_woken_only_by_what_it_asks_for_and_by_deletions() -> None:
    streams = Streams()
    watches = MemberWatches(stream=streams.run)
    woken: list[str] = []
    watches.subscribe(target(), [DEPLOY], "any", lambda: woken.append("any"))
    watches.subscribe(
        target(), [DEPLOY], "ready", lambda: woken.append("ready"), only=lambda o: bool(o.get("ready"))
    )
    await settle()
    changed = streams.changed[("m1", DEPLOY)]
    assert callable(changed)
    changed({"kind": "Deployment", "ready": False})
    assert woken == ["any"]
    changed({"kind": "Deployment", "ready": True})
    assert woken == ["any", "any", "ready"]
    changed()  # a deletion, or a stream that listed again: what changed is not known
    assert woken[-2:] == ["any", "ready"]
    await watches.close()


def test_built_in_readiness_wakes_on_ready_objects_only() -> None:
    rolling: dict[str, Any] = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "generation": 2},
        "spec": {"replicas": 1},
        "status": {"observedGeneration": 2, "replicas": 2, "updatedReplicas": 1, "availableReplicas": 1},
    }
    available = [{"type": "Available", "status": "True"}]
    done = {**rolling, "status": {**rolling["status"], "replicas": 1, "conditions": available}}
    assert not ports._ready(rolling)  # an old replica is still there
    assert ports._ready(done)


async def test_a_subscriber_is_told_of_every_change_before_its_filter_and_of_unknown_ones() -> None:
    streams = Streams()
    now = [10.0]
    watches = MemberWatches(clock=lambda: now[0], stream=streams.run)
    told: list[Any] = []
    woken: list[str] = []
    watches.subscribe(
        target(),
        [DEPLOY],
        "k",
        lambda: woken.append("k"),
        only=lambda o: bool(o.get("ready")),
        note=told.append,
    )
    await settle()
    changed = streams.changed[("m1", DEPLOY)]
    assert callable(changed)
    changed({"kind": "Deployment", "ready": False})
    changed()
    assert told == [{"kind": "Deployment", "ready": False}, None]
    assert woken == ["k"]
    began = watches.now()
    now[0] = 11.0
    changed({"kind": "Deployment", "ready": False})  # while the judgement reads again
    watches.subscribe(target(), [DEPLOY], "k", lambda: woken.append("k"), since=began, note=told.append)
    assert told[-1] is None
    assert woken == ["k", "k"]
    await watches.close()


def _deployment(name: str, version: str, namespace: str = "apps") -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}", "resourceVersion": version},
    }


async def test_an_object_is_known_as_the_newest_version_a_stream_of_its_server_saw() -> None:
    streams = Streams()
    watches = MemberWatches(stream=streams.run)
    # Two registrations of one server with one kubeconfig, each with its own stream.
    watches.subscribe(target("m1"), [DEPLOY], "a", lambda: None)
    watches.subscribe(target("m1-alias"), [DEPLOY], "b", lambda: None)
    watches.subscribe(target("m2", b"kubeconfig-2"), [DEPLOY], "c", lambda: None)
    await settle()
    server = target("m1").pool_key()
    web = ct.ObjectRef("apps/v1", "Deployment", "apps", "web")
    assert watches.latest(server, web) is None  # nothing seen yet
    streams.changed[("m1", DEPLOY)](_deployment("web", "12"))  # type: ignore[operator]
    full = _deployment("web", "15")
    full["metadata"]["managedFields"] = [{"manager": "kube-controller-manager"}]
    full["status"] = {"replicas": 1}
    streams.changed[("m1-alias", DEPLOY)](full)  # type: ignore[operator]
    streams.changed[("m2", DEPLOY)](_deployment("web", "99"))  # type: ignore[operator]
    seen = watches.latest(server, web)
    assert seen is not None
    assert seen["metadata"]["resourceVersion"] == "15"
    assert seen["metadata"]["uid"] == "uid-web"
    assert "status" not in seen  # kept small: what an apply judges
    assert "managedFields" not in seen["metadata"]
    assert watches.latest(server, ct.ObjectRef("apps/v1", "Deployment", "other", "web")) is None
    # A change the stream cannot name (a deletion, a new list) forgets what it saw.
    streams.fire("m1-alias", DEPLOY)
    seen = watches.latest(server, web)
    assert seen is not None
    assert seen["metadata"]["resourceVersion"] == "12"
    watches.release("a")
    await settle()
    assert watches.latest(server, web) is None  # its stream ended
    await watches.close()
