"""Overrides in the KubeFleet controllers: snapshots of overrides, what a placement or a run uses
per cluster, a failing override applying nothing, and what status shows."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from types import SimpleNamespace
from typing import Any

import pytest

from fleetwave.controllers.kubefleet import executor, history
from fleetwave.controllers.kubefleet import ledger as lg
from fleetwave.controllers.kubefleet import override_snapshots as osn
from fleetwave.controllers.kubefleet import overrides as ov
from fleetwave.controllers.kubefleet import placement_status as ps
from fleetwave.core import model as m
from fleetwave.translate import NAME_LABEL

NOW = dt.datetime(2030, 1, 1, tzinfo=dt.UTC)
SPEC = {
    "resourceSelectors": [{"group": "", "version": "v1", "kind": "ConfigMap", "name": "cfg"}],
    "policy": {
        "overrideRules": [
            {
                "clusterSelector": {
                    "clusterSelectorTerms": [{"labelSelector": {"matchLabels": {"env": "prod"}}}]
                },
                "overrideType": "JSONPatch",
                "jsonPatchOverrides": [
                    {"op": "replace", "path": "/data/color", "value": "${MEMBER-CLUSTER-NAME}"}
                ],
            }
        ]
    },
}
CM = {
    "apiVersion": "v1",
    "kind": "ConfigMap",
    "metadata": {"name": "cfg", "namespace": "app"},
    "data": {"color": "b"},
}
FLEET = m.Fleet.of(
    [
        m.Cluster("fleet/prod-1", {"env": "prod", NAME_LABEL: "prod-1"}),
        m.Cluster("fleet/dev-1", {"env": "dev", NAME_LABEL: "dev-1"}),
    ]
)


class Lookup:
    """The controllers' cache, as far as overrides read it."""

    def __init__(self, objects: Mapping[str, Sequence[dict[str, Any]]]) -> None:
        self.objects = objects

    def list(self, kind: str) -> list[dict[str, Any]]:
        return list(self.objects.get(kind, ()))

    def get(self, kind: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        return next(
            (
                o
                for o in self.objects.get(kind, ())
                if o["metadata"]["name"] == name and o["metadata"].get("namespace") == namespace
            ),
            None,
        )


def _snap(spec: dict[str, Any], index: int, name: str = "ro") -> dict[str, Any]:
    made = osn.plan("ResourceOverride", name, "app", spec, [])
    assert made.create is not None
    out = dict(made.create)
    out["metadata"] = {
        **made.create["metadata"],
        "name": f"{name}-{index}",
        "labels": {**made.create["metadata"]["labels"], ov.INDEX_LABEL: str(index)},
    }
    return out


def _override(name: str = "ro") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "app"}, "spec": SPEC}


def test_an_override_is_snapshotted_once_per_spec_and_its_snapshots_go_with_it() -> None:
    first = osn.plan("ResourceOverride", "ro", "app", SPEC, [])
    assert first.create is not None
    meta = first.create["metadata"]
    assert (meta["name"], meta["namespace"]) == ("ro-0", "app")
    assert meta["labels"] == {
        "kubernetes-fleet.io/is-latest-snapshot": "true",
        "kubernetes-fleet.io/parent-resource-override": "ro",
        "kubernetes-fleet.io/override-index": "0",
    }
    assert first.create["spec"]["overrideSpec"] == SPEC
    same = osn.plan("ResourceOverride", "ro", "app", SPEC, [first.create])
    assert same.create is None
    edited = {**SPEC, "placement": {"name": "crp", "scope": "Cluster"}}
    second = osn.plan("ResourceOverride", "ro", "app", edited, [first.create])
    assert second.create is not None
    assert (second.create["metadata"]["name"], second.unmark) == ("ro-1", ("ro-0",))
    assert osn.plan("ResourceOverride", "ro", "app", None, [first.create]).delete == ("ro-0",)


