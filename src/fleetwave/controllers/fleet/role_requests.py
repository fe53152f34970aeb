"""RoleRequest reconcile (ADR 0111): a tenant admin's ServiceAccount, roles and bindings in each member
cluster the request selects, withdrawn from a cluster that stops matching and from all on deletion.

The grants are applied with fleetwave's own member credentials (the tenant cannot grant itself
anything); the tenant's profiles are then delivered acting as the ServiceAccount (`tenancy`), so each
member's API server enforces exactly these rules. Pull members are not granted yet: they are listed
as Failed with the reason.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from fleetwave.api.meta import LabelSelector
from fleetwave.api.tenancy import RoleRequest, RoleRequestSpec
from fleetwave.controllers.fleet import members, tenancy
from fleetwave.controllers.fleet.boundary import content_boundary
from fleetwave.controllers.shared.context import Context, as_dict
from fleetwave.delivery import content as ct
from fleetwave.delivery import manifests
from fleetwave.delivery.target import MemberTarget, MemberUnreachable
from fleetwave.kube import kinds, ops
from fleetwave.kube.status import StatusWrite, Versioned
from fleetwave.runtime.controller import Result

KIND = "RoleRequest"
FINALIZER = "rolerequestfinalizer.projectsveltos.io"  # upstream's name
RECHECK_SECONDS = 300.0  # grants are re-applied this often: a member's RBAC edited by hand comes back
RETRY_SECONDS = 30.0
CONCURRENT_MEMBERS = 8
_GRANTED_KINDS = (
    kinds.GVK("v1", "ServiceAccount"),
    *(kinds.GVK(tenancy.RBAC, k) for k in ("Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding")),
)


def inventory(request: str) -> str:
    return f"rolerequest/{request}"


async def reconcile(ctx: Context, key: str) -> Result:
    obj = ctx.cache.obj(KIND, None, key)
    if obj is None:
        return Result()
    raw = ctx.family.view(KIND, as_dict(obj))
    meta = raw["metadata"]
    if meta.get("deletionTimestamp"):
        return await _finalize(ctx, obj, raw)
    if FINALIZER not in (meta.get("finalizers") or []):
        await ops.merge_patch(
            ctx.client,
            ctx.resource(KIND),
            key,
            {"metadata": {"finalizers": [*(meta.get("finalizers") or []), FINALIZER]}},
        )
        return Result()  # its own event brings the next pass
    try:
        spec = RoleRequest.model_validate(raw).spec
    except ValidationError as e:
        return await _write(ctx, obj, raw, {"failureMessage": f"invalid RoleRequest: {e.errors()[0]['msg']}"})
    problem, objects = _grants(ctx, key, spec)
    if problem:
        return await _write(ctx, obj, raw, {"failureMessage": problem, "matchingClusters": None})
    return await _grant_everywhere(ctx, obj, raw, spec, objects)


def _grants(ctx: Context, request: str, spec: RoleRequestSpec) -> tuple[str, list[dict[str, Any]]]:
    """What to create in each member, or why the request cannot be acted on."""
    if spec.expiration_seconds is not None:
        return (
            "spec.expirationSeconds: fleetwave issues no token for a tenant admin (it acts as the "
            "ServiceAccount by impersonation); remove the field",
            [],
        )
    admin = tenancy.admin_of(
        {
            tenancy.SA_NAME_LABEL: spec.service_account_name,
            tenancy.SA_NAMESPACE_LABEL: spec.service_account_namespace,
        }
    )
    if not isinstance(admin, tenancy.TenantAdmin):
        return "spec.serviceAccountName/serviceAccountNamespace do not name a ServiceAccount", []
    roles: list[dict[str, Any]] = []
    boundary = content_boundary(ctx)
    for index, ref in enumerate(spec.role_refs or []):
        where = f"spec.roleRefs[{index}] ({ref.kind} {ref.namespace}/{ref.name})"
        refused = boundary.namespace_problem(ref.namespace)
        if refused or (ref.kind == "Secret" and (ref.namespace, ref.name) in boundary.kubeconfig_secrets):
            return f"{where}: {refused or 'a member kubeconfig is never content'}", []
        source = ctx.cache.get(ref.kind, ref.namespace, ref.name)
        if source is None:
            return f"{where} not found", []
        try:
            roles += ct.parse_policy_data(
                source.get("data") or {}, base64_encoded=ref.kind == "Secret", source=where
            )
        except ct.ContentError as e:
            return str(e), []
    problem = tenancy.roles_problem(roles)
    return problem, [] if problem else tenancy.member_objects(request, admin, roles)


def _matching(ctx: Context, selector: LabelSelector | None) -> dict[str, members.Member]:
    """The members the selector picks (an empty selector picks none, as Sveltos')."""
    if selector is None or not (selector.match_labels or selector.match_expressions):
        return {}
    found = members.registered(ctx.cache)
    return {m.key: m for m in found if selector.matches(dict(m.labels))}


async def _grant_everywhere(
    ctx: Context, obj: Any, raw: Mapping[str, Any], spec: RoleRequestSpec, objects: list[dict[str, Any]]
) -> Result:
    request = str(raw["metadata"]["name"])
    matching = _matching(ctx, spec.cluster_selector)
    previous = _provisioned(raw)
    grant_in, withdraw_from = tenancy.plan(set(matching), set(previous))
    digest = ct.content_hash(objects)
    gate = asyncio.Semaphore(CONCURRENT_MEMBERS)
    infos = await asyncio.gather(
        *(_grant_in(ctx, gate, request, matching[c], objects, digest) for c in grant_in),
        *(_withdraw_from(ctx, gate, request, c) for c in withdraw_from),
    )
    kept = [i for i in infos if i is not None]
    status = {
        "matchingClusters": [_ref(ctx, c) for c in grant_in] or None,
        "clusterInfo": kept or None,
        "failureMessage": None,
    }
    result = await _write(ctx, obj, raw, status)
    failed = any(i.get("status") != "Provisioned" for i in kept)
    return result if result.requeue else Result(requeue_after=RETRY_SECONDS if failed else RECHECK_SECONDS)


async def _grant_in(
    ctx: Context,
    gate: asyncio.Semaphore,
    request: str,
    member: members.Member,
    objects: list[dict[str, Any]],
    digest: str,
) -> dict[str, Any]:
    info = {"cluster": _ref(ctx, member.key), "hash": digest}
    if member.pull:
        return {**info, "status": "Failed", "failureMessage": "pull members are not granted RoleRequests yet"}
    target = members.target_for(ctx.cache, member.key)
    if target is None:
        return {
            **info,
            "status": "Failed",
            "failureMessage": f"cluster {member.key} has no usable kubeconfig",
        }
    async with gate:
        try:
            await _ensure_namespace(target, str(objects[0]["metadata"]["namespace"]))
            report = await manifests.apply(target, objects, inventory=inventory(request))
        except MemberUnreachable as e:
            return {**info, "status": "Failed", "failureMessage": str(e)[:512]}
    if not report.ok:
        return {**info, "status": "Failed", "failureMessage": "; ".join(report.errors)[:1024]}
    return {**info, "status": "Provisioned"}


async def _ensure_namespace(target: MemberTarget, namespace: str) -> None:
    """The ServiceAccount's namespace, created when missing and never deleted (the tenant's content
    may live there)."""
    async with target.session() as client:
        body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
        await ops.create_if_absent(client, body)


async def _withdraw_from(
    ctx: Context, gate: asyncio.Semaphore, request: str, cluster: str
) -> dict[str, Any] | None:
    """Remove the grant from a cluster; None once removed (or the cluster is gone: nothing to reach)."""
    target = members.target_for(ctx.cache, cluster)
    if target is None:
        return None
    async with gate:
        try:
            await manifests.prune(target, inventory=inventory(request), kinds=_GRANTED_KINDS, keep=())
        except MemberUnreachable as e:
            return {"cluster": _ref(ctx, cluster), "status": "Removing", "failureMessage": str(e)[:512]}
    return None


async def _finalize(ctx: Context, obj: Any, raw: Mapping[str, Any]) -> Result:
    meta = raw["metadata"]
    if FINALIZER not in (meta.get("finalizers") or []):
        return Result()
    gate = asyncio.Semaphore(CONCURRENT_MEMBERS)
    left = [
        i
        for i in await asyncio.gather(
            *(_withdraw_from(ctx, gate, meta["name"], c) for c in _provisioned(raw))
        )
        if i
    ]
    if left:
        await _write(ctx, obj, raw, {"clusterInfo": left})
        return Result(requeue_after=RETRY_SECONDS)
    finalizers = [f for f in meta.get("finalizers") or [] if f != FINALIZER]
    await ops.merge_patch(
        ctx.client, ctx.resource(KIND), meta["name"], {"metadata": {"finalizers": finalizers}}
    )
    ctx.forget_rollout(KIND, meta["name"])
    return Result()


def _provisioned(raw: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """The clusters the status says were granted in (or are being withdrawn from), by key."""
    out = {}
    for info in (raw.get("status") or {}).get("clusterInfo") or []:
        ref = (info.get("cluster") or {}) if isinstance(info, Mapping) else {}
        if ref.get("name"):
            out[members.member_key(str(ref.get("namespace") or "default"), str(ref["name"]))] = info
    return out


def references(raw: Mapping[str, Any], kind: str, namespace: str, name: str) -> bool:
    """Whether the RoleRequest `raw` reads the ConfigMap or Secret `namespace/name` (its watch)."""
    refs = ((raw.get("spec") or {}).get("roleRefs")) or []
    return any(
        isinstance(r, Mapping)
        and (r.get("kind"), r.get("namespace"), r.get("name")) == (kind, namespace, name)
        for r in refs
    )


def _ref(ctx: Context, cluster: str) -> dict[str, Any]:
    namespace, _, name = cluster.partition("/")
    served = ctx.family.served("MemberCluster")
    ref = {"apiVersion": served.api_version, "kind": served.kind, "name": name}
    return {**ref, "namespace": namespace} if served.namespaced else ref


async def _write(ctx: Context, obj: Any, raw: Mapping[str, Any], status: Mapping[str, Any]) -> Result:
    body = {**(raw.get("status") or {}), **status}
    written, _ = await ctx.write_status(KIND, Versioned.of(obj), body)
    return Result(requeue=written is StatusWrite.CONFLICT)
