"""Which summary events wake a promotion, and how soon (ADR 0120): news that can change what it does
next wakes it at once; a count of clusters done moving wakes it within PROGRESS_FOLDS seconds."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from fleetwave.controllers import delivery_news as dn
from fleetwave.controllers.sveltos import summary_status as ss
from fleetwave.runtime.watching import EventType

PROFILE = "shop-production"
PROMOTION = "shop"
HASH = "h1"


class _Obj:
    """A cached object as the informers hold it: attribute metadata, `to_dict()`."""

    def __init__(self, body: dict[str, Any]) -> None:
        self._body = body
        meta = {"namespace": None, "labels": None, "annotations": None, "uid": None, **body["metadata"]}
        self.metadata = SimpleNamespace(**meta)

    def to_dict(self) -> dict[str, Any]:
        return self._body


class _Cache:
    def __init__(self) -> None:
        self.objects: dict[tuple[str, str], _Obj] = {}

    def get(self, kind: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        found = self.objects.get((kind, name))
        return None if found is None else found.to_dict()


class _Queue:
    def __init__(self) -> None:
        self.woken: list[tuple[str, float]] = []

    def enqueue(self, key: str, delay: float = 0.0, *, urgent: bool = False) -> None:
        self.woken.append((key, delay))


def _summary(cluster: str, state: str = "written", *, generation: int = 1) -> _Obj:
    status: dict[str, Any] = {}
    if state == "done":
        status = {
            "observedContentHash": HASH,
            "conditions": [{"type": "Ready", "status": "True", "reason": "Provisioned"}],
        }
    elif state == "failed":
        status = {
            "observedContentHash": HASH,
            "conditions": [{"type": "Ready", "status": "False", "reason": "Failed", "message": "refused"}],
        }
    elif state == "applying":
        status = {"conditions": [{"type": "Ready", "status": "False", "reason": "Provisioning"}]}
    return _Obj(
        {
            "metadata": {
                "name": f"{PROFILE}-{cluster}",
                "namespace": "fleet",
                "generation": generation,
                "labels": {ss.PROFILE_LABEL: PROFILE},
                "annotations": {ss.CONTENT_HASH_ANNOTATION: HASH},
            },
            "status": status,
        }
    )


def _news(clusters: int, max_in_flight: int = 0) -> tuple[dn.DeliveryNews, _Queue]:
    cache, queue = _Cache(), _Queue()
    refs = [{"namespace": "fleet", "name": f"c{i}"} for i in range(clusters)]
    cache.objects[("ClusterProfile", PROFILE)] = _Obj(
        {"metadata": {"name": PROFILE}, "spec": {"clusterRefs": refs}}
    )
    stage = {
        "name": "production",
        "phase": "Progressing",
        "maxInFlight": max_in_flight or clusters,
        "clusters": [f"fleet/c{i}" for i in range(clusters)],
    }
    cache.objects[("ClusterPromotion", PROMOTION)] = _Obj(
        {"metadata": {"name": PROMOTION}, "status": {"rollout": {"stages": [stage]}}}
    )
    news = dn.DeliveryNews(queue, lambda _obj: [PROMOTION], cache)  # type: ignore[arg-type]
    return news, queue


def _emit(news: dn.DeliveryNews, queue: _Queue, obj: _Obj, event: EventType = "MODIFIED") -> list[float]:
    queue.woken.clear()
    news.on_change(event, obj)
    return [delay for _, delay in queue.woken]


def test_a_cluster_done_while_others_are_in_flight_wakes_the_promotion_within_the_fold() -> None:
    news, queue = _news(3)
    for c in ("c0", "c1", "c2"):
        assert _emit(news, queue, _summary(c), "ADDED") == []  # written, nothing delivered yet
    assert _emit(news, queue, _summary("c0", "done")) == [dn.PROGRESS_FOLDS]
    assert _emit(news, queue, _summary("c0", "done")) == []  # the same news again: no wake
    assert _emit(news, queue, _summary("c1", "applying")) == [dn.PROGRESS_FOLDS]


def test_the_last_delivery_of_a_stage_wakes_the_promotion_at_once() -> None:
    news, queue = _news(2)
    for c in ("c0", "c1"):
        _emit(news, queue, _summary(c), "ADDED")
    assert _emit(news, queue, _summary("c0", "done")) == [dn.PROGRESS_FOLDS]
    assert _emit(news, queue, _summary("c1", "done")) == [0.0]


def test_the_last_of_the_summaries_written_so_far_is_not_the_last_of_the_stage() -> None:
    # The profile lists three clusters and has written two summaries: both done is not the end.
    news, queue = _news(3)
    for c in ("c0", "c1"):
        _emit(news, queue, _summary(c), "ADDED")
    _emit(news, queue, _summary("c0", "done"))
    assert _emit(news, queue, _summary("c1", "done")) == [dn.PROGRESS_FOLDS]
    _emit(news, queue, _summary("c2"), "ADDED")
    assert _emit(news, queue, _summary("c2", "done")) == [0.0]


def test_a_failure_and_a_spec_change_wake_the_promotion_at_once() -> None:
    news, queue = _news(3)
    for c in ("c0", "c1", "c2"):
        _emit(news, queue, _summary(c), "ADDED")
    assert _emit(news, queue, _summary("c0", "failed")) == [0.0]
    assert _emit(news, queue, _summary("c1", generation=2)) == [0.0]
    assert _emit(news, queue, _summary("c2"), "DELETED") == [0.0]


def test_in_a_stage_with_fewer_clusters_in_flight_than_it_has_each_done_frees_a_slot_at_once() -> None:
    news, queue = _news(3, max_in_flight=2)
    for c in ("c0", "c1"):
        _emit(news, queue, _summary(c), "ADDED")
    assert _emit(news, queue, _summary("c0", "done")) == [0.0]


def test_open_deliveries_close_when_the_last_open_one_is_done_or_deleted() -> None:
    open_ = dn.OpenDeliveries()
    assert not open_.update("ADDED", "a", PROFILE, done=False)
    assert not open_.update("ADDED", "b", PROFILE, done=False)
    assert open_.seen(PROFILE) == 2
    assert not open_.update("MODIFIED", "a", PROFILE, done=True)
    assert not open_.update("MODIFIED", "a", PROFILE, done=True)  # was not open: closes nothing
    assert open_.update("DELETED", "b", PROFILE, done=False)
    assert open_.seen(PROFILE) == 1
    assert open_.update("MODIFIED", "a", PROFILE, done=False) is False
    assert open_.update("MODIFIED", "a", PROFILE, done=True)
