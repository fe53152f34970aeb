"""Raw manifests on a member: server-side apply, prune, withdraw and drift detection by inventory.

Objects are applied with field manager "fleetwave", in dependency order, each labelled with the
inventory key so later prunes find them by label (no discovery scans: callers pass the kinds of the
last ApplyReport) and annotated with the inventory that deployed it. Per-object API failures are
reported; only an unreachable member raises (`MemberUnreachable`).

An `ApplyPolicy` says how to treat what is already there (ADR 0063): an object another inventory
deployed is taken over only by a lower tier (Sveltos' conflict rule; equal tiers: the first keeps
it); an object nobody of ours deployed is taken over as `take_over` says; without `force`, fields
another manager changed are not taken back (the object has drifted) and the object is not applied.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from collections.abc import Awaitable, Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Literal, TypeVar

from fleetwave.api import conditions
from fleetwave.delivery import content as ct
from fleetwave.delivery.known_versions import KnownVersions
from fleetwave.delivery.target import MemberTarget, Target
from fleetwave.kube import kinds as kd
from fleetwave.kube import ops
from fleetwave.kube.client import FIELD_MANAGER, AsyncClient

Action = Literal["created", "configured", "unchanged", "failed", "conflict", "skipped"]
OWNER_ANNOTATION = "fleetwave.io/deployed-by"
TIER_ANNOTATION = "fleetwave.io/tier"
DEFAULT_TIER = 100
Tier = tuple[int, int]  # (profile tier, policy tier): lower wins, compared in that order
TakeOver = Literal["Always", "IfNoDiff", "Never"]


@dataclass(frozen=True, slots=True)
class ApplyPolicy:
    """How an apply treats failures and what it finds already on the member (ADR 0063)."""

    stop_on_error: bool = False  # Sveltos continueOnError: false
    stop_on_conflict: bool = False  # Sveltos continueOnConflict: false
    take_over: TakeOver = "Always"  # objects that exist and no fleetwave inventory deployed
    force: bool = True  # False: an object with fields another manager changed is left alone


DEFAULT_POLICY = ApplyPolicy()


def with_tier(obj: Mapping[str, Any], tier: Tier) -> dict[str, Any]:
    """`obj` annotated with its tier (nothing when it is the default): who wins a conflict."""
    out = dict(obj)
    if tier == (DEFAULT_TIER, DEFAULT_TIER):
        return out
    meta = dict(out.get("metadata") or {})
    text = str(tier[0]) if tier[1] == DEFAULT_TIER else f"{tier[0]}/{tier[1]}"
    meta["annotations"] = {**(meta.get("annotations") or {}), TIER_ANNOTATION: text}
    out["metadata"] = meta
    return out


def tier_of(obj: Mapping[str, Any]) -> Tier:
    """The tier an object was deployed with; unreadable (someone edited it) counts as the default."""
    text = str(((obj.get("metadata") or {}).get("annotations") or {}).get(TIER_ANNOTATION) or "")
    first, _, second = text.partition("/")
    try:
        return (int(first or DEFAULT_TIER), int(second or DEFAULT_TIER))
    except ValueError:
        return (DEFAULT_TIER, DEFAULT_TIER)


def _stamped(obj: Mapping[str, Any], key: str, inventory: str) -> dict[str, Any]:
    out = ct.with_inventory(obj, key)
    meta = out["metadata"]
    meta["annotations"] = {**(meta.get("annotations") or {}), OWNER_ANNOTATION: inventory}
    return out


_DEFAULT_NAMESPACE = "default"
ObjectId = tuple[str, str, str | None, str]  # apiVersion, kind, namespace, name
_CRD_ESTABLISH_TIMEOUT = 60.0
# Re-reads when an object changed between our read and our apply (a controller's status write does
# that too); past them the object is reported failed and the next reconcile tries again.
_STALE_RETRIES = 4


@dataclass(frozen=True, slots=True)
class AppliedObject:
    ref: ct.ObjectRef
    hash: str
    action: Action
    error: str | None = None
    # The object as its apply returned it (None: a dry run, or not applied): a readiness judgement
    # made right after the delivery reads it here instead of asking the member again.
    live: Mapping[str, Any] | None = field(default=None, compare=False, repr=False)
    # A dry run's "configured": the paths applying would change (never a Secret's data values).
    changes: tuple[str, ...] = field(default=(), compare=False)

    @property
    def changed(self) -> bool:
        return self.action in ("created", "configured")


@dataclass(frozen=True, slots=True)
class ApplyReport:
    inventory: str
    dry_run: bool
    objects: tuple[AppliedObject, ...]
    content_hash: str

    @property
    def ok(self) -> bool:
        return all(o.error is None for o in self.objects)

    @property
    def changed(self) -> bool:
        return any(o.changed for o in self.objects)

    @property
    def errors(self) -> list[str]:
        return [f"{o.ref}: {o.error}" for o in self.objects if o.error is not None]

    @property
    def conflicts(self) -> list[str]:
        return [f"{o.ref}: {o.error}" for o in self.objects if o.action == "conflict"]

    @property
    def refs(self) -> set[ct.ObjectRef]:
        return {o.ref for o in self.objects}

    @property
    def kinds(self) -> set[kd.GVK]:
        """What a later `prune`/`withdraw` must search."""
        return {o.ref.gvk for o in self.objects}

    @property
    def live(self) -> dict[ObjectId, Mapping[str, Any]]:
        """The applied objects as their applies returned them, by (apiVersion, kind, namespace, name)."""
        return {
            (o.ref.api_version, o.ref.kind, o.ref.namespace, o.ref.name): o.live
            for o in self.objects
            if o.live is not None
        }


@dataclass(frozen=True, slots=True)
class Difference:
    """One field where the member's object differs from what fleetwave would apply (ReportDiff)."""

    path: str
    in_member: Any  # None: the member does not have it
    in_hub: Any  # None: applying would not set it


