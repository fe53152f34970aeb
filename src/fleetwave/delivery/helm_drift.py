"""Drift of a helm release's objects on a member, restored without a new revision (ADR 0114).

What a release should look like is the manifest of its deployed revision, as helm recorded it in
its storage (the release Secrets of helm's default driver, the one fleetwave's helm runs with): the
chart rendered with its values and post-rendered with the profile's patches, hooks excluded (they
are one-shot, not kept). Each object of it is compared with the live one by a server-side dry-run
apply; only an object the apply would change (or one that was deleted) is applied for real, with
field manager "helm" and force: the fields become the release's again, and nothing else is touched.
No helm process runs, so no revision is recorded and no hook fires.

Bounded: the release record is at most what a Secret holds (1 MiB), decompressed to at most
MAX_RELEASE_BYTES and parsed with the YAML budget; at most MAX_OBJECTS objects are compared.
"""

from __future__ import annotations

import base64
import binascii
import json
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from fleetwave.api import yamlsafe
from fleetwave.delivery import content as ct
from fleetwave.delivery.target import MemberTarget
from fleetwave.kube import kinds as kd
from fleetwave.kube import ops
from fleetwave.kube.client import AsyncClient

# The manager helm itself applies with server-side (helm 4): an upgrade that drops a field from the
# chart then drops it from the object too, which a field co-owned by another manager would survive.
HELM_FIELD_MANAGER = "helm"
MAX_RELEASE_BYTES = 8 * 1024 * 1024
MAX_OBJECTS = 500
_GZIP = b"\x1f\x8b"
_SECRET = kd.builtin_resource("v1", "Secret")
_CONSISTENT_READS = 3

ObjectId = tuple[str, str, str | None, str]
# What may not be compared or restored: the profile's driftExclusions, applied to placed objects.
Trim = Callable[[list[dict[str, Any]]], list[dict[str, Any]]]


class ReleaseRecordError(ValueError):
    """A release record that cannot be read (too large, not helm's format)."""


@dataclass(frozen=True, slots=True)
class ReleaseDrift:
    """What one pass found of a release: its objects (watched), and those restored or not restorable."""

    objects: tuple[ObjectId, ...] = ()
    restored: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()
    revision: int | None = None


def decode_release(data: str) -> dict[str, Any]:
    """helm's release record from a release Secret's `data.release` (base64 of helm's own base64 of
    gzipped JSON); `ReleaseRecordError` when it is not that, or decompresses past the bound."""
    try:
        raw = base64.b64decode(base64.b64decode(data, validate=True), validate=True)
    except (binascii.Error, ValueError) as e:
        raise ReleaseRecordError(f"not base64: {e}") from None
    if raw[:2] == _GZIP:
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            raw = inflater.decompress(raw, MAX_RELEASE_BYTES)
        except zlib.error as e:
            raise ReleaseRecordError(f"not gzip: {e}") from None
        if inflater.unconsumed_tail:
            raise ReleaseRecordError(f"larger than {MAX_RELEASE_BYTES} bytes decompressed")
    try:
        record = json.loads(raw)
    except ValueError as e:
        raise ReleaseRecordError(f"not JSON: {e}") from None
    if not isinstance(record, dict):
        raise ReleaseRecordError("not a release record")
    return record


def manifest_objects(manifest: str, what: str) -> list[dict[str, Any]]:
    """The objects of a rendered manifest (empty documents dropped), at most MAX_OBJECTS."""
    try:
        docs = yamlsafe.load_all(manifest, what=what)
    except yamlsafe.YamlError as e:
        raise ReleaseRecordError(str(e)) from None
    objects = [d for d in docs if isinstance(d, dict) and d.get("kind") and d.get("metadata")]
    if len(objects) > MAX_OBJECTS:
        raise ReleaseRecordError(f"{len(objects)} objects, more than the {MAX_OBJECTS} compared")
    return objects


def placed(obj: Mapping[str, Any], info: kd.KindInfo, release_namespace: str) -> dict[str, Any]:
    """`obj` where helm put it: namespaced objects without a namespace in the release's namespace."""
    out = dict(obj)
    meta = dict(out.get("metadata") or {})
    if info.namespaced:
        meta["namespace"] = meta.get("namespace") or release_namespace
    else:
        meta.pop("namespace", None)
    out["metadata"] = meta
    return out


