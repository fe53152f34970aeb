"""The floor of a promotion's shape, written as the shape writes it (issue 47).

Per cluster, a promotion makes two management writes around its member apply: its ClusterSummary
applied (server-side), then the summary's status merge-patched once the content is deployed. This
floor makes exactly those two writes with the controller's own bodies (`summary_writes.Shared`, the
status a delivery writes) to a copy of the ClusterSummary CRD under a group no controller watches,
so the API server does for them what it does for real summaries: schema coercion, managedFields,
the status subresource, owner references the garbage collector follows, watch events. No
controller's work is in it: it is what no promotion can beat on this machine.

The ConfigMap floor (`bench_scale._with_records`) writes two small built-in objects instead; it is
kept beside this one, so the two can be read side by side."""

from __future__ import annotations

import asyncio
import copy
import datetime as dt
import hashlib
import time
from typing import Any

from lightkube import AsyncClient, codecs
from lightkube.resources.apiextensions_v1 import CustomResourceDefinition
from lightkube.types import PatchType

from fleetwave.api import crds
from fleetwave.api.models import ClusterProfile
from fleetwave.api.sveltos import ClusterSummary
from fleetwave.controllers.sveltos import summary_status as ss
from fleetwave.controllers.sveltos import summary_writes
from fleetwave.kube import kinds

Obj = dict[str, Any]
GROUP = "floor.bench.fleetwave.io"
API = f"{GROUP}/{kinds.VERSION}"
PLURAL = "clustersummaries"
# The benchmarks' promotions name their stages after the env labels they select, `prod` in full.
STAGE_OF_ENV = {"dev": "dev", "staging": "staging", "prod": "production"}
ESTABLISHED_WAIT = 60.0


def floor_crd() -> Obj:
    """fleetwave's ClusterSummary CRD, schema and status subresource as installed, under GROUP."""
    crd = copy.deepcopy(crds.crd_for(ClusterSummary))
    crd["metadata"] = {"name": f"{PLURAL}.{GROUP}"}
    crd["spec"]["group"] = GROUP
    crd["spec"]["names"].pop("shortNames", None)
    crd["spec"]["names"]["categories"] = []
    return crd


def resource() -> Any:
    return kinds.served_resource(API, "ClusterSummary", PLURAL, True)


async def install(client: AsyncClient) -> None:
    """Apply the floor's CRD and wait until the API server serves it."""
    crd = floor_crd()
    await client.apply(codecs.from_dict(crd), force=True)
    deadline = time.monotonic() + ESTABLISHED_WAIT
    while time.monotonic() < deadline:
        stored = await client.get(CustomResourceDefinition, crd["metadata"]["name"])
        conditions = stored.status.conditions if stored.status else None
        if any(c.type == "Established" and c.status == "True" for c in conditions or []):
            return
        await asyncio.sleep(0.1)
    raise RuntimeError(f"CRD {crd['metadata']['name']} not Established within {ESTABLISHED_WAIT:.0f} s")


def content_hash(trial: int) -> str:
    return hashlib.sha256(f"floor-{trial}".encode()).hexdigest()


async def shared_of(client: AsyncClient, profile_name: str, trial: int) -> summary_writes.Shared:
    """What every floor summary of one stage carries: the stage profile's as the controller builds
    it, owned by that profile, naming the trial's content."""
    stored = (await client.get(kinds.resource("ClusterProfile"), profile_name)).to_dict()
    owner = {
        "apiVersion": stored["apiVersion"],
        "kind": "ClusterProfile",
        "name": profile_name,
        "uid": stored["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    return summary_writes.Shared.build(
        profile=ClusterProfile.model_validate(stored),
        api_version=API,
        owner_reference=owner,
        snapshot=f"floor-content-{trial}",
        content_hash=content_hash(trial),
    )


def delivered_status(trial: int) -> Obj:
    """The status a delivery writes once one ConfigMap is deployed and healthy."""
    wanted = content_hash(trial)
    feature = ss.Feature(ss.FEATURE_RESOURCES, "Provisioned", wanted, deployed=("ConfigMap.v1.",))
    outcome = ss.Outcome(content_hash=wanted, features=(feature,), healthy=True)
    body = ss.status_body(outcome, generation=1, now=dt.datetime.now(dt.UTC), previous={})
    return {k: v for k, v in body.items() if v is not None}


async def write_summary(management: AsyncClient, shared: summary_writes.Shared, cluster: str) -> str:
    """The cluster's summary applied as the controller applies it; the version written."""
    written = await management.apply(resource()(shared.body(cluster)), force=True)
    return str(written.metadata.resourceVersion)


async def write_status(
    management: AsyncClient, shared: summary_writes.Shared, cluster: str, version: str, trial: int
) -> None:
    """The status a delivery writes, as a merge patch on the version it read."""
    meta = shared.body(cluster)["metadata"]
    patch = {"metadata": {"resourceVersion": version}, "status": delivered_status(trial)}
    await management.patch(
        resource().Status, meta["name"], patch, namespace=meta["namespace"], patch_type=PatchType.MERGE
    )


async def deliver(
    clients: tuple[AsyncClient, AsyncClient],
    shared: summary_writes.Shared,
    cluster: str,
    doc: Obj,
    trial: int,
) -> None:
    """One cluster as the shape does it: summary applied -> member apply -> summary status."""
    management, member = clients
    version = await write_summary(management, shared, cluster)
    await member.apply(codecs.from_dict(doc), force=True)
    await write_status(management, shared, cluster, version, trial)


async def run(
    management: AsyncClient,
    members: list[AsyncClient],
    stages: dict[str, list[tuple[str, int]]],
    doc: Obj,
    trial: int,
) -> float:
    """Seconds for the floor over `stages` (profile name -> (cluster key, member index) of each
    cluster), each stage's clusters all at once, stage after stage. The profiles are read before
    the clock starts: a promotion's controller holds them in its cache."""
    shared = {profile: await shared_of(management, profile, trial) for profile in stages}
    t0 = time.monotonic()
    for profile, clusters in stages.items():
        await asyncio.gather(
            *(deliver((management, members[i]), shared[profile], key, doc, trial) for key, i in clusters)
        )
    return time.monotonic() - t0