@dataclass(frozen=True, slots=True)
class ObjectDiff:
    ref: ct.ObjectRef
    missing: bool  # the object is not on the member at all
    differences: tuple[Difference, ...] = ()
    error: str | None = None


@dataclass(frozen=True, slots=True)
class Drift:
    ref: ct.ObjectRef
    reason: Literal["missing", "conflict", "modified"]
    message: str


def _placed(obj: Mapping[str, Any], info: kd.KindInfo) -> dict[str, Any]:
    """`obj` with its namespace defaulted (namespaced kinds) or dropped (cluster-scoped kinds)."""
    out = dict(obj)
    meta = dict(out.get("metadata") or {})
    if info.namespaced:
        meta["namespace"] = meta.get("namespace") or _DEFAULT_NAMESPACE
    else:
        meta.pop("namespace", None)
    out["metadata"] = meta
    return out


async def _live(client: AsyncClient, cls: type[Any], ref: ct.ObjectRef) -> dict[str, Any] | None:
    found = await ops.get(client, cls, ref.name, namespace=ref.namespace)
    return None if found is None else dict(found)


def _action(before: dict[str, Any] | None, after: dict[str, Any]) -> Action:
    # Another uid: deleted since the version applied over was known, and created by this apply
    # (the API server creates an object applied with a version when there is none).
    if before is None or _uid(before) not in (None, _uid(after)):
        return "created"
    # Content, not resourceVersion: controllers bump resourceVersion with status writes at any
    # time, and a dry run never bumps it at all.
    return "unchanged" if ct.comparable(before) == ct.comparable(after) else "configured"


def _uid(obj: Mapping[str, Any]) -> Any:
    return (obj.get("metadata") or {}).get("uid")


_UNREAD: Any = object()  # no read of the object was made ahead of its apply


async def _read_ahead(client: AsyncClient, resolver: kd.AsyncKinds, obj: Mapping[str, Any]) -> Any:
    """The live object (None when absent), read ahead of its turn; _UNREAD when its kind is not
    served yet or the read failed (its apply then reads it itself and reports what went wrong)."""
    info = await resolver.find(kd.GVK(str(obj["apiVersion"]), str(obj["kind"])))
    if info is None:
        return _UNREAD
    try:
        return await _live(client, kd.resource_class(info), ct.ref_of(_placed(obj, info)))
    except ops.StatusError:
        return _UNREAD


