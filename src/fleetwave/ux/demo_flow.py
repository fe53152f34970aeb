"""The demo's story on a running local fleet: install, register, roll a chart through the stages.

Runs the controller in-process, shows the rollout live, approves staging the way a user would
(printing the command), optionally upgrades the chart and watches it walk the stages again, then
reads back what each member runs. Returns a result instead of exiting, so tests can assert on it.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console

from fleetwave.kube import client as kubeclient
from fleetwave.kube import kinds, ops
from fleetwave.kube.client import AsyncClient
from fleetwave.local import chartrepo, fleet
from fleetwave.ux import approval, live, view
from fleetwave.ux import demo_setup as setup
from fleetwave.ux.demo_setup import DemoConfig
from fleetwave.ux.present import Presenter

# The demo's chart: the checkout's test chart, else the copy packaged in the wheel.
_CHECKOUT_CHART = Path(__file__).resolve().parents[3] / "tests" / "charts" / "hello"
_PACKAGED_CHART = Path(__file__).resolve().parents[1] / "_demo" / "hello"
CHART = _CHECKOUT_CHART if (_CHECKOUT_CHART / "Chart.yaml").is_file() else _PACKAGED_CHART


@dataclass
class DemoResult:
    ok: bool
    reason: str = ""
    versions: dict[str, str] = field(default_factory=dict)  # member -> chart version it runs
    rollouts: list[dict[str, Any]] = field(default_factory=list)  # last view of each rollout


def chart_dir() -> Path:
    if not (CHART / "Chart.yaml").is_file():
        raise FileNotFoundError(
            f"the demo chart is missing: {CHART} (reinstall fleetwave: its package has it)"
        )
    return CHART


async def run(state: fleet.FleetState, helm: str, console: Console, config: DemoConfig) -> DemoResult:
    """The whole story on `state` (a running fleet); never raises for a rollout that fails."""
    mgmt_path = state.cluster(fleet.MANAGEMENT).kubeconfig
    sync = kubeclient.client(kubeclient.config_from_file(mgmt_path))
    client = kubeclient.async_client(kubeclient.config_from_file(mgmt_path))
    versions = ["1.0.0", *([config.upgrade_to] if config.upgrade_to else [])]
    try:
        console.print("[bold]$ fleetwave install[/bold] && fleetwave cluster register ... (x3)")
        for line in await asyncio.to_thread(setup.install_and_register, sync, state, config):
            console.print(f"  {line}")
        with tempfile.TemporaryDirectory(prefix="fleetwave-demo-repo-") as tmp:
            charts = [(chart_dir(), v) for v in versions]
            with chartrepo.serve(helm, Path(tmp), charts) as repo:
                console.print(
                    f"chart repository (stands in for kyverno's) at {repo.url}: hello {', '.join(versions)}"
                )
                controller = setup.start_controller(client, helm)
                try:
                    return await _rollouts(sync, client, console, config, repo.url, versions, state)
                finally:
                    await controller.stop()
    finally:
        await client.close()
        sync.close()


async def _rollouts(
    sync: Any,
    client: AsyncClient,
    console: Console,
    config: DemoConfig,
    url: str,
    versions: list[str],
    state: fleet.FleetState,
) -> DemoResult:
    result = DemoResult(ok=False)
    for i, version in enumerate(versions):
        verb = "rolling out" if i == 0 else "upgrading to"
        console.print(f"[bold]$ fleetwave apply -f promotion.yaml[/bold]  ({verb} hello {version})")
        await asyncio.to_thread(setup.apply_manifest, sync, setup.promotion_manifest(config, url, version))
        final = await _follow(client, console, config)
        result.rollouts.append(final)
        if final["phase"] != "Succeeded":
            result.reason = _failure(final)
            return result
    result.versions = await asyncio.to_thread(setup.deployed_versions, state, config)
    expected = versions[-1]
    wrong = {m: v for m, v in result.versions.items() if v != expected}
    result.ok = not wrong
    result.reason = f"members not running {expected}: {wrong}" if wrong else ""
    return result


def _failure(final: dict[str, Any]) -> str:
    failed = [
        f"{c['name']}: {c['message']}"
        for s in final["stages"]
        for c in s["clusters"]
        if c["state"] == "failed"
    ]
    return f"rollout {final['phase']}: {final.get('message') or ''} {'; '.join(failed)}".strip()


async def _follow(client: AsyncClient, console: Console, config: DemoConfig) -> dict[str, Any]:
    approving: dict[str, asyncio.Task[None]] = {}
    with Presenter(console) as presenter:

        def on_view(v: dict[str, Any]) -> None:
            presenter.show(v)
            for stage in view.waiting_for_approval(v):
                if stage not in approving or approving[stage].done():
                    approving[stage] = asyncio.create_task(
                        _approve_later(client, config, stage, presenter.note)
                    )

        try:
            return await asyncio.wait_for(live.follow(client, config.promotion, on_view), config.timeout)
        except TimeoutError:
            last = dict(presenter.last or {"phase": "Unknown", "stages": [], "message": ""})
            last["phase"] = "TimedOut"
            last["message"] = (
                f"the rollout did not finish within {config.timeout:.0f}s: {last.get('message')}"
            )
            return last
        finally:
            for task in approving.values():
                task.cancel()


async def _approve_later(
    client: AsyncClient, config: DemoConfig, stage: str, note: Callable[[str], None]
) -> None:
    await asyncio.sleep(config.approve_after)
    promotions = kinds.resource("ClusterPromotion")
    current = (await client.get(promotions, config.promotion)).to_dict()
    if approval.is_approved(current, stage):
        return
    note(
        f"[bold]$ fleetwave approve promotion {config.promotion} --stage {stage}[/bold]  (as a user would, "
        "or: kubectl patch clusterpromotion ... trigger/manual/approved=true)"
    )
    patch = approval.approval_patch(current, stage)
    await ops.json_patch(client, promotions, config.promotion, patch)
