"""Turn a pinned content snapshot into what one cluster gets: templates rendered with that cluster,
kustomizations built, patches applied (ADR 0089).

A snapshot pins everything a revision is made of (template text, kustomize archives, patches, the
templateResourceRefs that name one object). Per cluster, at delivery, this module adds what only the
cluster decides: `.Cluster` (its MemberCluster object), the templateResourceRefs whose namespace is
the cluster's or whose name is a template, and renders. Template text is Go's, rendered by the pinned
`fleetwave-render`; overlays and patches are the pinned `kustomize`'s (a chart's patches are applied
by helm's post-renderer when it is installed: each chart carries them). The result has the shape of a
plain snapshot (policies with objects, charts with values), so delivery continues as for any content.

Any failure is an `InstantiationError` naming the field and the cluster's problem, and nothing of
the cluster's content is applied (the summary reports it and retries with backoff).
"""

from __future__ import annotations

import asyncio
import copy
import hashlib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from fleetwave.api.sveltos import DriftExclusion
from fleetwave.controllers.fleet.boundary import Boundary
from fleetwave.controllers.sveltos import content, drift_exclusions, extra_metadata
from fleetwave.delivery import content as dc
from fleetwave.delivery.gotemplate import Renderer, RenderError
from fleetwave.delivery.kustomize import KustomizeError, Kustomizer

POLICY_INDEX = "fleetwave.io/policy-index"  # carried through kustomize while patching, then removed
_LOCATION = re.compile(r"template: .*?:(\d+(?::\d+)?):")


class InstantiationError(ValueError):
    """This cluster's content cannot be made; the message names the field, never a Secret's data."""


@dataclass(frozen=True, slots=True)
class Tools:
    renderer: Renderer = field(default_factory=Renderer)
    kustomizer: Kustomizer = field(default_factory=Kustomizer)


def inputs_fingerprint(cluster: Mapping[str, Any]) -> str:
    """What of `.Cluster` a rendering depends on and may change: name, namespace, labels, annotations
    and spec (not status, which the cluster probe rewrites)."""
    meta = cluster.get("metadata") or {}
    seen = {
        "name": meta.get("name"),
        "namespace": meta.get("namespace"),
        "labels": meta.get("labels") or {},
        "annotations": meta.get("annotations") or {},
        "spec": cluster.get("spec") or {},
    }
    return hashlib.sha256(dc.canonical_json(seen).encode()).hexdigest()[:32]


def needs_instantiation(body: Mapping[str, Any]) -> bool:
    return bool(
        body.get("patches")
        or any("objects" not in p for p in body.get("policies") or [])
        or any("valueLayers" in c for c in body.get("helmCharts") or [])
    )


@dataclass(slots=True)
class _Batch:
    """Templates rendered in one call of the renderer, each with a callback for its output."""

    items: list[tuple[str, str, bool]] = field(default_factory=list)  # (name, text, from a Secret)

    def add(self, name: str, text: str, secret: bool = False) -> int:
        self.items.append((name, text, secret))
        return len(self.items) - 1


async def instantiate(
    body: Mapping[str, Any],
    *,
    cluster: Mapping[str, Any],
    lookup: content.Lookup,
    boundary: Boundary,
    tools: Tools,
) -> dict[str, Any]:
    """`body` for the cluster whose MemberCluster object is `cluster` (unchanged if nothing is templated)."""
    if not needs_instantiation(body):
        return dict(body)
    cluster_view = content.clean_resource(cluster)
    data = {"Cluster": cluster_view}
    resources = dict(body.get("mgmtResources") or {})
    resources.update(await _per_cluster_resources(body, cluster_view, lookup, boundary, tools.renderer))
    policies = [dict(p) for p in body.get("policies") or []]
    charts = [dict(c) for c in body.get("helmCharts") or []]
    patches = list(body.get("patches") or [])
    batch, places = _templates_of(policies, charts, patches)
    outputs = await _render(tools.renderer, batch, data, resources)
    rendered = {place: outputs[k] for place, k in places.items()}
    finish = body.get("finish") or {}
    for i, policy in enumerate(policies):
        await _make_objects(policy, i, rendered, finish, tools)
    for i, chart in enumerate(charts):
        await _merge_values(chart, i, rendered)
    if patches:
        ready = [_patch_of(p, rendered.get(("patch", i, 0))) for i, p in enumerate(patches)]
        policies = await _patched(policies, ready, tools.kustomizer)
        # Charts are patched by helm's post-renderer when they are installed (ADR 0105): each one
        # carries the patches as rendered for this cluster.
        charts = [{**c, "patches": ready} for c in charts]
    out: dict[str, Any] = {
        k: v
        for k, v in body.items()
        if k not in ("mgmtResources", "templateResourceRefs", "patches", "finish")
    }
    out["policies"], out["helmCharts"] = policies, charts
    return out


# Where a template sits in the body: (what it is, the index of its policy, chart or patch, its index
# there), e.g. ("chart", 2, 0) for the first value layer of the third chart.
_Place = tuple[str, int, int]