async def _known_or_read(
    client: AsyncClient, resolver: kd.AsyncKinds, obj: Mapping[str, Any], known: _Known | None
) -> Any:
    """The version this process's last apply of the object returned, else `_read_ahead`."""
    if known is not None:
        info = await resolver.find(kd.GVK(str(obj["apiVersion"]), str(obj["kind"])))
        kept = None if info is None else known[0].get(known[1], ct.ref_of(_placed(obj, info)))
        if kept is not None:
            return kept
    return await _read_ahead(client, resolver, obj)


async def _reads_ahead(
    client: AsyncClient,
    resolver: kd.AsyncKinds,
    desired: Sequence[Mapping[str, Any]],
    known: _Known | None = None,
) -> dict[int, Any]:
    """Every object read up front, together (reads touch nothing), by `id` of its desired form: a
    round trip per object less on the way to the last apply; no read at all of one whose version
    this process's last apply returned (`known`). An object that exists is applied over the
    version read (its resourceVersion is the apply's precondition, so one that changed since is
    read again). One that was absent is read again at its turn unless it is in the first wave: an
    earlier wave may have made it appear (a namespace's default ServiceAccount), and whoever owns
    it must be judged on what is there."""
    reads = await _bounded_gather(partial(_known_or_read, client, resolver, o, known) for o in desired)
    first = {id(o) for o in _waves(desired)[0]} if desired else set()
    return {
        id(o): read if read is not None or id(o) in first else _UNREAD
        for o, read in zip(desired, reads, strict=True)
    }


async def _apply_one(
    client: AsyncClient,
    resolver: kd.AsyncKinds,
    obj: Mapping[str, Any],
    dry_run: bool,
    policy: ApplyPolicy = DEFAULT_POLICY,
    read: Any = _UNREAD,
) -> AppliedObject:
    gvk = kd.GVK(str(obj["apiVersion"]), str(obj["kind"]))
    info = await resolver.find(gvk)
    if info is None:
        return AppliedObject(ct.ref_of(obj), ct.object_hash(obj), "failed", f"{gvk.kind} is not served")
    body = _placed(obj, info)
    ref, digest = ct.ref_of(body), ct.object_hash(body)
    cls = kd.resource_class(info)
    try:
        for attempt in range(_STALE_RETRIES + 1):
            # A read made ahead serves the first attempt: its resourceVersion is the apply's
            # precondition, so an object that changed since is refused and read again here.
            before = read if attempt == 0 and read is not _UNREAD else await _live(client, cls, ref)
            refused = _owned_elsewhere(before, body) if before is not None else ""
            if not refused and before is not None and not _ours(before) and policy.take_over != "Always":
                refused = await _not_taken_over(client, cls, before, body, policy.take_over)
            if refused:
                return AppliedObject(ref, digest, "conflict", refused)
            try:
                after = await ops.apply(
                    client,
                    _read_at(body, before),
                    resource=cls,
                    field_manager=FIELD_MANAGER,
                    force=policy.force,
                    dry_run=dry_run,
                )
                break
            except ops.StatusError as err:
                # Changed since it was read (another profile may have taken it over): judge again.
                if not ops.is_stale(err) or attempt == _STALE_RETRIES:
                    raise
    except ops.StatusError as err:
        if dry_run and ops.is_not_found(err) and gvk in resolver.from_content:
            # Its CRD is part of this same content and not installed yet: it would be created.
            return AppliedObject(ref, digest, "created")
        if not policy.force and ops.code_of(err) == ops.CONFLICT:
            message = (
                f"drifted, not applied: another manager changed fields fleetwave set ({ops.message_of(err)})"
            )
            return AppliedObject(ref, digest, "conflict", message)
        return AppliedObject(ref, digest, "failed", ops.message_of(err))
    live = None if dry_run else {"apiVersion": ref.api_version, "kind": ref.kind, **dict(after)}
    action = _action(before, dict(after))
    changes = changed_paths(ref.kind, before, dict(after)) if dry_run and action == "configured" else ()
    return AppliedObject(ref, digest, action, live=live, changes=changes)


MAX_CHANGED_PATHS = 20
_SECRET_DATA = ("/data", "/stringData")