def test_history_keeps_at_most_ten_snapshots() -> None:
    existing = [_snap(SPEC, i) for i in range(10)]
    edited = {**SPEC, "placement": {"name": "crp", "scope": "Cluster"}}
    made = osn.plan("ResourceOverride", "ro", "app", edited, existing)
    assert made.create is not None
    assert made.create["metadata"]["name"] == "ro-10"
    assert made.delete == ("ro-0",)


def test_a_placement_uses_the_newest_snapshot_of_overrides_that_still_exist() -> None:
    old, new = _snap(SPEC, 0), _snap({**SPEC, "placement": {"name": "crp", "scope": "Cluster"}}, 1)
    orphan = _snap(SPEC, 0, name="deleted")
    cache = Lookup({"ResourceOverride": [_override()], "ResourceOverrideSnapshot": [old, new, orphan]})
    assert [o.name for o in ov.latest(cache)] == ["ro-1"]
    per = ov.for_placement(cache, [CM], "crp", None, FLEET)
    assert per.render("fleet/prod-1", [CM]).objects[0]["data"] == {"color": "prod-1"}
    assert per.render("fleet/dev-1", [CM]).objects[0]["data"] == {"color": "b"}
    assert per.digest("h", "fleet/dev-1") == "h"
    assert per.digest("h", "fleet/prod-1") != "h"
    assert ov.for_placement(cache, [CM], "another", None, FLEET) is ov.NONE  # aimed at crp only


def test_a_run_pins_its_snapshots_per_cluster_and_fails_a_cluster_whose_pin_was_deleted() -> None:
    snap = _snap(SPEC, 0)
    cache = Lookup({"ResourceOverride": [_override()], "ResourceOverrideSnapshot": [snap]})
    pins = ov.pins(ov.for_placement(cache, [CM], "crp", None, FLEET), FLEET.names)
    assert pins["clusters"]["fleet/prod-1"] == {
        "clusterResourceOverrideSnapshots": [],
        "resourceOverrideSnapshots": [{"name": "ro-0", "namespace": "app"}],
    }
    assert pins["clusters"]["fleet/dev-1"]["resourceOverrideSnapshots"] == []
    # A newer snapshot does not change what the run delivers.
    newer = _snap(
        {
            **SPEC,
            "policy": {
                "overrideRules": [{"overrideType": "Delete", "clusterSelector": {"clusterSelectorTerms": []}}]
            },
        },
        1,
    )
    later = Lookup({"ResourceOverride": [_override()], "ResourceOverrideSnapshot": [snap, newer]})
    per = ov.pinned(later, pins, FLEET)
    assert per.render("fleet/prod-1", [CM]).objects[0]["data"] == {"color": "prod-1"}
    gone = ov.pinned(Lookup({"ResourceOverrideSnapshot": [newer]}), pins, FLEET)
    with pytest.raises(ov.co.OverrideError, match="ro-0 pinned by the run were deleted"):
        gone.render("fleet/prod-1", [CM])


