"""The demo's flow on the session fleet: a chart through dev, staging (approved) and production, then
an upgrade through the stages again, with the controller running in-process."""

from __future__ import annotations

import uuid

from rich.console import Console

from fleetwave.local import binaries, fleet
from fleetwave.ux import demo_flow
from fleetwave.ux.demo_setup import DemoConfig


async def test_the_demo_flow_rolls_out_and_upgrades_through_every_stage(
    local_fleet: fleet.FleetState, bins: binaries.Binaries, namespace: str
) -> None:
    run_id = uuid.uuid4().hex[:6]
    config = DemoConfig(
        promotion=f"demo-{run_id}",
        member_namespace=namespace,
        release=f"hello-{run_id}",
        release_namespace=namespace,
        extra_labels={"ux-demo": run_id},
        dev_delay="2s",
        approve_after=1.0,
        timeout=180.0,
    )
    console = Console(record=True, width=160, force_terminal=False)
    result = await demo_flow.run(local_fleet, bins.path("helm"), console, config)
    output = console.export_text()
    assert result.ok, f"{result.reason}\n{output}"
    assert result.versions == {m.name: "1.1.0" for m in local_fleet.members}
    assert [r["phase"] for r in result.rollouts] == ["Succeeded", "Succeeded"]
    # Staging waited for the approval both times and the demo gave it the way a user would.
    assert output.count(f"fleetwave approve promotion {config.promotion} --stage staging") >= 2
    for rollout in result.rollouts:
        stages = {s["name"]: s for s in rollout["stages"]}
        assert all(s["phase"] == "Succeeded" for s in stages.values())
        assert [c["state"] for s in stages.values() for c in s["clusters"]] == ["done"] * 3
        assert stages["dev"]["succeededAt"] <= stages["staging"]["startedAt"]
        assert stages["staging"]["succeededAt"] <= stages["production"]["startedAt"]
