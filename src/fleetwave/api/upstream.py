"""Upstream apiVersions and docs-only spellings, rewritten into the canonical native form.

Works on plain dicts *before* model validation, so the models only know the canonical form and
`to_manifest` always emits it. What is canonical and why: docs/adr/0011-upstream-and-doc-forms.md.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from fleetwave.api.meta import API_VERSION

SVELTOS_CONFIG_KINDS = ("ClusterProfile", "ClusterPromotion", "ClusterSummary", "ClusterReport", "Profile")
# The kinds of lib.projectsveltos.io served under their own names (SveltosCluster is MemberCluster).
SVELTOS_LIB_KINDS = ("ClusterSet", "Set")
# The kinds of placement.kubernetes-fleet.io, in the order CRDs and informers are made.
KUBEFLEET_PLACEMENT_KINDS = (
    "ClusterResourcePlacement",
    "ResourcePlacement",
    "ClusterResourceSnapshot",
    "ResourceSnapshot",
    "ClusterStagedUpdateStrategy",
    "StagedUpdateStrategy",
    "ClusterStagedUpdateRun",
    "StagedUpdateRun",
    "ClusterApprovalRequest",
    "ApprovalRequest",
    "ClusterResourceOverride",
    "ResourceOverride",
    "ClusterResourceOverrideSnapshot",
    "ResourceOverrideSnapshot",
    "ClusterResourceEnvelope",
    "ResourceEnvelope",
    "ClusterResourcePlacementEviction",
    "ClusterResourcePlacementDisruptionBudget",
)
_SVELTOS_CONFIG = frozenset(SVELTOS_CONFIG_KINDS)
_KUBEFLEET_PLACEMENT = frozenset(KUBEFLEET_PLACEMENT_KINDS)


class ConversionError(ValueError):
    """A docs/upstream form that cannot be mapped; `path` is the dotted field path."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path
        self.message = message


def _same_kind(kind: str) -> tuple[str, Callable[[dict[str, Any]], dict[str, Any]]]:
    return kind, lambda doc: doc


def sveltos_cluster(doc: dict[str, Any]) -> dict[str, Any]:
    """lib.projectsveltos.io SveltosCluster: kubeconfigName/kubeconfigKeyName become kubeconfigSecretRef
    (Sveltos' default Secret name `<name>-sveltos-kubeconfig` made explicit)."""
    raw_spec, meta = doc.get("spec") or {}, doc.get("metadata") or {}
    if not isinstance(raw_spec, dict):
        raise ConversionError("spec", f"expected an object, got {type(raw_spec).__name__}")
    spec = dict(raw_spec)
    name = meta.get("name", "") if isinstance(meta, dict) else ""
    ref: dict[str, Any] = {"name": spec.pop("kubeconfigName", None) or f"{name}-sveltos-kubeconfig"}
    if "kubeconfigKeyName" in spec:
        ref["key"] = spec.pop("kubeconfigKeyName")
    spec["kubeconfigSecretRef"] = ref
    return {**doc, "spec": spec}


def _fleet_member_cluster(doc: dict[str, Any]) -> dict[str, Any]:
    """cluster.kubernetes-fleet.io MemberCluster: identity/heartbeat/taints carried over as-is. KubeFleet
    reaches members through an agent, so there is no kubeconfig ref unless the user adds one natively."""
    return doc


# apiVersion -> kind -> (native kind, converter)
UPSTREAM: dict[str, dict[str, tuple[str, Callable[[dict[str, Any]], dict[str, Any]]]]] = {
    "config.projectsveltos.io/v1beta1": {k: _same_kind(k) for k in _SVELTOS_CONFIG},
    "lib.projectsveltos.io/v1beta1": {
        "SveltosCluster": ("MemberCluster", sveltos_cluster),
        "RoleRequest": _same_kind("RoleRequest"),
        **{k: _same_kind(k) for k in SVELTOS_LIB_KINDS},
    },
    "placement.kubernetes-fleet.io/v1beta1": {k: _same_kind(k) for k in _KUBEFLEET_PLACEMENT},
    "placement.kubernetes-fleet.io/v1": {k: _same_kind(k) for k in _KUBEFLEET_PLACEMENT},
    "cluster.kubernetes-fleet.io/v1beta1": {"MemberCluster": ("MemberCluster", _fleet_member_cluster)},
}


