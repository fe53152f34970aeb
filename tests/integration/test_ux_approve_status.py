"""`fleetwave approve promotion` and `fleetwave status promotion` against a real promotion, with the
controller running in-process on the session fleet."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

from lightkube import AsyncClient, Client
from typer.testing import CliRunner

from fleetwave.cli import app
from fleetwave.kube import client as kubeclient
from fleetwave.kube import kinds
from fleetwave.local import binaries, chartrepo, fleet
from fleetwave.ux import demo_flow, live, view
from fleetwave.ux import demo_setup as setup


async def _cli(*args: str) -> Any:
    # In a thread: the CLI runs its own event loop (status --watch) and must not stall the controller.
    return await asyncio.to_thread(CliRunner().invoke, app, list(args))


def _flat(result: Any) -> str:
    """The output with rich's line wrapping undone."""
    return " ".join(result.output.split())


async def _wait(client: AsyncClient, name: str, stop: Any) -> dict[str, Any]:
    return await asyncio.wait_for(live.follow(client, name, lambda _v: None, stop=stop), 120)


async def test_approve_and_status_drive_and_show_a_real_promotion(
    local_fleet: fleet.FleetState, bins: binaries.Binaries, management: Client, namespace: str, tmp_path: Any
) -> None:
    run_id = uuid.uuid4().hex[:6]
    config = setup.DemoConfig(
        promotion=f"ux-{run_id}",
        member_namespace=namespace,
        release=f"hello-{run_id}",
        release_namespace=namespace,
        extra_labels={"ux-approve": run_id},
        dev_delay="1s",
    )
    mk = local_fleet.cluster(fleet.MANAGEMENT).kubeconfig
    await asyncio.to_thread(setup.install_and_register, management, local_fleet, config)
    client = kubeclient.async_client(kubeclient.config_from_file(mk))
    with chartrepo.serve(bins.path("helm"), tmp_path, [(demo_flow.chart_dir(), "1.0.0")]) as repo:
        await asyncio.to_thread(
            setup.apply_manifest, management, setup.promotion_manifest(config, repo.url, "1.0.0")
        )
        controller = setup.start_controller(client, bins.path("helm"))
        try:
            await _exercise(client, management, config.promotion, mk)
        finally:
            await controller.stop()
            await client.close()


async def _exercise(client: AsyncClient, management: Client, name: str, mk: str) -> None:
    await _wait(client, name, lambda v: "staging" in view.waiting_for_approval(v))

    shown = await _cli("status", "promotion", name, "-o", "json", "--kubeconfig", mk)
    assert shown.exit_code == 0, shown.output
    data = json.loads(shown.output)
    stages = {s["name"]: s for s in data["stages"]}
    assert stages["dev"]["phase"] == "Succeeded"
    assert [c["state"] for c in stages["dev"]["clusters"]] == ["done"]
    assert stages["staging"]["approval"]["approved"] is False
    assert any(g["kind"] == "Approval" and g["state"] == "Waiting" for g in stages["staging"]["gates"])
    assert [c["state"] for c in stages["production"]["clusters"]] == ["pending"]

    table = await _cli("status", "promotion", name, "--kubeconfig", mk)
    assert f"to approve: fleetwave approve promotion {name} --stage staging" in _flat(table)

    unknown = await _cli("approve", "promotion", name, "--stage", "qa", "--kubeconfig", mk)
    assert unknown.exit_code == 2  # bad input: the exit-code table of every command
    assert "stages: dev, staging, production" in _flat(unknown)
    automatic = await _cli("approve", "promotion", name, "--stage", "dev", "--kubeconfig", mk)
    assert automatic.exit_code == 2
    assert "no manual trigger" in _flat(automatic)
    missing = await _cli("approve", "promotion", f"{name}-nope", "--stage", "staging", "--kubeconfig", mk)
    assert missing.exit_code == 1
    assert "not found" in _flat(missing)
    # Nothing was approved by the refused attempts: staging still waits.
    assert view.waiting_for_approval(live.fetch_view(management, name)) == ["staging"]

    approved = await _cli("approve", "promotion", name, "--stage", "staging", "--kubeconfig", mk)
    assert approved.exit_code == 0, approved.output
    watched = await _cli("status", "promotion", name, "--watch", "--kubeconfig", mk)
    assert watched.exit_code == 0, watched.output
    assert (
        f"{name} Succeeded | dev: Succeeded 1/1 | staging: Succeeded 1/1 | production: Succeeded 1/1"
        in _flat(watched)
    )

    final = live.fetch_view(management, name)
    assert final["phase"] == "Succeeded"
    # automaticReset: the approval was consumed, the next revision will wait again.
    stored = management.get(kinds.resource("ClusterPromotion"), name)
    assert stored.spec["stages"][1]["trigger"]["manual"]["approved"] is False