def changed_paths(kind: str, before: Mapping[str, Any] | None, after: Mapping[str, Any]) -> tuple[str, ...]:
    """Where applying would change the object (at most MAX_CHANGED_PATHS paths). A Secret's data
    shows as `/data` only: which keys change already tells something about its content."""
    paths = ct.diff_paths(ct.comparable(before or {}), ct.comparable(after))
    if kind == "Secret":
        paths = [next((d for d in _SECRET_DATA if p == d or p.startswith(d + "/")), p) for p in paths]
    unique = list(dict.fromkeys(paths))
    more = len(unique) - MAX_CHANGED_PATHS
    return tuple(unique[:MAX_CHANGED_PATHS]) + ((f"... and {more} more",) if more > 0 else ())


def _read_at(body: Mapping[str, Any], live: Mapping[str, Any] | None) -> dict[str, Any]:
    """`body` applied only over the version of the object its ownership was judged on: the
    resourceVersion is a precondition of the apply, so a takeover between our read and our write
    (two profiles delivering one object) is refused by the API server instead of overwritten."""
    version = ((live or {}).get("metadata") or {}).get("resourceVersion")
    if not version:
        return dict(body)
    return {**body, "metadata": {**(body.get("metadata") or {}), "resourceVersion": version}}


def _ours(live: Mapping[str, Any]) -> bool:
    return bool(((live.get("metadata") or {}).get("labels") or {}).get(ct.INVENTORY_LABEL))


def _owner_of(obj: Mapping[str, Any]) -> str:
    return str(((obj.get("metadata") or {}).get("annotations") or {}).get(OWNER_ANNOTATION) or "")


def _owned_elsewhere(live: Mapping[str, Any], body: Mapping[str, Any]) -> str:
    """Why `body` must not replace `live`, which another owner deployed ("" when it may): only a
    lower tier takes an object over; with equal tiers the first to deploy it keeps it. The same owner
    through another inventory (one profile, two registrations of one cluster) is no conflict."""
    theirs = ((live.get("metadata") or {}).get("labels") or {}).get(ct.INVENTORY_LABEL)
    mine = ((body.get("metadata") or {}).get("labels") or {}).get(ct.INVENTORY_LABEL)
    if not theirs or theirs == mine or (_owner_of(live) and _owner_of(live) == _owner_of(body)):
        return ""
    their_tier, my_tier = tier_of(live), tier_of(body)
    if my_tier < their_tier:
        return ""
    owner = ((live.get("metadata") or {}).get("annotations") or {}).get(OWNER_ANNOTATION) or theirs
    return (
        f"conflict: already deployed by {owner} (tier {_tier_text(their_tier)}); tier "
        f"{_tier_text(my_tier)} does not take it over, only a lower tier does"
    )


def _tier_text(tier: Tier) -> str:
    return str(tier[0]) if tier[1] == DEFAULT_TIER else f"{tier[0]}, policy tier {tier[1]}"


def _without_own_metadata(obj: Mapping[str, Any]) -> dict[str, Any]:
    """`obj` comparable, without the label and annotations fleetwave itself adds."""
    out = ct.comparable(obj)
    meta = dict(out["metadata"])
    for part, keys in (
        ("labels", (ct.INVENTORY_LABEL,)),
        ("annotations", (OWNER_ANNOTATION, TIER_ANNOTATION)),
    ):
        rest = {k: v for k, v in (meta.get(part) or {}).items() if k not in keys}
        meta.pop(part, None)
        if rest:
            meta[part] = rest
    out["metadata"] = meta
    return out


async def _not_taken_over(
    client: AsyncClient, cls: type[Any], live: Mapping[str, Any], body: Mapping[str, Any], rule: TakeOver
) -> str:
    """Why an object that exists and that fleetwave did not deploy is left alone ("" to take it)."""
    if rule == "Never":
        return "exists and was not deployed by fleetwave: not taken over (whenToTakeOver: Never)"
    would = await ops.apply(client, body, resource=cls, field_manager=FIELD_MANAGER, force=True, dry_run=True)
    paths = ct.diff_paths(_without_own_metadata(live), _without_own_metadata(dict(would)))
    if not paths:
        return ""
    return (
        "exists and was not deployed by fleetwave: not taken over, it differs at "
        f"{', '.join(paths[:5])} (whenToTakeOver: IfNoDiff)"
    )