def _id(obj: Mapping[str, Any]) -> ObjectId:
    ref = ct.ref_of(obj)
    return (ref.api_version, ref.kind, ref.namespace, ref.name)


def _version(secret: Any) -> int:
    text = str((secret.metadata.labels or {}).get("version", "")) if secret.metadata else ""
    return int(text) if text.isdigit() else -1


async def deployed_manifest(client: AsyncClient, release: str, namespace: str) -> tuple[int, str] | None:
    """(revision, manifest) of the release's deployed revision; None when no revision is deployed
    (not installed, or an install or upgrade in progress: nothing is restored under helm's feet)."""
    deployed = client.list(
        _SECRET, namespace=namespace, labels={"owner": "helm", "name": release, "status": "deployed"}
    )
    found = [s async for s in deployed]
    latest = max(found, key=_version, default=None)
    if latest is None:
        return None
    record = decode_release(str((latest.data or {}).get("release") or ""))
    return _version(latest), str(record.get("manifest") or "")


async def restore(target: MemberTarget, release: str, namespace: str, trim: Trim) -> ReleaseDrift:
    """Compare the deployed revision's objects (less what `trim` removes) with the member's, and
    apply those that drifted. Per-object API failures are reported; an unreachable member raises."""
    where = f"helm release {namespace}/{release}"
    async with target.session() as client:
        try:
            deployed = await deployed_manifest(client, release, namespace)
            if deployed is None:
                return ReleaseDrift()
            revision, manifest = deployed
            objects = manifest_objects(manifest, where)
        except ReleaseRecordError as e:
            return ReleaseDrift(errors=(f"{where}: its record cannot be read: {e}",))
        resolver = kd.AsyncKinds(client)
        ready: list[dict[str, Any]] = []
        errors: list[str] = []
        for obj in objects:
            info = await resolver.find(kd.GVK(str(obj.get("apiVersion")), str(obj["kind"])))
            if info is None:
                errors.append(f"{where}: {obj['kind']} in {obj.get('apiVersion')} is no longer served")
            else:
                ready.append(placed(obj, info, namespace))
        restored = []
        for body in trim(ready):
            done, failed = await _restore_one(client, resolver, body)
            restored += [done] if done else []
            errors += [f"{where}: {failed}"] if failed else []
    return ReleaseDrift(tuple(_id(o) for o in ready), tuple(restored), tuple(errors), revision)


async def _restore_one(
    client: AsyncClient, resolver: kd.AsyncKinds, body: Mapping[str, Any]
) -> tuple[str, str]:
    """(what was restored, why it could not be): both "" when the object is as the release has it."""
    info = await resolver.find(kd.GVK(str(body["apiVersion"]), str(body["kind"])))
    assert info is not None  # resolved by the caller
    cls, ref = kd.resource_class(info), ct.ref_of(body)
    try:
        paths = await _drifted_paths(client, cls, ref, body)
        if not paths:
            return "", ""
        await ops.apply(client, body, resource=cls, field_manager=HELM_FIELD_MANAGER, force=True)
    except ops.StatusError as e:
        return "", f"{ref} could not be restored: {ops.message_of(e)}"
    return f"{ref}: restored {', '.join(paths)}", ""


async def _drifted_paths(
    client: AsyncClient, cls: type[Any], ref: ct.ObjectRef, body: Mapping[str, Any]
) -> list[str]:
    """Where applying `body` would change the live object (["/"]: it is gone); read from one
    version, so a concurrent write (a status update) is not taken for drift."""
    paths: list[str] = []
    for _ in range(_CONSISTENT_READS):
        live = await ops.get(client, cls, ref.name, namespace=ref.namespace)
        if live is None:
            return ["/"]
        would = await ops.apply(
            client, body, resource=cls, field_manager=HELM_FIELD_MANAGER, force=True, dry_run=True
        )
        live_d, would_d = dict(live), dict(would)
        paths = ct.diff_paths(ct.comparable(live_d), ct.comparable(would_d))
        if _rv(live_d) == _rv(would_d):
            break
    return paths


def _rv(obj: Mapping[str, Any]) -> Any:
    return (obj.get("metadata") or {}).get("resourceVersion")
