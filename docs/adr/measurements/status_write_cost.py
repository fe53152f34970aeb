"""What one status write of a rollout object costs the management API server, by how it is written
and by what its CRD's schema asks of the server (ADR 0147): interleaved rounds against one real
API server, its CPU read from /proc just before and after each round's writes.

    PYTHONPATH=src .venv/bin/python docs/adr/measurements/status_write_cost.py OBJECTS.json CRD.yaml WORKERS WRITES ROUNDS

OBJECTS.json: a `kubectl get -o json` list of one kind; its largest item is the sample. Each write
moves the sample's status between two versions that differ as a widening does (a stage's started
list one longer, and the message). Variants (VARIANTS=a,b to pick some): `merge` (what fleetwave
sends: a JSON merge patch of the difference, guarded by resourceVersion), `ssa` (the whole status
server-side applied), and `merge-*` against a copy of the CRD in another group: without its CEL
rules, with status or spec left unchecked (`x-kubernetes-preserve-unknown-fields`), with both
(`minimal`), or with status or spec one value to the field manager (`x-kubernetes-map-type: atomic`).
"""
import asyncio, copy, datetime as dt, json, os, statistics, sys, tempfile, time
from pathlib import Path

import uvloop
import yaml
from lightkube.types import PatchType

from fleetwave.kube import client as kubeclient
from fleetwave.kube import internals
from fleetwave.kube.status import merge_patch, normalized
from fleetwave.local import fleet

SAMPLE, CRD, W, N, ROUNDS = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])