async def _await_established(client: AsyncClient, resolver: kd.AsyncKinds, crd: AppliedObject) -> None:
    """Custom resources of a just-created CRD are rejected until it is Established; on timeout the
    CRs that follow fail on their own and are reported."""
    info = await resolver.resolve(crd.ref.gvk)
    cls = kd.resource_class(info)
    # Our own loop, not lightkube's `wait`: that one crashes on a status whose conditions are still
    # null, which is exactly what a just-created CRD has for a moment.
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(_CRD_ESTABLISH_TIMEOUT):
            while True:
                if _established(dict(await client.get(cls, crd.ref.name))):
                    return
                await asyncio.sleep(0.1)


def _established(crd: Mapping[str, Any]) -> bool:
    return conditions.is_true(crd.get("status"), "Established")


async def apply(
    target: Target,
    objects: Sequence[Mapping[str, Any]],
    *,
    inventory: str,
    dry_run: bool = False,
    policy: ApplyPolicy = DEFAULT_POLICY,
    owner: str | None = None,
    known: KnownVersions | None = None,
) -> ApplyReport:
    """Server-side apply `objects` to the member; DryRun (`dry_run=True`) changes nothing but
    reports what would change. Objects failing on their own are reported; the rest still apply
    unless the policy stops at the first error or conflict (those after it are reported skipped).
    `owner` (default: the inventory) is who conflicts are judged against (ADR 0063, 0066).
    `known`: the versions this process's applies to members returned, used and kept up to date."""
    key = ct.inventory_key(inventory)
    desired = [_stamped(o, key, owner or inventory) for o in ct.sort_for_apply(objects)]
    results: list[AppliedObject] = []
    stopped = ""
    # A dry run returns no version of its own, and judges what is there.
    remembered = None
    if known is not None and isinstance(target, MemberTarget) and not dry_run:
        remembered = (known, target.pool_key())
    async with target.session() as client:
        resolver = kd.AsyncKinds(client, desired)
        if policy.stop_on_error or policy.stop_on_conflict:
            # Whatever follows a failure must stay untouched: one apply at a time.
            ahead = await _reads_ahead(client, resolver, desired, remembered)
            for obj in desired:
                if stopped:
                    results.append(AppliedObject(ct.ref_of(obj), ct.object_hash(obj), "skipped", stopped))
                    continue
                result = await _apply_in_turn(
                    client, resolver, obj, dry_run, policy, ahead[id(obj)], remembered
                )
                results.append(result)
                stopped = _stop(result, policy)
                if result.changed and result.ref.kind == "CustomResourceDefinition" and not dry_run:
                    await _await_established(client, resolver, result)
        else:
            # Nothing depends on another object of its own wave: a wave's objects go concurrently.
            ahead = await _reads_ahead(client, resolver, desired, remembered)
            for wave in _waves(desired):
                done = await _bounded_gather(
                    partial(_apply_in_turn, client, resolver, o, dry_run, policy, ahead[id(o)], remembered)
                    for o in wave
                )
                results += done
                for result in done:
                    if result.changed and result.ref.kind == "CustomResourceDefinition" and not dry_run:
                        await _await_established(client, resolver, result)
    if remembered is not None:
        _remember(remembered, [r for r in results if r.action == "skipped"])  # applied ones: in turn
    return ApplyReport(key, dry_run, tuple(results), ct.content_hash(desired))


async def _apply_in_turn(
    client: AsyncClient,
    resolver: kd.AsyncKinds,
    obj: Mapping[str, Any],
    dry_run: bool,
    policy: ApplyPolicy,
    read: Any,
    remembered: _Known | None,
) -> AppliedObject:
    """`_apply_one`, when versions are kept in its object's turn (`KnownVersions.turn`): over the
    version the apply before it returned, if it is kept (the read made ahead may predate that apply),
    and what it returned is kept at once for the next."""
    gvk = kd.GVK(str(obj["apiVersion"]), str(obj["kind"]))
    info = None if remembered is None else await resolver.find(gvk)
    if remembered is None or info is None:
        return await _apply_one(client, resolver, obj, dry_run, policy, read)
    versions, server = remembered
    ref = ct.ref_of(_placed(obj, info))
    async with versions.turn(server, ref):
        kept = versions.get(server, ref)
        result = await _apply_one(client, resolver, obj, dry_run, policy, read if kept is None else kept)
        _remember(remembered, [result])
    return result