def _templates_of(
    policies: Sequence[Mapping[str, Any]],
    charts: Sequence[Mapping[str, Any]],
    patches: Sequence[Mapping[str, Any]],
) -> tuple[_Batch, dict[_Place, int]]:
    """Every template of the body in one batch (rendered in one call), and where each one sits."""
    batch = _Batch()
    places: dict[_Place, int] = {}
    for i, policy in enumerate(policies):
        for j, item in enumerate(policy.get("templates") or []):
            places[("policy", i, j)] = batch.add(item["name"], item["text"], policy_secret(policy))
        for j, (key, value) in enumerate(sorted((policy.get("values") or {}).items())):
            places[("kvalue", i, j)] = batch.add(f"{policy['source']} values[{key}]", value)
    for i, chart in enumerate(charts):
        for j, layer in enumerate(chart.get("valueLayers") or []):
            if "template" in layer:
                places[("chart", i, j)] = batch.add(
                    layer["name"], layer["template"], bool(layer.get("secret"))
                )
    for i, patch in enumerate(patches):
        if "name" in patch:
            text = patch["template"] if "template" in patch else patch["patch"]
            places[("patch", i, 0)] = batch.add(patch["name"], text, bool(patch.get("secret")))
    return batch, places


async def _make_objects(
    policy: dict[str, Any],
    i: int,
    rendered: Mapping[_Place, str],
    finish: Mapping[str, Any],
    tools: Tools,
) -> None:
    """The objects of the `i`th policy, in place of its templates or its kustomization."""
    if "error" in policy:  # a Flux source's revision that cannot be delivered (ADR 0103)
        raise InstantiationError(str(policy["error"]))
    if "templates" in policy:
        objects = []
        for j, item in enumerate(policy["templates"]):
            text = rendered[("policy", i, j)]
            objects += await _parse(text, item["name"], redact=policy_secret(policy))
        policy["objects"] = _finished(objects, finish)
        del policy["templates"]
    elif "kustomize" in policy:
        values = {key: rendered[("kvalue", i, j)] for j, key in enumerate(sorted(policy.get("values") or {}))}
        policy["objects"] = _finished(await _kustomize(policy, values, tools), finish)
        del policy["kustomize"]
        policy["feature"] = "Kustomize"
        policy.pop("values", None)


async def _merge_values(chart: dict[str, Any], i: int, rendered: Mapping[_Place, str]) -> None:
    """The values of the `i`th chart, in place of its value layers: merged in order, each templated
    one as rendered."""
    if "valueLayers" not in chart:
        return
    merged: dict[str, Any] = {}
    for j, layer in enumerate(chart["valueLayers"]):
        if "template" in layer:
            text = rendered[("chart", i, j)]
            layer_values = await _values(text, layer["name"], redact=bool(layer.get("secret")))
        else:
            layer_values = layer["values"]
        merged = content.deep_merge(merged, layer_values)
    chart["values"] = merged
    del chart["valueLayers"]


def policy_secret(policy: Mapping[str, Any]) -> bool:
    return str(policy.get("source") or "").startswith("Secret/")


async def _per_cluster_resources(
    body: Mapping[str, Any],
    cluster: Mapping[str, Any],
    lookup: content.Lookup,
    boundary: Boundary,
    renderer: Renderer,
) -> dict[str, Any]:
    """templateResourceRefs read for this cluster: an empty namespace is the cluster's, names may be
    templates of `.Cluster` (Sveltos' rule), and the content boundary holds as for any source."""
    refs = list(body.get("templateResourceRefs") or [])
    if not refs:
        return {}
    meta = cluster.get("metadata") or {}
    batch = _Batch()
    for ref in refs:
        batch.add(f"{ref['path']}.resource.namespace", ref["namespace"] or str(meta.get("namespace") or ""))
        batch.add(f"{ref['path']}.resource.name", ref["name"])
    names = await _render(renderer, batch, {"Cluster": cluster}, {})
    found: dict[str, Any] = {}
    for k, ref in enumerate(refs):
        namespace, name = names[2 * k].strip(), names[2 * k + 1].strip()
        try:
            obj = content.read_source(
                lookup,
                boundary,
                ref["kind"],
                namespace,
                name,
                optional=bool(ref["optional"]),
                path=ref["path"],
            )
        except content.ContentError as e:
            raise InstantiationError(str(e)) from None
        if obj is not None:
            found[ref["identifier"]] = content.clean_resource(obj)
    return found


async def _render(
    renderer: Renderer, batch: _Batch, data: Mapping[str, Any], resources: Mapping[str, Any]
) -> dict[int, str]:
    try:
        results = await renderer.render([(n, t) for n, t, _ in batch.items], data=data, resources=resources)
    except RenderError as e:
        raise InstantiationError(str(e)) from None
    outputs: dict[int, str] = {}
    for k, ((name, _, secret), result) in enumerate(zip(batch.items, results, strict=True)):
        if result.output is None:
            raise InstantiationError(f"{name}: {_error_text(name, result.error, secret)}")
        outputs[k] = result.output
    return outputs


