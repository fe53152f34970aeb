"""Shared by the modules that install the upstream API groups (ADR 0062)."""

from __future__ import annotations

import contextlib
import shlex
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml
from lightkube import ApiError, Client
from lightkube.types import PatchType
from promotion_support import ControllerThread, settings, wait_for

from fleetwave.api import crds, families
from fleetwave.kube import kinds
from fleetwave.local import binaries, fleet
from fleetwave.mgmt import install


def _nothing() -> None:
    pass


@contextlib.contextmanager
def upstream_controller(
    local_fleet: fleet.FleetState,
    management: Client,
    bins: binaries.Binaries,
    identity: str,
    register: Callable[[], None],
    *,
    upstream: tuple[families.Family, ...] = families.UPSTREAM,
    withdraw: Callable[[], None] = _nothing,
    cleanup: Callable[[], None] = _nothing,
) -> Iterator[ControllerThread]:
    """A controller following the upstream groups, for a module that uses them.

    fleetwave.io's KubeFleet objects are cleared, the upstream groups served, `register` run (the
    module's members and content) and the controller started. On the way out `withdraw` runs while
    the controller still does (finalizers that withdraw content need it), then the controller stops,
    `cleanup` runs, and the hub is left as later modules expect it: fleetwave.io's kinds, no
    upstream group."""
    install.install(management)
    clear_native_kubefleet_objects(management)
    install.install(management, upstream_apis=True)
    wait_for(lambda: install.upstream_installed(management), timeout=30, what="upstream mode seen")
    register()
    chosen = replace(settings(bins.path("helm"), identity), upstream=upstream)
    thread = ControllerThread(local_fleet.cluster(fleet.MANAGEMENT).kubeconfig, chosen)
    thread.start()
    try:
        yield thread
    finally:
        withdraw()
        thread.stop()
        cleanup()
        install.install(management)
        remove_upstream_groups(management)
    assert thread.error is None, thread.error


def clear_native_kubefleet_objects(management: Client) -> None:
    """Other modules leave fleetwave.io placements and runs behind; `install --upstream-apis` would
    (rightly) refuse to hide them. This module starts from a hub without any."""
    for kind in sorted(crds.UPSTREAM_ONLY):
        resource = kinds.resource(kind)
        namespaced = kinds.native_info(kind).namespaced

        def listed(resource: Any = resource, namespaced: bool = namespaced) -> tuple[list[Any]] | None:
            try:
                found = management.list(resource, namespace="*") if namespaced else management.list(resource)
                return (list(found),)  # truthy even when empty
            except ApiError as e:  # 429 while a just-installed CRD's storage initializes
                if e.status.code == 429:
                    return None
                raise

        (objects,) = wait_for(listed, timeout=30, what=f"{kind} listable")
        for obj in objects:
            management.delete(resource, obj.metadata.name, namespace=obj.metadata.namespace)
            # No controller runs here to honour a placement's cleanup finalizer: drop it, as a user
            # whose controller is gone would.
            _drop_finalizers(management, resource, obj)


def remove_upstream_groups(management: Client) -> None:
    """Leave the hub as later modules expect it: no upstream group served. Every object of an
    upstream kind is deleted first, its finalizers dropped (the controller that would honour them is
    gone), then the CRDs, waited for until the API server no longer has them."""
    crd_resource = kinds.builtin_resource("apiextensions.k8s.io/v1", "CustomResourceDefinition")
    for crd in crds.upstream_crds(families.upstream_families()):
        spec = crd["spec"]
        for version in spec["versions"]:
            gvk = kinds.GVK(f"{spec['group']}/{version['name']}", spec["names"]["kind"])
            info = kinds.KindInfo(gvk, spec["names"]["plural"], spec["scope"] == "Namespaced")
            _drop_all(management, kinds.resource_class(info), info.namespaced)
        with contextlib.suppress(ApiError):
            management.delete(crd_resource, crd["metadata"]["name"])

    def gone() -> bool:
        names = {c.metadata.name for c in management.list(crd_resource)}
        return not names & {c["metadata"]["name"] for c in crds.upstream_crds(families.upstream_families())}

    wait_for(gone, timeout=120, what="the upstream CRDs removed")


def _drop_all(management: Client, resource: Any, namespaced: bool) -> None:
    def listed() -> tuple[list[Any]] | None:
        try:
            found = management.list(resource, namespace="*") if namespaced else management.list(resource)
            return (list(found),)  # truthy even when empty
        except ApiError as e:
            if e.status.code == 404:  # not installed, or this version not served
                return ([],)
            if e.status.code == 429:  # a CRD installed moments ago: its storage still initializes
                return None
            raise

    (objects,) = wait_for(listed, timeout=30, what="upstream objects listable")
    for obj in objects:
        _drop_finalizers(management, resource, obj)
        with contextlib.suppress(ApiError):
            management.delete(resource, obj.metadata.name, namespace=obj.metadata.namespace)


def _drop_finalizers(management: Client, resource: Any, obj: Any) -> None:
    with contextlib.suppress(ApiError):
        management.patch(
            resource,
            obj.metadata.name,
            {"metadata": {"finalizers": None}},
            namespace=obj.metadata.namespace,
            patch_type=PatchType.MERGE,
        )


class Kubectl:
    """The real `kubectl` against one cluster, with a discovery cache of its own (the modules that
    switch the upstream groups on and off must not read another module's cached discovery)."""

    def __init__(self, binary: str, kubeconfig: str, cache: Path) -> None:
        self.binary, self.kubeconfig, self.cache = binary, kubeconfig, cache

    def __call__(self, command: str, *, stdin: str | None = None, ok: bool = True) -> str:
        """Run `kubectl <command>` as a shell would split it (the seeds' command lines, verbatim)."""
        done = subprocess.run(
            self._argv(command), input=stdin, capture_output=True, text=True, timeout=60, check=False
        )
        if ok:
            assert done.returncode == 0, f"kubectl {command}: {done.stderr}"
        return done.stdout if ok else done.stdout + done.stderr

    def succeeds(self, command: str) -> bool:
        """Whether `kubectl <command>` exits 0 (its output is not wanted)."""
        done = subprocess.run(self._argv(command), capture_output=True, timeout=60, check=False)
        return done.returncode == 0

    def _argv(self, command: str) -> list[str]:
        # This module's own discovery cache: another module's kubectl may have cached other groups.
        argv = [self.binary, "--kubeconfig", self.kubeconfig, "--cache-dir", str(self.cache)]
        return argv + shlex.split(command)

    def yaml(self, command: str) -> dict[str, Any]:
        loaded: dict[str, Any] = yaml.safe_load(self(command))
        return loaded