# The versions kept, and the member API server and credentials they were applied with.
_Known = tuple[KnownVersions, Hashable]


def _remember(known: _Known, results: Iterable[AppliedObject]) -> None:
    """What each apply returned, for the next apply of the object; anything else is read again."""
    versions, server = known
    for result in results:
        if result.live is not None and result.action not in ("failed", "conflict", "skipped"):
            versions.keep(server, result.ref, result.live)
        else:
            versions.forget(server, result.ref)


APPLY_CONCURRENCY = 8
_T = TypeVar("_T")


def _waves(objects: Sequence[Mapping[str, Any]]) -> list[list[Mapping[str, Any]]]:
    """Consecutive objects of one apply wave, in order (`objects` are sorted for apply)."""
    out: list[list[Mapping[str, Any]]] = []
    last = -1
    for obj in objects:
        wave = ct.apply_wave(str(obj.get("kind", "")))
        if not out or wave != last:
            out.append([])
            last = wave
        out[-1].append(obj)
    return out


async def _bounded_gather(calls: Iterable[Callable[[], Awaitable[_T]]]) -> list[_T]:
    """The results in order, at most APPLY_CONCURRENCY requests in flight to one member. Each call
    is made only once it may run: a gather cancelled early (the controller stopping) leaves no
    coroutine behind that was created and never awaited."""
    gate = asyncio.Semaphore(APPLY_CONCURRENCY)

    async def one(call: Callable[[], Awaitable[_T]]) -> _T:
        async with gate:
            return await call()

    return list(await asyncio.gather(*(one(c) for c in calls)))


def _stop(result: AppliedObject, policy: ApplyPolicy) -> str:
    """Why nothing after `result` is applied ("" to go on)."""
    if result.action == "failed" and policy.stop_on_error:
        return f"not applied: {result.ref} failed before it (continueOnError is false)"
    if result.action == "conflict" and policy.stop_on_conflict:
        return f"not applied: {result.ref} is in conflict before it (continueOnConflict is false)"
    return ""


async def _labelled(client: AsyncClient, info: kd.KindInfo, key: str) -> list[ct.ObjectRef]:
    cls = kd.resource_class(info)
    namespace = ops.ALL_NAMESPACES if info.namespaced else None
    found: list[ct.ObjectRef] = []
    try:
        async for item in client.list(cls, namespace=namespace, labels={ct.INVENTORY_LABEL: key}):
            # List items carry no apiVersion/kind: name them by the kind we listed.
            found.append(ct.ref_of({**item, "apiVersion": info.gvk.api_version, "kind": info.gvk.kind}))
    except ops.StatusError as err:
        if not ops.is_not_found(err):  # the kind's CRD is gone, so are its objects
            raise
    return found


async def _delete(client: AsyncClient, info: kd.KindInfo, ref: ct.ObjectRef) -> bool:
    # A withdrawn Job or ReplicaSet takes its Pods with it, as with `kubectl delete`.
    return await ops.delete_if_exists(
        client, kd.resource_class(info), ref.name, namespace=ref.namespace, dependents=True
    )


def _removal_order(kinds: Iterable[kd.GVK]) -> list[kd.GVK]:
    # Reverse apply order: custom resources before their CRDs, namespaces last.
    return sorted(set(kinds), key=lambda g: (-ct.apply_wave(g.kind), g.kind, g.api_version))


async def prune(
    target: Target, *, inventory: str, kinds: Iterable[kd.GVK], keep: Iterable[ct.ObjectRef]
) -> list[ct.ObjectRef]:
    """Delete objects of `kinds` carrying the inventory label that are not in `keep`; returns them.
    `kinds` are those recorded by the previous ApplyReport (what may have been left behind)."""
    key = ct.inventory_key(inventory)
    kept = {r.identity for r in keep}
    deleted: list[ct.ObjectRef] = []
    async with target.session() as client:
        resolver = kd.AsyncKinds(client)
        infos = [i for i in [await resolver.find(g) for g in _removal_order(kinds)] if i is not None]
        # The lists are reads: all at once. Deletions stay in removal order.
        found = await _bounded_gather(partial(_labelled, client, info, key) for info in infos)
        for info, refs in zip(infos, found, strict=True):
            for ref in refs:
                if ref.identity not in kept and await _delete(client, info, ref):
                    deleted.append(ref)
    return deleted


