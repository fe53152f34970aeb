"""`fleetwave ui` in a real browser (Debian's chromium, headless, driven by Playwright) against a real
promotion on the local fleet, with the controller running in-process: the page draws the rollout,
a stage turns green when it completes without the page reloading, a user without patch rights
sees the API server's refusal when pressing Approve, and the Approve button moves the waiting stage
on. Screenshots of each state are saved to build/test-artifacts/ui/ (or $FLEETWAVE_TEST_ARTIFACTS)."""

from __future__ import annotations

import asyncio
import os
import shutil
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from lightkube import Client
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.models.rbac_v1 import PolicyRule, RoleRef, Subject
from lightkube.resources.core_v1 import ServiceAccount
from lightkube.resources.rbac_authorization_v1 import ClusterRole, ClusterRoleBinding
from playwright.async_api import Browser, Page, async_playwright
from promotion_support import service_account_kubeconfig

from fleetwave.kube import client as kubeclient
from fleetwave.kube import kinds
from fleetwave.local import binaries, chartrepo, fleet
from fleetwave.ux import demo_flow, ui_server
from fleetwave.ux import demo_setup as setup

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(os.environ.get("FLEETWAVE_TEST_ARTIFACTS") or ROOT / "build" / "test-artifacts") / "ui"
WAIT_MS = 120_000