def cpu(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def sample():
    items = json.load(open(SAMPLE))["items"]
    obj = max(items, key=lambda o: len(json.dumps(o)))
    meta = obj["metadata"]
    obj["metadata"] = {k: meta[k] for k in ("name", "labels", "annotations") if k in meta}
    if meta.get("namespace"):
        obj["metadata"]["namespace"] = "default"
    return obj


def widened(status):
    """`status` as the next widening writes it: a started list one longer, a count and a message."""
    new = copy.deepcopy(status)
    new["message"] = f"{status.get('message', '')}."
    for stage in (new.get("rollout") or {}).get("stages") or []:
        if stage.get("started"):
            stage["started"] = [*stage["started"], f"extra-{len(stage['started'])}"]
            break
    return new


def without_cel(schema):
    if isinstance(schema, dict):
        return {k: without_cel(v) for k, v in schema.items() if k != "x-kubernetes-validations"}
    if isinstance(schema, list):
        return [without_cel(v) for v in schema]
    return schema


def variant(crd, group, schema_of):
    """`crd` served in `group`, its schema rewritten by `schema_of`."""
    made = copy.deepcopy(crd)
    made["metadata"]["name"] = f"{crd['spec']['names']['plural']}.{group}"
    made["spec"]["group"] = group
    for version in made["spec"]["versions"]:
        version["schema"]["openAPIV3Schema"] = schema_of(version["schema"]["openAPIV3Schema"])
    return made


def loose_status(schema):
    """The schema with `status` unchecked: any JSON kept as written."""
    props = dict(schema["properties"])
    props["status"] = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    return {**schema, "properties": props}


def loose_spec(schema):
    """The schema with `spec` unchecked: any JSON kept as written."""
    props = dict(schema["properties"])
    props["spec"] = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    return {**schema, "properties": props}


def atomic(part):
    """The schema with `part` (spec or status) one value to the field manager (ADR 0146)."""

    def made(schema):
        props = dict(schema["properties"])
        props[part] = {**props[part], "x-kubernetes-map-type": "atomic"}
        return {**schema, "properties": props}

    return made


def minimal(schema):
    loose = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    return {"type": "object", "properties": {"spec": loose, "status": loose}}


def crds():
    crd = yaml.safe_load(open(CRD))
    return {
        "merge": crd,
        "ssa": crd,
        "merge-nocel": variant(crd, "nocel.bench.io", without_cel),
        "merge-loosestatus": variant(crd, "loose.bench.io", loose_status),
        "merge-loosespec": variant(crd, "loosespec.bench.io", loose_spec),
        "merge-minimal": variant(crd, "minimal.bench.io", minimal),
        "merge-atomicstatus": variant(crd, "atomicstatus.bench.io", atomic("status")),
        "merge-atomicspec": variant(crd, "atomicspec.bench.io", atomic("spec")),
    }


async def install(client, crd):
    cls = internals.registered_class(
        "apiextensions.k8s.io", "v1", "CustomResourceDefinition", "customresourcedefinitions", namespaced=False
    )
    await client.create(cls(crd))
    for _ in range(100):
        got = await client.get(cls, crd["metadata"]["name"])
        if any(c["type"] == "Established" and c["status"] == "True" for c in (got.get("status") or {}).get("conditions") or []):
            return
        await asyncio.sleep(0.1)


def resource(crd):
    spec = crd["spec"]
    version = next(v["name"] for v in spec["versions"] if v.get("storage"))
    names = spec["names"]
    return (
        f"{spec['group']}/{version}",
        internals.registered_class(
            spec["group"], version, names["kind"], names["plural"], namespaced=spec["scope"] == "Namespaced"
        ),
    )


async def seed(client, cls, api_version, obj, name, how):
    body = {**copy.deepcopy(obj), "apiVersion": api_version}
    body["metadata"] = {**body["metadata"], "name": name}
    status = body.pop("status")
    ns = body["metadata"].get("namespace")
    await client.create(cls(body), namespace=ns)
    got = await client.patch(cls.Status, name, {"status": status}, patch_type=PatchType.MERGE, namespace=ns)
    SIZES[how] = len(json.dumps(got.to_dict() if hasattr(got, "to_dict") else dict(got)))
    return got["metadata"]["resourceVersion"]


SIZES = {}


async def round_(client, cls, api_version, obj, how, tag, api_pid):
    """Seeds W objects, then times N status writes on each (W at once); the API server's CPU over
    the writes alone."""
    a, b = normalized(obj["status"]), normalized(widened(obj["status"]))
    names = [f"{how}-{tag}-{w}-{obj['metadata']['name']}"[:63].rstrip("-.") for w in range(W)]
    versions = await asyncio.gather(*(seed(client, cls, api_version, obj, n, how) for n in names))

    ns = obj["metadata"].get("namespace")

    async def worker(name, version):
        for i in range(N):
            old, new = (a, b) if i % 2 == 0 else (b, a)
            if how == "ssa":
                body = {"apiVersion": api_version, "kind": obj["kind"], "metadata": {"name": name, "namespace": ns}, "status": new}
                got = await client.patch(
                    cls.Status, name, body, patch_type=PatchType.APPLY, field_manager="bench", force=True, namespace=ns
                )
            else:
                body = {"metadata": {"resourceVersion": version}, "status": merge_patch(old, new)}
                got = await client.patch(cls.Status, name, body, patch_type=PatchType.MERGE, namespace=ns)
            version = got["metadata"]["resourceVersion"]

    await asyncio.sleep(0.5)
    t0, c0 = time.monotonic(), cpu(api_pid)
    await asyncio.gather(*(worker(n, v) for n, v in zip(names, versions)))
    el, used = time.monotonic() - t0, cpu(api_pid) - c0
    await asyncio.gather(*(client.delete(cls, n, namespace=ns) for n in names))
    return el, used


async def main(state):
    api = next(p for p in state.processes if p.name == "management/apiserver")
    kc = str(Path(state.state_dir) / "management" / "kubeconfig")
    client = kubeclient.async_client(kubeclient.config_from_file(kc), target="management")
    obj = sample()
    variants = crds()
    for crd in {c["metadata"]["name"]: c for c in variants.values()}.values():
        await install(client, crd)
    only = [v for v in os.environ.get("VARIANTS", "").split(",") if v]
    kinds = {how: resource(crd) for how, crd in variants.items() if not only or how in only}
    print(f"sample {obj['metadata']['name']}: {len(json.dumps(obj))} bytes, status {len(json.dumps(obj['status']))}")
    res = {k: [] for k in kinds}
    for how, (api_version, cls) in kinds.items():
        await round_(client, cls, api_version, obj, how, "warm", api.pid)
    for r in range(ROUNDS):
        order = list(kinds) if r % 2 == 0 else list(reversed(kinds))
        for how in order:
            api_version, cls = kinds[how]
            res[how].append(await round_(client, cls, api_version, obj, how, f"r{r}", api.pid))
    n = W * N
    print("stored sizes:", SIZES)
    for how, rows in res.items():
        print(
            f"{how:>12} W={W}: {n / statistics.median(r[0] for r in rows):.0f} writes/s, "
            f"apiserver CPU/write {1000 * statistics.median(r[1] for r in rows) / n:.3f} ms "
            f"(rounds: {', '.join(f'{1000 * r[1] / n:.2f}' for r in rows)})"
        )
    await client.close()


with tempfile.TemporaryDirectory(prefix="fleetwave-status-cost-") as tmp:
    state = fleet.up(Path(tmp) / "fleet", members={}, now=dt.datetime.now(dt.UTC))
    try:
        uvloop.run(main(state))
    finally:
        fleet.down(Path(tmp) / "fleet")