_Key = TypeVar("_Key", bound=Hashable)
# A key of the caller's (a summary, a placement's inventory on one cluster) -> what this process last
# pruned it down to: the credentials' fingerprint, and the kinds searched and objects kept.
PruneMemo = dict[_Key, tuple[str, frozenset[object]]]


async def prune_unless_done(
    target: MemberTarget,
    memo: PruneMemo[_Key],
    key: _Key,
    *,
    inventory: str,
    kinds: Iterable[kd.GVK],
    keep: Iterable[ct.ObjectRef],
) -> None:
    """`prune`, unless this process pruned the same objects of the same kinds with the same
    credentials under `key` before: a list of every kind on the member, and nothing can have been
    left behind since (ADR 0068)."""
    searched, kept = set(kinds), set(keep)
    done = _pruned_state(target, searched, kept)
    if memo.get(key) == done:
        return
    memo.pop(key, None)
    await prune(target, inventory=inventory, kinds=searched, keep=kept)
    memo[key] = done


def nothing_left_behind(
    target: MemberTarget,
    memo: PruneMemo[_Key],
    key: _Key,
    *,
    kinds: Iterable[kd.GVK],
    keep: Iterable[ct.ObjectRef],
) -> None:
    """Remember `key` as pruned down to `keep` without searching: the caller knows nobody delivered
    anything under it before the apply that returned `keep` (ADR 0121)."""
    memo[key] = _pruned_state(target, set(kinds), set(keep))


def _pruned_state(
    target: MemberTarget, kinds: set[kd.GVK], keep: set[ct.ObjectRef]
) -> tuple[str, frozenset[object]]:
    """What a prune memo holds: the credentials' fingerprint, the kinds searched and objects kept."""
    return hashlib.sha256(target.kubeconfig).hexdigest(), frozenset([*kinds, *(r.identity for r in keep)])


async def leftovers(
    target: Target, *, inventory: str, kinds: Iterable[kd.GVK], keep: Iterable[ct.ObjectRef]
) -> list[ct.ObjectRef]:
    """What `prune` would delete, deleting nothing (a dry run's would-delete list)."""
    key, kept = ct.inventory_key(inventory), {r.identity for r in keep}
    async with target.session() as client:
        resolver = kd.AsyncKinds(client)
        infos = [i for i in [await resolver.find(g) for g in _removal_order(kinds)] if i is not None]
        found = await _bounded_gather(partial(_labelled, client, info, key) for info in infos)
    return [ref for refs in found for ref in refs if ref.identity not in kept]


async def withdraw(target: Target, *, inventory: str, kinds: Iterable[kd.GVK]) -> list[ct.ObjectRef]:
    """Delete everything of the inventory (Sveltos WithdrawPolicies); returns what was deleted."""
    return await prune(target, inventory=inventory, kinds=kinds, keep=())


async def _drift_of(client: AsyncClient, resolver: kd.AsyncKinds, obj: Mapping[str, Any]) -> Drift | None:
    gvk = kd.GVK(str(obj["apiVersion"]), str(obj["kind"]))
    info = await resolver.find(gvk)
    if info is None:  # its CRD was removed, and with it every object of the kind
        return Drift(ct.ref_of(obj), "missing", f"{gvk.kind} in {gvk.api_version} is no longer served")
    body = _placed(obj, info)
    ref, cls = ct.ref_of(body), kd.resource_class(info)
    try:
        # Without force, the server refuses to take back fields another manager now owns.
        pair = await _live_and_dry_run(client, cls, ref, body, force=False)
    except ops.StatusError as err:
        if ops.code_of(err) == ops.CONFLICT:
            return Drift(ref, "conflict", ops.message_of(err))
        raise
    if pair is None:
        return Drift(ref, "missing", f"{ref} no longer exists")
    live, result = pair
    paths = ct.diff_paths(ct.comparable(live), ct.comparable(result))
    if paths:
        return Drift(ref, "modified", f"re-applying would change {', '.join(paths)}")
    return None


