"""Automatic rollback (issue 13): from the failing health check to the last cluster rolled back.

    .venv/bin/python bench/bench_rollback.py [--sizes 3,100] [--servers 3]

Registrations alias onto `--servers` light member API servers (as bench_scale.py does; server i is
dev, staging or prod, so each stage is a third of the fleet). Per size N, one ClusterPromotion over
the N clusters in 3 stages (maxUpdate 10%), content a ConfigMap, production guarded by a post-delay
health check that fails when the ConfigMap says version 2, `onFailure: Rollback`, grace 1 s:
  1. version 1 rolls out everywhere: the forward time (plan frozen -> last stage succeeded);
  2. version 2 reaches every stage; production's check fails; the promotion rolls back:
       detect   = production delivered (its check starts failing) -> rollback started (includes the grace)
       rollback = rollback started -> the last stage rolled back (dev)
     and the ratio of the rollback to the forward rollout over the same clusters, same run.
Times come from the promotion's own status (the controller's clock), so they include no polling here.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from lightkube import Client, codecs

from bench_scale import API, MEMBERS_NS, NS, light_fleet, register_upto, start_controller
from fleetwave.kube import client as kubeclient
from fleetwave.kube import kinds
from fleetwave.local import binaries, fleet
from fleetwave.mgmt import install

Obj = dict[str, Any]
CHECK = """
function evaluate()
  if obj.data.version == "2" then
    return {status = "Degraded", message = "version 2 must not run in production"}
  end
  return {status = "Healthy", message = "ok"}
end
"""


def policy(name: str, version: int) -> Obj:
    body = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": NS},
        "data": {"version": str(version)},
    }
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": f"{name}-policy", "namespace": NS},
        "data": {"content.yaml": json.dumps(body)},
    }


def promotion(name: str, point: int) -> Obj:
    def stage(env: str, trigger: Obj | None = None) -> Obj:
        out: Obj = {"name": env, "clusterSelector": {"matchLabels": {"env": env, f"p{point}": "y"}}}
        return {**out, "trigger": trigger} if trigger else out

    check = {"name": "not-v2", "group": "", "version": "v1", "kind": "ConfigMap", "namespace": NS}
    check |= {"resourceName": name, "script": CHECK}
    return {
        "apiVersion": API,
        "kind": "ClusterPromotion",
        "metadata": {"name": name},
        "spec": {
            "onFailure": "Rollback",
            "failureBudget": {"gracePeriod": "1s"},
            "profileSpec": {
                "maxUpdate": "10%",
                "policyRefs": [{"kind": "ConfigMap", "name": f"{name}-policy", "namespace": NS}],
            },
            "stages": [
                stage("dev"),
                stage("staging"),
                stage("prod", {"auto": {"postDelayHealthChecks": [check]}}),
            ],
        },
    }


def _t(value: str) -> dt.datetime:
    return dt.datetime.fromisoformat(value.replace("Z", "+00:00"))


def wait_phase(mgmt: Client, name: str, phases: tuple[str, ...], budget: float) -> Obj:
    deadline = time.monotonic() + budget
    while time.monotonic() < deadline:
        status = mgmt.get(kinds.resource("ClusterPromotion"), name).to_dict().get("status") or {}
        record = status.get("rollout") or {}
        if record.get("phase") in phases:
            return dict(status)
        time.sleep(0.5)
    raise SystemExit(f"{name} did not reach {phases} within {budget:.0f} s")


def point(mgmt: Client, n: int, budget: float) -> dict[str, Any]:
    name = f"rb-{n}"
    mgmt.apply(codecs.from_dict(policy(name, 1)), field_manager="bench", force=True)
    mgmt.apply(codecs.from_dict(promotion(name, n)), field_manager="bench", force=True)
    first = wait_phase(mgmt, name, ("Succeeded", "Failed"), budget)["rollout"]
    forward = max(_t(s["succeededAt"]) for s in first["stages"]) - _t(first["startedAt"])
    mgmt.apply(codecs.from_dict(policy(name, 2)), field_manager="bench", force=True)
    ended = wait_phase(mgmt, name, ("RolledBack", "Failed"), budget)["rollout"]
    if ended["phase"] != "RolledBack":
        raise SystemExit(f"{name} ended {ended['phase']}: {ended.get('message')}")
    prod = next(s for s in ended["stages"] if s["name"] == "prod")
    back = ended["rollback"]
    started = _t(back["startedAt"])
    last = _t(back["stages"][-1]["succeededAt"])
    detect = started - _t(prod["deliveredAt"])
    rollback = last - started
    mgmt.delete(kinds.resource("ClusterPromotion"), name)
    return {
        "clusters": n,
        "forward_s": forward.total_seconds(),
        "detect_s": detect.total_seconds(),
        "rollback_s": rollback.total_seconds(),
        "failing_check_to_last_rolled_back_s": (detect + rollback).total_seconds(),
        "rollback_over_forward": rollback / forward if forward else None,
        "rolled_back": sum(len(s["clusters"]) for s in back["stages"]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="3,100")
    parser.add_argument("--servers", type=int, default=3)
    parser.add_argument("--budget", type=float, default=600.0, help="seconds each phase may take")
    args = parser.parse_args()
    sizes = sorted(int(s) for s in args.sizes.split(","))
    bins = binaries.ensure()
    rows = []
    with tempfile.TemporaryDirectory(prefix="fleetwave-bench-rollback-") as tmp:
        state_dir = Path(tmp) / "fleet"
        state = light_fleet(state_dir, args.servers, bins)
        controller = None
        try:
            mk = state.cluster(fleet.MANAGEMENT).kubeconfig
            with kubeclient.client(kubeclient.config_from_file(mk)) as mgmt:
                install.install(mgmt)
                controller = start_controller(state, bins.path("helm"), Path(tmp) / "controller.log", 1)
                registered = 0
                for n in sizes:
                    register_upto(mk, state.members, registered, n, sizes)
                    registered = n
                    row = point(mgmt, n, args.budget)
                    rows.append(row)
                    print(json.dumps(row), flush=True)
        finally:
            if controller is not None:
                controller.terminate()
                controller.wait(30)
            fleet.down(state_dir)
    print(f"\nrollback on {args.servers} light member API servers (registrations in {MEMBERS_NS}):")
    head = ("clusters", 8), ("forward s", 10), ("detect s", 9), ("rollback s", 11), ("check->done s", 14)
    print(" ".join(f"{h:>{w}}" for h, w in head), f"{'ratio':>6}")
    for r in rows:
        print(
            f"{r['clusters']:>8} {r['forward_s']:>10.1f} {r['detect_s']:>9.1f} {r['rollback_s']:>11.1f} "
            f"{r['failing_check_to_last_rolled_back_s']:>14.1f} {r['rollback_over_forward']:>6.2f}"
        )


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