def _chromium() -> str:
    found = (
        os.environ.get("FLEETWAVE_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    )
    if not found:
        pytest.fail("no chromium: run scripts/test (it installs Debian's chromium) or set FLEETWAVE_CHROMIUM")
    return found


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(executable_path=_chromium(), args=["--no-sandbox"])
        try:
            yield launched
        finally:
            await launched.close()


VIEWER = "fleetwave-ui-test-viewer"


@pytest.fixture
def viewer(
    local_fleet: fleet.FleetState, management: Client, namespace: str, tmp_path: Path
) -> Iterator[Path]:
    """A kubeconfig of a ServiceAccount that may read rollouts (get, list, watch) but patch nothing."""
    management.create(ServiceAccount(metadata=ObjectMeta(name="viewer", namespace=namespace)))
    resources = [
        "clusterpromotions",
        "clustersummaries",
        "clusterstagedupdateruns",
        "stagedupdateruns",
        "memberclusters",
    ]
    management.apply(
        ClusterRole(
            metadata=ObjectMeta(name=VIEWER),
            rules=[
                PolicyRule(apiGroups=["fleetwave.io"], resources=resources, verbs=["get", "list", "watch"])
            ],
        )
    )
    management.apply(
        ClusterRoleBinding(
            metadata=ObjectMeta(name=VIEWER),
            roleRef=RoleRef(apiGroup="rbac.authorization.k8s.io", kind="ClusterRole", name=VIEWER),
            subjects=[Subject(kind="ServiceAccount", name="viewer", namespace=namespace)],
        )
    )
    admin = local_fleet.cluster(fleet.MANAGEMENT).kubeconfig
    path = tmp_path / "viewer.kubeconfig"
    path.write_bytes(service_account_kubeconfig(admin, namespace=namespace, name="viewer"))
    try:
        yield path
    finally:
        management.delete(ClusterRoleBinding, VIEWER)
        management.delete(ClusterRole, VIEWER)


async def _shot(page: Page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    await page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def _stage(rollout: str, stage: str, state: str | None = None) -> str:
    where = f'section.rollout[data-rollout-id="ClusterPromotion/-/{rollout}"] .stage[data-stage="{stage}"]'
    return where + (f'[data-state="{state}"]' if state else "")


async def test_the_page_follows_a_promotion_and_approves_as_the_user(
    local_fleet: fleet.FleetState,
    bins: binaries.Binaries,
    management: Client,
    namespace: str,
    tmp_path: Path,
    browser: Browser,
    viewer: Path,
) -> None:
    run_id = uuid.uuid4().hex[:6]
    config = setup.DemoConfig(
        promotion=f"ui-{run_id}",
        member_namespace=namespace,
        release=f"hello-{run_id}",
        release_namespace=namespace,
        extra_labels={"ui-test": run_id},
        dev_delay="3s",
    )
    admin = kubeclient.config_from_file(local_fleet.cluster(fleet.MANAGEMENT).kubeconfig)
    await asyncio.to_thread(setup.install_and_register, management, local_fleet, config)
    client = kubeclient.async_client(admin)
    as_admin = as_viewer = None
    try:
        as_admin = await ui_server.start(admin)
        as_viewer = await ui_server.start(kubeclient.config_from_file(viewer))
        with chartrepo.serve(bins.path("helm"), tmp_path, [(demo_flow.chart_dir(), "1.0.0")]) as repo:
            await asyncio.to_thread(
                setup.apply_manifest, management, setup.promotion_manifest(config, repo.url, "1.0.0")
            )
            controller = setup.start_controller(client, bins.path("helm"))
            try:
                await _exercise(browser, management, config.promotion, run_id, as_admin.url, as_viewer.url)
            finally:
                await controller.stop()
    finally:
        for running in (as_viewer, as_admin):
            if running is not None:
                await running.stop()
        await client.close()


async def _exercise(
    browser: Browser, management: Client, name: str, run_id: str, admin_url: str, viewer_url: str
) -> None:
    page = await browser.new_page(viewport={"width": 1400, "height": 900})
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    await page.goto(admin_url)
    await page.evaluate("window.__notReloaded = true")

    # The page draws the running promotion: its three stages, in order.
    rollout = page.locator(f'section.rollout[data-rollout-id="ClusterPromotion/-/{name}"]')
    await rollout.wait_for(timeout=WAIT_MS)
    stages = await rollout.locator(".stage").evaluate_all("els => els.map(e => e.dataset.stage)")
    assert stages == ["dev", "staging", "production"]
    await _shot(page, "1-running")

    # dev turns green by itself (watch events reach the page), then staging waits for its approval.
    await page.locator(_stage(name, "dev", "healthy")).wait_for(timeout=WAIT_MS)
    await page.locator(_stage(name, "dev") + ' .tile[data-state="healthy"]').wait_for(timeout=WAIT_MS)
    approve = page.locator(_stage(name, "staging") + " button.approve")
    await approve.wait_for(timeout=WAIT_MS)
    assert await page.locator(_stage(name, "staging", "waiting")).count() == 1
    assert await page.evaluate("window.__notReloaded === true")
    assert await page.locator("#problems li").count() == 0  # the admin may read every kind
    # The fleet overview lists the members with their labels and what each runs.
    fleet_text = " ".join((await page.locator("#fleet").inner_text()).split())
    assert fleet_text.count(f"ui-test={run_id}") == 3, fleet_text
    await _shot(page, "2-waiting-for-approval")

    # A user who may read but not patch presses Approve: the API server's refusal is shown, and the
    # stage still waits.
    denied = await browser.new_page(viewport={"width": 1400, "height": 900})
    await denied.goto(viewer_url)
    await denied.locator(_stage(name, "staging") + " button.approve").click(timeout=WAIT_MS)
    notice = denied.locator("#notice.notice-error")
    await notice.wait_for(timeout=30_000)
    said = " ".join((await notice.inner_text()).split())
    assert "you are not allowed to approve" in said
    assert "clusterpromotions.fleetwave.io" in said
    await _shot(denied, "3-approval-refused")
    stored = management.get(kinds.resource("ClusterPromotion"), name)
    assert not stored.spec["stages"][1]["trigger"]["manual"].get("approved")
    await denied.close()

    # The user with the right approves: the same patch as `fleetwave approve`; the rollout finishes.
    await approve.click()
    await page.locator("#notice.notice-ok").wait_for(timeout=30_000)
    assert f"clusterpromotion/{name} stage staging approved" in await page.locator("#notice").inner_text()
    await page.locator(_stage(name, "production", "healthy")).wait_for(timeout=WAIT_MS)
    await page.locator(
        f'section.rollout[data-rollout-id="ClusterPromotion/-/{name}"][data-phase="Succeeded"]'
    ).wait_for(timeout=WAIT_MS)
    assert await page.locator(_stage(name, "staging") + " button.approve").count() == 0
    assert await page.evaluate("window.__notReloaded === true")
    await _shot(page, "4-succeeded")
    assert errors == []
    await page.close()
