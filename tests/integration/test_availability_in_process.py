"""Built-in readiness judged on the event loop gives the sandbox worker's verdicts, on a real member."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import time
from pathlib import Path
from typing import Any

from lightkube import Client, codecs

from fleetwave.delivery import availability, sessions
from fleetwave.delivery.target import MemberTarget
from fleetwave.health.model import DEFAULT_LIMITS
from fleetwave.local import fleet
from fleetwave.sandbox import worker as sandbox_worker

Ids = list[tuple[str, str, str | None, str]]


def _deployment(namespace: str) -> dict[str, Any]:
    labels = {"app": "web"}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": namespace},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "web", "image": "registry.invalid/web:1"}]},
            },
        },
    }


def _judge(target: MemberTarget, ids: Ids) -> tuple[bool, str]:
    async def go() -> tuple[bool, str]:
        try:
            return await availability.judge(target, ids, wall_seconds=20.0)
        finally:
            await sessions.close_pool()  # the pool is this loop's, and the loop ends here

    return asyncio.run(go())


def _both(target: MemberTarget, ids: Ids) -> tuple[tuple[bool, str], tuple[bool, str]]:
    """(in-process verdict, the sandbox worker's verdict) for the same objects, read about together."""
    here = _judge(target, ids)
    job = {
        "objects": [list(i) for i in ids],
        "kubeconfig": base64.b64encode(target.kubeconfig).decode(),
        "limits": dataclasses.asdict(DEFAULT_LIMITS),
    }
    reply = sandbox_worker.answer(job)  # what the sandbox worker process replies to the same job
    return here, (reply["ok"], reply["message"])


def _first_member(local_fleet: fleet.FleetState) -> tuple[str, MemberTarget]:
    member = local_fleet.members[0]
    return member.name, MemberTarget(member.name, Path(member.kubeconfig).read_bytes())


def test_missing_unserved_and_namespaced_without_namespace_read_as_the_worker_reads_them(
    local_fleet: fleet.FleetState, namespace: str
) -> None:
    _, target = _first_member(local_fleet)
    cases: list[Ids] = [
        [("v1", "ConfigMap", namespace, "absent")],
        [("widgets.example.invalid/v1", "Widget", namespace, "w")],
        [("v1", "ConfigMap", None, "no-namespace")],
        [("v1", "Namespace", None, namespace)],
    ]
    verdicts = [_both(target, ids) for ids in cases]
    for here, worker in verdicts:
        assert here == worker
    assert verdicts[0][0] == (False, f"ConfigMap {namespace}/absent not found")
    assert not verdicts[1][0][0]
    assert "Widget w: kind Widget is not served under" in verdicts[1][0][1]
    assert verdicts[2][0][1].startswith("health check could not run: ValueError: ConfigMap is namespaced")
    assert verdicts[3][0] == (True, "ready")


def test_a_deployment_is_judged_as_the_worker_judges_it_until_it_is_available(
    local_fleet: fleet.FleetState, members: dict[str, Client], namespace: str
) -> None:
    name, target = _first_member(local_fleet)
    member = members[name]
    member.apply(codecs.from_dict(_deployment(namespace)), force=True)
    member.apply(
        codecs.from_dict(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "settings", "namespace": namespace},
            }
        ),
        force=True,
    )
    ids: Ids = [
        ("v1", "ConfigMap", namespace, "settings"),
        ("apps/v1", "Deployment", namespace, "web"),
    ]
    deadline = time.monotonic() + 120
    seen: list[tuple[bool, str]] = []
    while True:
        here, worker = _both(target, ids)
        seen += [here, worker]
        if here == worker and here[0]:
            break
        # The worker reads a moment later: the Deployment may have moved on in between (another
        # reason it is not ready yet, or ready), never back (once ready, it stays ready here).
        assert not here[0], (here, worker)
        assert time.monotonic() < deadline, f"never available: {seen[-1]}"
        time.sleep(0.2)
    assert seen[-1] == (True, "ready")
    assert all(ok or msg.startswith(f"Deployment {namespace}/web: ") for ok, msg in seen)


def test_an_unreachable_member_is_named_and_never_raised(dead_target: MemberTarget, namespace: str) -> None:
    ok, message = _judge(dead_target, [("v1", "ConfigMap", namespace, "x")])
    assert not ok
    assert message.startswith("cluster dead unreachable: ")
