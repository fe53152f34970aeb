"""`fleetwave install`: CRDs and least-privilege RBAC into the management cluster."""

from __future__ import annotations

import time
from typing import Any

from fleetwave.api import crds, families, snapshot_admission
from fleetwave.kube import kinds, ops, sync_ops
from fleetwave.kube.client import Client
from fleetwave.kube.kinds import KindInfo
from fleetwave.mgmt import rbac

NAMESPACE = "fleetwave-system"
SERVICE_ACCOUNT = rbac.NAME
_CRD = ("apiextensions.k8s.io/v1", "CustomResourceDefinition")


def rbac_documents(namespace: str = NAMESPACE, watch: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """The controller's namespace, ServiceAccount and least-privilege roles (`mgmt.rbac`, ADR 0047);
    with `watch`, rights on namespaced resources only in those namespaces (ADR 0074)."""
    return rbac.documents(namespace, watch)


class ForeignCRD(Exception):
    """An upstream CRD exists and fleetwave did not install it: another controller owns that API."""


def install(
    client: Client,
    *,
    timeout: float = 60.0,
    namespace: str = NAMESPACE,
    upstream_apis: bool = False,
    watch: tuple[str, ...] = (),
    placement_kinds: tuple[KindInfo, ...] = (),
    flux_sources: bool = False,
) -> list[str]:
    """Apply every CRD and the RBAC, wait until the CRDs are Established, then apply the admission
    policies. Returns CRD names. With `upstream_apis`, also the CRDs of the upstream API families
    (ADR 0062), after checking that none of them belongs to another controller (nothing is applied
    if one does).

    Server-side apply replaces each role's whole rule list, so re-installing over an older release
    also takes away what it no longer grants. `watch`: the namespaces the controller will be run
    with (`--watch-namespace`); its namespaced rights are bound only there."""
    extra = crds.upstream_crds(families.UPSTREAM) if upstream_apis else []
    for crd in extra:
        _refuse_foreign(client, crd["metadata"]["name"])
    hidden = crds.UPSTREAM_ONLY if upstream_apis else frozenset()
    for kind in sorted(hidden):
        _refuse_hiding(client, kind)
    names = []
    for crd in [*crds.all_crds(unserved=hidden), *extra]:
        sync_ops.apply(client, crd)
        names.append(crd["metadata"]["name"])
    for doc in rbac_documents(namespace, watch):
        sync_ops.apply(client, doc)
    for doc in rbac.upstream_documents(namespace, families.UPSTREAM, watch) if upstream_apis else []:
        sync_ops.apply(client, doc)
    # Read rights on the kinds the controller is told to place (ADR 0091); an install without them
    # leaves an earlier grant in place (delete ClusterRole fleetwave-controller-placement-kinds).
    for doc in rbac.placement_kind_documents(namespace, placement_kinds, watch) if placement_kinds else []:
        sync_ops.apply(client, doc)
    for doc in rbac.flux_source_documents(namespace, watch) if flux_sources else []:  # ADR 0103
        sync_ops.apply(client, doc)
    _wait_established(client, names, timeout)
    # After the CRDs serve: the policy validates MemberClusters (a namespaced one may only name a
    # kubeconfig Secret in its own namespace, ADR 0046); the controller checks the same rule again.
    for doc in crds.admission_policies():
        sync_ops.apply(client, doc)
    # Snapshots are immutable and only the controller's account labels them (ADR 0112).
    for doc in snapshot_admission.policies(snapshot_admission.controller_user(namespace, SERVICE_ACCOUNT)):
        sync_ops.apply(client, doc)
    return names


def upstream_installed(client: Client) -> bool:
    """Whether the last install here was `install --upstream-apis`: the KubeFleet placement kinds are
    served in their upstream group and not in fleetwave.io (a later plain `install` serves them again).
    Asked through discovery, which needs no RBAC: the controller's own account can ask."""
    kind = "ClusterResourcePlacement"
    return kind in kinds.served_kinds(client, families.FLEET_PLACEMENT) and kind not in kinds.served_kinds(
        client, f"{kinds.GROUP}/{kinds.VERSION}"
    )


def _crd(client: Client, name: str) -> Any | None:
    try:
        return client.get(kinds.builtin_resource(*_CRD), name)
    except ops.ApiError as e:
        if ops.is_not_found(e):
            return None
        raise


def _refuse_foreign(client: Client, name: str) -> None:
    existing = _crd(client, name)
    if existing is None:
        return
    meta = existing.metadata
    labels = meta.labels or {}
    # Ours: installed by `fleetwave install`, or by fleetwave's Helm chart (Helm relabels managed-by).
    if crds.FLEETWAVE in (labels.get(crds.MANAGED_BY), labels.get("app.kubernetes.io/part-of")):
        return
    raise ForeignCRD(
        f"CRD {name} already exists and is owned by {owner_of(meta)}; fleetwave does not take over "
        "another controller's API (uninstall it first, or install fleetwave without --upstream-apis)"
    )


def _refuse_hiding(client: Client, kind: str) -> None:
    """A native kind about to stop being served must have no objects: they would be hidden."""
    info = kinds.native_info(kind)
    crd = _crd(client, f"{info.plural}.{kinds.GROUP}")
    if crd is None:
        return  # not installed: nothing to hide
    if not any(v.served for v in crd.spec.versions):
        return  # already hidden by an earlier `install --upstream-apis`
    resource = kinds.resource(kind)
    if info.namespaced:
        found = next(iter(client.list(resource, namespace="*", chunk_size=1)), None)
    else:
        found = next(iter(client.list(resource, chunk_size=1)), None)
    if found is not None:
        where = f"{found.metadata.namespace}/" if found.metadata.namespace else ""
        raise ForeignCRD(
            f"{kind} objects exist in fleetwave.io (e.g. {where}{found.metadata.name}); with "
            "--upstream-apis the KubeFleet kinds are served only in placement.kubernetes-fleet.io and "
            "these would be hidden: delete them or re-create them in the upstream group first"
        )


def owner_of(meta: Any) -> str:
    """Who installed an object, as well as its metadata says (labels, Helm's annotations, the first
    field manager)."""
    labels, annotations = meta.labels or {}, meta.annotations or {}
    release = annotations.get("meta.helm.sh/release-name")
    if release:
        return f"Helm release {annotations.get('meta.helm.sh/release-namespace', '')}/{release}".replace(
            " /", " "
        )
    for key in ("app.kubernetes.io/part-of", "app.kubernetes.io/name", crds.MANAGED_BY):
        if labels.get(key):
            return str(labels[key])
    managers = [m.manager for m in meta.managedFields or [] if m.manager]
    return f"field manager {managers[0]}" if managers else "another controller"


def _wait_established(client: Client, names: list[str], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    pending = set(names)
    resource = kinds.builtin_resource(*_CRD)
    while pending:
        for name in sorted(pending):
            crd = client.get(resource, name)
            conditions = crd.status.conditions if crd.status else None
            if any(c.type == "Established" and c.status == "True" for c in conditions or []):
                pending.discard(name)
        if pending and time.monotonic() > deadline:
            raise TimeoutError(f"CRDs not Established after {timeout:.0f}s: {', '.join(sorted(pending))}")
        if pending:
            time.sleep(0.2)