async def test_a_cluster_whose_override_fails_gets_nothing_applied_and_its_entry_says_why(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bad = {
        **SPEC,
        "policy": {
            "overrideRules": [
                {
                    **SPEC["policy"]["overrideRules"][0],
                    "jsonPatchOverrides": [{"op": "replace", "path": "/data/missing", "value": 1}],
                }
            ]
        },
    }
    cache = Lookup({"ResourceOverride": [_override()], "ResourceOverrideSnapshot": [_snap(bad, 0)]})
    applied: list[str] = []

    async def apply(
        ctx: Any, memory: Any, cluster: str, objects: Sequence[Any], **_: Any
    ) -> executor.Outcome:
        applied.append(cluster)
        return executor.Outcome(True, "applied")

    monkeypatch.setattr(executor, "apply", apply)
    per = ov.for_placement(cache, [CM], "crp", None, FLEET)
    content = lg.Content("0", "h", [CM], "kf/crp/crp", overrides=per)
    ctx = SimpleNamespace(clock=lambda: NOW)
    got = await lg.deliver(ctx, executor.DeliveryMemory(), ["fleet/prod-1", "fleet/dev-1"], content)  # type: ignore[arg-type]
    assert applied == ["fleet/dev-1"]
    failed = got["fleet/prod-1"]
    assert failed.error == failed.override_error
    assert "ResourceOverride snapshot app/ro-0, rule 0, patch 0 (replace /data/missing)" in str(failed.error)
    assert failed.hash == content.hash_for("fleet/prod-1") != "h"
    assert got["fleet/dev-1"].overrides == {}  # no override applies there


def test_the_placement_shows_each_clusters_overrides_and_overridden_condition() -> None:
    ledger = {
        "deliveries": {
            "fleet/prod-1": {
                "index": "0",
                "hash": "x",
                "appliedAt": "2030-01-01T00:00:00Z",
                "overrides": {
                    "clusterResourceOverrideSnapshots": ["cro-0"],
                    "resourceOverrideSnapshots": [{"name": "ro-0", "namespace": "app"}],
                },
            },
            "fleet/dev-1": {
                "index": "0",
                "hash": "h",
                "appliedAt": "2030-01-01T00:00:00Z",
                "doneAt": "2030-01-01T00:00:01Z",
            },
            "fleet/bad": {
                "index": "0",
                "hash": "y",
                "appliedAt": "2030-01-01T00:00:00Z",
                "error": "boom",
                "overrideError": "boom",
            },
        }
    }
    fleet = m.Fleet.of([*FLEET.by_name.values(), m.Cluster("fleet/bad")])
    frame = ps.Frame("ClusterResourcePlacement", False, fleet, {c: c.split("/")[1] for c in fleet.names}, 2)
    summary = ps.summary(frame, history.latest([ledger]), {}, NOW)
    statuses = {s["clusterName"]: s for s in summary["placementStatuses"]}
    prod = statuses["prod-1"]
    assert prod["applicableClusterResourceOverrides"] == ["cro-0"]
    assert prod["applicableResourceOverrides"] == [{"name": "ro-0", "namespace": "app"}]
    assert [(c["type"], c["status"], c["reason"]) for c in prod["conditions"]] == [
        ("Overridden", "True", "OverriddenSucceeded")
    ]
    assert statuses["dev-1"]["conditions"][0]["reason"] == "NoOverrideSpecified"
    assert "applicableResourceOverrides" not in statuses["dev-1"]
    bad = statuses["bad"]["conditions"][0]
    assert (bad["status"], bad["reason"], bad["message"]) == ("False", "OverriddenFailed", "boom")
    assert history.latest([ledger])["fleet/bad"].override_error == "boom"


async def test_an_override_the_crd_cannot_refuse_is_not_snapshotted_and_a_warning_says_why() -> None:
    bad_rule = {
        **SPEC["policy"]["overrideRules"][0],
        "jsonPatchOverrides": [{"op": "remove", "path": "/data/color", "value": 1}],
    }
    override = {**_override(), "spec": {**SPEC, "policy": {"overrideRules": [bad_rule]}}}
    events: list[tuple[bool, str, str]] = []

    class Cache(Lookup):
        def obj(self, kind: str, namespace: str | None, name: str) -> Any:
            return self.get(kind, namespace, name)

    async def event(obj: Any, warning: bool, reason: str, message: str) -> None:
        events.append((warning, reason, message))

    ctx = SimpleNamespace(cache=Cache({"ResourceOverride": [override]}), event=event, client=None)
    await osn.reconcile(ctx, "ResourceOverride", "app/ro")  # type: ignore[arg-type]
    [(warning, reason, message)] = events
    assert (warning, reason) == (True, "InvalidOverride")
    assert "remove cannot have a value" in message