def to_native(doc: dict[str, Any], native_kinds: frozenset[str]) -> dict[str, Any]:
    """Map apiVersion/kind to the native ones and rewrite docs forms; returns a new dict."""
    api_version = doc.get("apiVersion")
    kind = doc.get("kind")
    if not isinstance(api_version, str) or not api_version:
        raise ConversionError("apiVersion", "missing apiVersion")
    if not isinstance(kind, str) or not kind:
        raise ConversionError("kind", "missing kind")
    if api_version == API_VERSION:
        if kind not in native_kinds:
            raise ConversionError("kind", f"unknown kind {kind!r} for apiVersion {api_version}")
        out = copy.deepcopy(doc)
    else:
        kinds = UPSTREAM.get(api_version)
        if kinds is None:
            raise ConversionError("apiVersion", f"unsupported apiVersion {api_version!r}")
        if kind not in kinds:
            raise ConversionError("kind", f"unknown kind {kind!r} for apiVersion {api_version}")
        native_kind, convert = kinds[kind]
        out = convert(copy.deepcopy(doc))
        out["kind"] = native_kind
    out["apiVersion"] = API_VERSION
    _normalise_doc_forms(out)
    return out


# ---- docs forms (Sveltos) ----

_CHECK_LISTS = ("validateHealths", "preDeployChecks", "preDeleteChecks", "postDeleteChecks")


def _normalise_doc_forms(doc: dict[str, Any]) -> None:
    spec = doc.get("spec")
    if not isinstance(spec, dict):
        return
    kind = doc["kind"]
    if kind in ("ClusterProfile", "Profile"):
        _normalise_profile(spec, "spec")
    elif kind == "ClusterSummary" and isinstance(spec.get("clusterProfileSpec"), dict):
        _normalise_profile(spec["clusterProfileSpec"], "spec.clusterProfileSpec")
    elif kind == "ClusterPromotion":
        if isinstance(spec.get("profileSpec"), dict):
            _normalise_profile(spec["profileSpec"], "spec.profileSpec")
        stages = spec.get("stages")
        for i, stage in enumerate(stages if isinstance(stages, list) else []):
            trigger = stage.get("trigger") if isinstance(stage, dict) else None
            if not isinstance(trigger, dict):
                continue
            for mode in ("auto", "manual"):
                t = trigger.get(mode)
                if not isinstance(t, dict):
                    continue
                path = f"spec.stages[{i}].trigger.{mode}"
                if "preHealthCheckDeployment" in t:
                    t["preHealthCheckDeployment"] = _policy_refs(
                        t["preHealthCheckDeployment"], f"{path}.preHealthCheckDeployment"
                    )
                _normalise_checks(t, "postDelayHealthChecks", path)


def _normalise_profile(profile: dict[str, Any], path: str) -> None:
    for key in _CHECK_LISTS:
        _normalise_checks(profile, key, path)


def _normalise_checks(parent: dict[str, Any], key: str, path: str) -> None:
    checks = parent.get(key)
    if isinstance(checks, list):
        parent[key] = [
            _health_check(c, f"{path}.{key}[{i}]") if isinstance(c, dict) else c for i, c in enumerate(checks)
        ]


def _health_check(check: dict[str, Any], path: str) -> dict[str, Any]:
    """Docs form `{type, name, evaluateCEL[{name, expression}]}` -> API form `{kind, name, resourceName,
    evaluateCEL[{name, rule}]}`. In the docs form `name` names the *resource*; it also names the check."""
    out = dict(check)
    if "type" in out:
        doc_type = out.pop("type")
        if "kind" in out and out["kind"] != doc_type:
            raise ConversionError(f"{path}.type", "set kind or type (docs spelling of kind), not both")
        out["kind"] = doc_type
        if "name" in out and "resourceName" not in out:
            out["resourceName"] = out["name"]
    rules = out.get("evaluateCEL")
    if isinstance(rules, list):
        fixed = []
        for j, raw in enumerate(rules):
            r = raw
            if isinstance(raw, dict) and "expression" in raw:
                r = dict(raw)
                expr = r.pop("expression")
                if "rule" in r:
                    raise ConversionError(
                        f"{path}.evaluateCEL[{j}].expression",
                        "set rule or expression (docs spelling), not both",
                    )
                r["rule"] = expr.strip() if isinstance(expr, str) else expr
            fixed.append(r)
        out["evaluateCEL"] = fixed
    return out


def _policy_refs(value: Any, path: str) -> Any:
    """Docs form `{configMapRefs: [...], secretRefs: [...]}` -> API form `[PolicyRef...]`."""
    if not isinstance(value, dict):
        return value
    refs: list[Any] = []
    for key, kind in (("configMapRefs", "ConfigMap"), ("secretRefs", "Secret")):
        listed = value.get(key) or []
        if not isinstance(listed, list):
            raise ConversionError(f"{path}.{key}", "expected a list of objects with name and namespace")
        for j, ref in enumerate(listed):
            if not isinstance(ref, dict):
                raise ConversionError(f"{path}.{key}[{j}]", "expected an object with name and namespace")
            refs.append({"kind": kind, **ref})
    unknown = sorted(set(value) - {"configMapRefs", "secretRefs"})
    if unknown:
        raise ConversionError(f"{path}.{unknown[0]}", "unknown field (expected a list of policy refs)")
    return refs