async def detect_drift(
    target: Target, objects: Sequence[Mapping[str, Any]], *, inventory: str, owner: str | None = None
) -> list[Drift]:
    """Objects whose live state no longer matches what fleetwave applied (ContinuousWithDriftDetection):
    deleted, taken over by another field manager, or changed in a way re-applying would undo."""
    return await _each(target, objects, inventory, _drift_of, owner)


_Found = TypeVar("_Found")


async def _each(
    target: Target,
    objects: Sequence[Mapping[str, Any]],
    inventory: str,
    judge: Callable[[AsyncClient, kd.AsyncKinds, Mapping[str, Any]], Awaitable[_Found | None]],
    owner: str | None = None,
) -> list[_Found]:
    """`judge` on every object as fleetwave would apply it, read-only; what it found, in apply order."""
    key = ct.inventory_key(inventory)
    desired = [_stamped(o, key, owner or inventory) for o in ct.sort_for_apply(objects)]
    found: list[_Found] = []
    async with target.session() as client:
        resolver = kd.AsyncKinds(client, desired)
        for obj in desired:
            one = await judge(client, resolver, obj)
            if one is not None:
                found.append(one)
    return found


def _value_at(doc: Any, path: str) -> Any:
    for part in path.strip("/").split("/") if path.strip("/") else []:
        if isinstance(doc, Mapping):
            doc = doc.get(part)
        elif isinstance(doc, list) and part.isdigit() and int(part) < len(doc):
            doc = doc[int(part)]
        else:
            return None
    return doc


_CONSISTENT_READS = 3  # attempts at reading the live object and the dry run from one version


def _version(obj: Mapping[str, Any]) -> Any:
    return (obj.get("metadata") or {}).get("resourceVersion")


async def _live_and_dry_run(
    client: AsyncClient, cls: type[Any], ref: ct.ObjectRef, body: Mapping[str, Any], *, force: bool = True
) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """The live object and what an apply would make of it, read from the same version (None: there is
    no live object). Drift detection and ReportDiff both compare the two."""
    pair: tuple[dict[str, Any], dict[str, Any]] | None = None
    for _ in range(_CONSISTENT_READS):
        live = await _live(client, cls, ref)
        if live is None:
            return None
        would = await ops.apply(
            client, body, resource=cls, field_manager=FIELD_MANAGER, force=force, dry_run=True
        )
        pair = (live, dict(would))
        # A dry run keeps the resourceVersion it was computed from: equal means both reads saw the
        # same object. Otherwise someone (a controller's annotation, a status write) wrote in between,
        # and the diff would blame that write on us: read both again.
        if _version(pair[1]) == _version(live):
            break
    return pair


async def _diff_of(client: AsyncClient, resolver: kd.AsyncKinds, obj: Mapping[str, Any]) -> ObjectDiff:
    gvk = kd.GVK(str(obj["apiVersion"]), str(obj["kind"]))
    info = await resolver.find(gvk)
    if info is None:
        return ObjectDiff(ct.ref_of(obj), True, error=f"{gvk.kind} is not served")
    body = _placed(obj, info)
    ref, cls = ct.ref_of(body), kd.resource_class(info)
    try:
        pair = await _live_and_dry_run(client, cls, ref, body)
    except ops.StatusError as err:
        return ObjectDiff(ref, False, error=ops.message_of(err))
    if pair is None:
        return ObjectDiff(ref, True)
    left, right = _without_own_metadata(pair[0]), _without_own_metadata(pair[1])
    paths = ct.diff_paths(left, right)
    return ObjectDiff(
        ref, False, tuple(Difference(p, _value_at(left, p), _value_at(right, p)) for p in paths)
    )


async def report_diff(
    target: Target, objects: Sequence[Mapping[str, Any]], *, inventory: str
) -> list[ObjectDiff]:
    """How the member differs from `objects` (KubeFleet's ReportDiff), changing nothing: objects it
    lacks, and per object the fields a forced apply would change (fleetwave's own label and
    annotations aside). Objects that match are not listed."""
    return await _each(target, objects, inventory, _differing)


async def _differing(
    client: AsyncClient, resolver: kd.AsyncKinds, obj: Mapping[str, Any]
) -> ObjectDiff | None:
    found = await _diff_of(client, resolver, obj)
    return found if found.missing or found.differences or found.error else None
