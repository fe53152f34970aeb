"""Informers list and watch through a client of their own: in the request client's connection
pool, every request walked each watch's long-lived connection and probed the idle ones."""

from __future__ import annotations

from typing import Any

from fleetwave.controllers import app
from fleetwave.runtime import watching


class _Client:
    """Stands in for a client nothing is sent through while the manager is only built."""

    def __init__(self, name: str) -> None:
        self.name = name


async def test_every_informer_uses_the_watch_client_and_nothing_else_does() -> None:
    requests, watches = _Client("requests"), _Client("watches")
    settings = app.Settings(helm_binary="helm", leader_election=False)
    manager = app.build(requests, settings, handle_signals=False, watch_client=watches)  # type: ignore[arg-type]
    informers: list[watching.Informer] = manager._informers
    assert len(informers) > 10  # the Sveltos and KubeFleet kinds, ConfigMaps and Secrets
    assert {i._api.name for i in informers} == {"watches"}
    await manager.health_pool.close()  # type: ignore[attr-defined]


async def test_without_a_watch_client_informers_share_the_one_client() -> None:
    one = _Client("one")
    manager: Any = app.build(
        one, app.Settings(helm_binary="helm", leader_election=False), handle_signals=False
    )  # type: ignore[arg-type]
    assert {i._api.name for i in manager._informers} == {"one"}
    await manager.health_pool.close()


async def test_leases_are_renewed_through_the_lease_client() -> None:
    requests, leases = _Client("requests"), _Client("leases")
    one: Any = app.build(
        requests,  # type: ignore[arg-type]
        app.Settings(helm_binary="helm", leader_election=True),
        handle_signals=False,
        lease_client=leases,  # type: ignore[arg-type]
    )
    assert one.elector._api.name == "leases"
    sharded: Any = app.build(
        requests,  # type: ignore[arg-type]
        app.Settings(helm_binary="helm", leader_election=True, shards=3),
        handle_signals=False,
        lease_client=leases,  # type: ignore[arg-type]
    )
    assert sharded.shards._api.name == "leases"
    assert {i._api.name for i in sharded._informers} == {"requests"}  # no watch client given
    for manager in (one, sharded):
        await manager.health_pool.close()


async def test_per_cluster_work_runs_in_the_bulk_lane_and_rollouts_decide_past_it() -> None:
    """Profiles write a summary per cluster, summaries a status per cluster: bulk. A promotion or a
    staged run opening a stage is one decision for many clusters, and must not queue behind them."""
    manager: Any = app.build(
        _Client("one"),  # type: ignore[arg-type]
        app.Settings(helm_binary="helm", leader_election=False),
        handle_signals=False,
    )
    bulk = {c.name for c in manager._controllers if c.bulk}
    assert bulk == {"clusterprofile", "clustersummary"}
    names = {c.name for c in manager._controllers}
    assert {"clusterpromotion", "crp-stagedupdaterun", "rp-stagedupdaterun"} <= names - bulk
    await manager.health_pool.close()