def _error_text(name: str, error: str, secret: bool) -> str:
    """Go's message without the template's name it repeats, or for a template read from a Secret only
    where it failed (Go quotes values in its messages)."""
    where = _LOCATION.search(error)
    if secret:
        return f"the template fails at line {where.group(1)}" if where else "the template fails"
    short = error.replace(f'executing "{name}" ', "")
    if short.startswith(f"template: {name}:"):
        short = "line " + short.removeprefix(f"template: {name}:")
    return short[:500]


async def _parse(text: str, name: str, *, redact: bool) -> list[dict[str, Any]]:
    """A rendered template's or kustomize's output as objects; a large one is parsed in a worker
    thread, never on the event loop (ADR 0099)."""

    def parse() -> list[dict[str, Any]]:
        return dc.parse_policy_data({"rendered": text}, base64_encoded=False, source=name, redact=redact)

    try:
        return await _off_the_loop(text, parse)
    except dc.ContentError as e:
        raise InstantiationError(f"rendered template: {e}") from None


async def _values(text: str, name: str, *, redact: bool) -> dict[str, Any]:
    def parse() -> dict[str, Any]:
        return dc.load_yaml_map(text, f"{name} (rendered)", redact=redact)

    try:
        return await _off_the_loop(text, parse)
    except dc.ContentError as e:
        raise InstantiationError(str(e)) from None


T = TypeVar("T")


async def _off_the_loop(text: str, parse: Callable[[], T]) -> T:
    """`parse()` here for a small text, in a worker thread for a large one."""
    if len(text) < content.PARSE_AHEAD_BYTES:
        return parse()
    return await asyncio.to_thread(parse)


def _finished(objects: list[dict[str, Any]], finish: Mapping[str, Any]) -> list[dict[str, Any]]:
    """extraLabels/extraAnnotations and driftExclusions, as static content got them when resolved."""
    stamped = extra_metadata.stamp(
        objects, dict(finish.get("extraLabels") or {}), dict(finish.get("extraAnnotations") or {})
    )
    excluded = [DriftExclusion.model_validate(e) for e in finish.get("driftExclusions") or []]
    return drift_exclusions.apply(stamped, excluded)


async def _kustomize(
    policy: Mapping[str, Any], values: Mapping[str, str], tools: Tools
) -> list[dict[str, Any]]:
    spec = policy["kustomize"]
    where = str(policy["source"])
    try:
        archive = dc.archive_bytes(spec["archive"], where)
        built = await tools.kustomizer.build(
            archive,
            path=spec.get("path"),
            components=list(spec.get("components") or []),
            target_namespace=spec.get("targetNamespace") or None,
        )
    except (KustomizeError, dc.ContentError) as e:
        raise InstantiationError(f"kustomizationRef {where}: {e}") from None
    if values:  # Sveltos: the output is a template of the substitute values
        batch = _Batch()
        batch.add(f"kustomizationRef {where} output", built, policy_secret(policy))
        rendered = await _render(tools.renderer, batch, dict(values), {})
        built = rendered[0]
    return await _parse(built, f"kustomizationRef {where}", redact=policy_secret(policy))


def _patch_of(entry: Mapping[str, Any], rendered: str | None) -> dict[str, Any]:
    if "template" in entry:  # a whole patchesFrom entry was a template: parse it once rendered
        assert rendered is not None
        try:
            return content.parse_patch(rendered, str(entry["name"]), redact=bool(entry.get("secret")))
        except content.ContentError as e:
            raise InstantiationError(str(e)) from None
    out = {k: v for k, v in entry.items() if k in ("patch", "target")}
    if rendered is not None:
        out["patch"] = rendered
    return out


async def _patched(
    policies: list[dict[str, Any]], patches: Sequence[Mapping[str, Any]], kustomizer: Kustomizer
) -> list[dict[str, Any]]:
    """Every delivered object of every policy patched in one kustomize run (a patch may target objects
    of several policies); each object goes back to its policy by a marker annotation."""
    marked = []
    for i, policy in enumerate(policies):
        if policy.get("deploymentType") == content.LOCAL:
            continue
        for obj in policy.get("objects") or []:
            copied = copy.deepcopy(obj)
            copied.setdefault("metadata", {}).setdefault("annotations", {})[POLICY_INDEX] = str(i)
            marked.append(copied)
    if not marked:
        return policies
    try:
        text = await kustomizer.patch(marked, patches)
    except KustomizeError as e:
        raise InstantiationError(f"patches: {e}") from None
    regrouped: dict[int, list[dict[str, Any]]] = {}
    for obj in await _parse(text, "patches", redact=True):
        annotations = (obj.get("metadata") or {}).get("annotations") or {}
        index = int(annotations.pop(POLICY_INDEX, -1))
        if not annotations:
            obj["metadata"].pop("annotations", None)
        regrouped.setdefault(index, []).append(obj)
    return [
        p if p.get("deploymentType") == content.LOCAL else {**p, "objects": regrouped.get(i, [])}
        for i, p in enumerate(policies)
    ]
