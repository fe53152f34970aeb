"""CustomResourceDefinitions generated from the pydantic models (the models are the single source of truth).

pydantic's JSON schema is not a structural schema; `structural()` rewrites it: `$ref` inlined, titles
dropped, Optional reduced to "not required", `additionalProperties: true` turned into
`x-kubernetes-preserve-unknown-fields`, `const` into `enum`. See docs/adr/0010-api-models-and-crds.md.
"""

from __future__ import annotations

from typing import Any

import yaml
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import core_schema

from fleetwave.api import upstream
from fleetwave.api.families import FLEET_PLACEMENT, FLEET_PLACEMENT_ALSO, FLEET_PLACEMENT_KINDS, Family
from fleetwave.api.meta import AGE, GROUP, VERSION, Resource, column, condition_column
from fleetwave.api.models import ALL_KINDS, KINDS


class _CRDSchema(GenerateJsonSchema):
    def field_title_should_be_set(self, schema: Any) -> bool:
        return False

    def nullable_schema(self, schema: core_schema.NullableSchema) -> JsonSchemaValue:
        # Optional means "may be omitted": to_manifest never writes null, so no `nullable`.
        return self.generate_inner(schema["schema"])

    def default_schema(self, schema: core_schema.WithDefaultSchema) -> JsonSchemaValue:
        out = super().default_schema(schema)
        if out.get("default") is None or out.get("default") in ([], {}):
            out.pop("default", None)
        return out


def structural(node: Any, defs: dict[str, Any]) -> Any:
    """Rewrite one pydantic JSON-schema node into apiextensions/v1 structural form."""
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        target = defs[node["$ref"].split("/")[-1]]
        merged = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
        return structural(merged, defs)
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in ("title", "$defs"):
            continue
        if key == "properties":
            out[key] = {name: structural(sub, defs) for name, sub in value.items()}
        elif key in ("items",):
            out[key] = structural(value, defs)
        elif key == "anyOf":
            out[key] = [structural(sub, defs) for sub in value]
        elif key == "additionalProperties":
            if value is True:
                out["x-kubernetes-preserve-unknown-fields"] = True
            elif isinstance(value, dict):
                out[key] = structural(value, defs)
            # False (extra="forbid") is what structural pruning does anyway
        elif key == "const":
            out["enum"] = [value]
        elif key == "description":
            out[key] = prose(value)
        else:
            out[key] = value
    if "anyOf" in out and not out.get("x-kubernetes-int-or-string"):
        raise ValueError(f"non-structural anyOf in schema: {out}")
    # `x-any-json` marks a field that takes any JSON value (a JSON patch's value): it gets no type.
    any_json = out.pop("x-any-json", False)
    if "x-kubernetes-preserve-unknown-fields" in out and "properties" not in out and not any_json:
        out.setdefault("type", "object")
    if "enum" in out and "type" not in out:
        out["type"] = "string"
    return out


def prose(text: str) -> str:
    """A docstring as a description: lines wrapped for the source joined again (`kubectl explain`
    wraps to the terminal), blank-line paragraph breaks kept."""
    paragraphs = [" ".join(p.split()) for p in text.strip().split("\n\n")]
    return "\n\n".join(p for p in paragraphs if p)


def openapi_schema(kind: type[Resource]) -> dict[str, Any]:
    raw = kind.model_json_schema(by_alias=True, mode="validation", schema_generator=_CRDSchema)
    schema: dict[str, Any] = structural(raw, raw.get("$defs", {}))
    props = schema["properties"]
    props["apiVersion"] = {"type": "string"}
    props["kind"] = {"type": "string"}
    props["metadata"] = {"type": "object"}
    # The kind's docstring is its description (the top of `kubectl explain <kind>`).
    schema["required"] = [
        r for r in schema.get("required", []) if r not in ("metadata", "kind", "apiVersion")
    ]
    if not schema["required"]:
        del schema["required"]
    if kind.root_validations:
        schema["x-kubernetes-validations"] = list(kind.root_validations)
    return schema


def crd_for(kind: type[Resource]) -> dict[str, Any]:
    """The CustomResourceDefinition for one native kind."""
    names: dict[str, Any] = {
        "kind": kind.kind_name,
        "listKind": f"{kind.kind_name}List",
        "plural": kind.plural,
        "singular": kind.kind_name.lower(),
    }
    if kind.short_names:
        names["shortNames"] = list(kind.short_names)
    names["categories"] = list(kind.categories)
    version: dict[str, Any] = {"name": VERSION, "served": True, "storage": True}
    if "status" in kind.model_fields:
        version["subresources"] = {"status": {}}
    if kind.printer_columns:
        version["additionalPrinterColumns"] = [dict(c) for c in kind.printer_columns]
    version["schema"] = {"openAPIV3Schema": openapi_schema(kind)}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{kind.plural}.{GROUP}", "labels": {PART_OF: FLEETWAVE}},
        "spec": {
            "group": GROUP,
            "names": names,
            "scope": "Namespaced" if kind.namespaced else "Cluster",
            "versions": [version],
        },
    }


def all_crds(unserved: frozenset[str] = frozenset()) -> list[dict[str, Any]]:
    """Every native CRD; those of the `unserved` kinds kept (their stored objects are not touched)
    but not served, so the upstream group is the only one that answers for them (ADR 0062)."""
    out = []
    for k in ALL_KINDS:
        crd = crd_for(k)
        if k.kind_name in unserved:
            crd["spec"]["versions"] = [{**v, "served": False} for v in crd["spec"]["versions"]]
        out.append(crd)
    return out


# With the upstream groups installed, kubectl would resolve `crp`, `clusterresourcesnapshots`, ... to
# fleetwave.io (it sorts before placement.kubernetes-fleet.io), so these native kinds stop being served.
# config.projectsveltos.io sorts first, so the Sveltos kinds are served in both groups.
UPSTREAM_ONLY = frozenset(FLEET_PLACEMENT_KINDS)


FLEET_PLACEMENT_GROUP = FLEET_PLACEMENT.rpartition("/")[0]
_SVELTOS_CONFIG = upstream.SVELTOS_CONFIG_KINDS

# Marks a CRD fleetwave installed for an upstream group, so a re-install may update it and nothing
# else (a real Sveltos' or KubeFleet's CRD) is ever taken over. ADR 0062.
MANAGED_BY = "app.kubernetes.io/managed-by"
FLEETWAVE = "fleetwave"
# On every CRD fleetwave writes, by `fleetwave install` or the chart: `kubectl delete crd -l
# app.kubernetes.io/part-of=fleetwave` removes them all (and every object of their kinds).
PART_OF = "app.kubernetes.io/part-of"

# What upstream prints for its own kinds (printer columns, short names). Kinds not listed: Sveltos'
# config kinds have neither; the KubeFleet placement kinds keep fleetwave's, which are upstream's.
_MEMBER_COLUMNS = [column("Ready", ".status.ready", "boolean"), column("Version", ".status.version"), AGE]
# Seed 004's tables: `kubectl get csur` (PLACEMENT RESOURCE-SNAPSHOT POLICY-SNAPSHOT INITIALIZED
# SUCCEEDED AGE) and `kubectl get clusterapprovalrequest` (UPDATE-RUN STAGE APPROVED APPROVALACCEPTED).
_SEED_RUN_COLUMNS = [
    column("Placement", ".spec.placementName"),
    column("Resource-Snapshot", ".status.resourceSnapshotIndexUsed"),
    column("Policy-Snapshot", ".status.policySnapshotIndexUsed"),
    condition_column("Initialized", "Initialized"),
    condition_column("Succeeded", "Succeeded"),
    AGE,
]
_SEED_APPROVAL_COLUMNS = [
    column("Update-Run", ".spec.parentStageRollout"),
    column("Stage", ".spec.targetStage"),
    condition_column("Approved", "Approved"),
    condition_column("ApprovalAccepted", "ApprovalAccepted"),
    AGE,
]
_FLEET = "placement.kubernetes-fleet.io"
# `kubectl get crpe` (VALID EXECUTED), as upstream prints it; its budgets have no columns.
_EVICTION_COLUMNS = [condition_column("Valid", "Valid"), condition_column("Executed", "Executed")]
_UPSTREAM_NAMES: dict[tuple[str, str], dict[str, Any]] = {
    (_FLEET, "ClusterStagedUpdateRun"): {"shortNames": ["csur"], "columns": _SEED_RUN_COLUMNS},
    (_FLEET, "StagedUpdateRun"): {"shortNames": ["sur"], "columns": _SEED_RUN_COLUMNS},
    (_FLEET, "ClusterApprovalRequest"): {"shortNames": ["careq"], "columns": _SEED_APPROVAL_COLUMNS},
    (_FLEET, "ApprovalRequest"): {"shortNames": ["areq"], "columns": _SEED_APPROVAL_COLUMNS},
    (_FLEET, "ClusterResourcePlacementEviction"): {"shortNames": ["crpe"], "columns": _EVICTION_COLUMNS},
    (_FLEET, "ClusterResourcePlacementDisruptionBudget"): {"shortNames": ["crpdb"], "columns": []},
    ("lib.projectsveltos.io", "SveltosCluster"): {"shortNames": [], "columns": _MEMBER_COLUMNS},
    ("lib.projectsveltos.io", "RoleRequest"): {"shortNames": [], "columns": []},
    ("cluster.kubernetes-fleet.io", "MemberCluster"): {"shortNames": ["cluster"], "columns": _MEMBER_COLUMNS},
    **{("config.projectsveltos.io", k): {"shortNames": [], "columns": []} for k in _SVELTOS_CONFIG},
    # Neither have ClusterSet and Set.
    **{("lib.projectsveltos.io", k): {"shortNames": [], "columns": []} for k in upstream.SVELTOS_LIB_KINDS},
    # KubeFleet's overrides, their snapshots and the envelopes have neither.
    **{
        (_FLEET, k): {"shortNames": [], "columns": []}
        for k in (
            "ClusterResourceOverride",
            "ResourceOverride",
            "ClusterResourceOverrideSnapshot",
            "ResourceOverrideSnapshot",
            "ClusterResourceEnvelope",
            "ResourceEnvelope",
        )
    },
}


# SveltosCluster keeps Sveltos' spec: the fields fleetwave acts on are typed, the others are kept as
# written (fleetwave reports them in status rather than dropping them).
def _member_schema(spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": {
                "type": "object",
                "description": "How fleetwave reaches the member cluster; other fields are kept as written.",
                "x-kubernetes-preserve-unknown-fields": True,
                "properties": spec,
            },
            "status": {
                "type": "object",
                "description": "Set by the controller: whether the member's API server is reachable "
                "and ready,"
                " and its Kubernetes version.",
                "x-kubernetes-preserve-unknown-fields": True,
            },
        },
    }


_NAME = {"type": "string", "maxLength": 253}
_MEMBER_SCHEMAS = {
    "SveltosCluster": _member_schema(
        {
            "kubeconfigName": {
                **_NAME,
                "description": "Name of the Secret, in the SveltosCluster's namespace, holding the "
                "kubeconfig fleetwave uses to reach the cluster. Defaults to `<name>-sveltos-kubeconfig`.",
            },
            "kubeconfigKeyName": {
                **_NAME,
                "description": "Key of the kubeconfig in the Secret. Omitted: `kubeconfig` when the "
                "Secret has that key, otherwise its first key in alphabetical order.",
            },
            "paused": {
                "type": "boolean",
                "description": "Whether deliveries to the cluster are paused: a paused cluster keeps its "
                "place in rollouts, but nothing new is delivered to it until it is unpaused. Defaults to "
                "false.",
            },
        }
    ),
    # KubeFleet's MemberCluster: the member's identity and heartbeat (kept, the member agent's
    # business) and taints; its kubeconfig is at a fixed place (families.kubeconfig_secret_name).
    "MemberCluster": _member_schema(
        {
            "identity": {
                "type": "object",
                "x-kubernetes-preserve-unknown-fields": True,
                "description": "KubeFleet's member agent identity. Accepted for compatibility with "
                "KubeFleet; fleetwave does not act on it.",
            },
            "heartbeatPeriodSeconds": {
                "type": "integer",
                "minimum": 1,
                "maximum": 600,
                "description": "KubeFleet's member agent heartbeat period, 1 to 600 seconds. Accepted for "
                "compatibility with KubeFleet; fleetwave does not act on it (it checks each cluster every "
                "30 seconds).",
            },
            "taints": {
                "type": "array",
                "maxItems": 100,
                "description": "Taints, up to 100, that keep PickAll and PickN placements without a "
                "matching toleration off the cluster.",
                "items": {
                    "type": "object",
                    "required": ["key", "effect"],
                    "properties": {
                        "key": {**_NAME, "description": "Key of the taint."},
                        "value": {"type": "string", "maxLength": 63, "description": "Value of the taint."},
                        "effect": {
                            "type": "string",
                            "enum": ["NoSchedule"],
                            "description": "Effect of the taint: `NoSchedule`, the only one. A PickAll or "
                            "PickN placement without a matching toleration does not pick the cluster.",
                        },
                    },
                },
            },
        }
    ),
}


def upstream_crd(family: Family, native_kind: str) -> dict[str, Any]:
    """The CRD of one native kind as an upstream API family serves it: the upstream group, version,
    kind and plural; the native schema (the models use the upstream field names) except where the
    upstream kind differs (SveltosCluster); no fleetwave short names (upstream has none for these)."""
    served = family.served(native_kind)
    model = KINDS[native_kind]
    extra = _UPSTREAM_NAMES.get(
        (served.group, served.kind),
        {"shortNames": list(model.short_names), "columns": list(model.printer_columns)},
    )
    names: dict[str, Any] = {
        "kind": served.kind,
        "listKind": f"{served.kind}List",
        "plural": served.plural,
        "singular": served.kind.lower(),
        "categories": list(model.categories),
    }
    if extra.get("shortNames"):
        names["shortNames"] = list(extra["shortNames"])
    member = native_kind == "MemberCluster"
    schema = _MEMBER_SCHEMAS[served.kind] if member else openapi_schema(model)
    version: dict[str, Any] = {"name": served.version, "served": True, "storage": True}
    version["subresources"] = {"status": {}}
    columns = extra.get("columns")
    if columns:
        version["additionalPrinterColumns"] = [dict(c) for c in columns]
    version["schema"] = {"openAPIV3Schema": schema}
    versions = [version]
    if served.group == FLEET_PLACEMENT_GROUP:  # v1 carries the same fields (seed 004 reads v1)
        versions += [{**version, "name": v, "storage": False} for v in FLEET_PLACEMENT_ALSO]
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": f"{served.plural}.{served.group}",
            "labels": {MANAGED_BY: FLEETWAVE, PART_OF: FLEETWAVE},
        },
        "spec": {
            "group": served.group,
            "names": names,
            "scope": "Namespaced" if served.namespaced else "Cluster",
            "versions": versions,
        },
    }


def upstream_crds(served: tuple[Family, ...]) -> list[dict[str, Any]]:
    return [upstream_crd(f, kind) for f in served for kind in f.kinds]


def file_name(crd: dict[str, Any]) -> str:
    return f"{crd['metadata']['name']}.yaml"


class NoAliasDumper(yaml.SafeDumper):
    """Shared sub-schemas must be written out in full: anchors/aliases would only obscure the CRD."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def render(crd: dict[str, Any]) -> str:
    """Stable YAML text for a CRD (what `fleetwave crds` writes and the drift test compares)."""
    header = "# Generated by `fleetwave crds` from fleetwave.api models. Do not edit.\n"
    return header + yaml.dump(crd, Dumper=NoAliasDumper, sort_keys=False, width=100, allow_unicode=True)


def render_files() -> dict[str, str]:
    """File name -> content, for every native kind."""
    return {file_name(c): render(c) for c in all_crds()}


# A CRD's CEL rules see only metadata.name/generateName of the object, not its namespace, so "a
# MemberCluster uses a Secret in its own namespace" is checked at admission by a
# ValidatingAdmissionPolicy (GA since Kubernetes 1.30). The controller enforces the same rule itself
# (it never reads another namespace's Secret), so a cluster without the policy is still safe.
MEMBER_SECRET_POLICY = "memberclusters.fleetwave.io-own-namespace-secret"
MEMBER_SECRET_RULE = (
    "!has(object.spec.kubeconfigSecretRef) || !has(object.spec.kubeconfigSecretRef.namespace)"
    " || object.spec.kubeconfigSecretRef.namespace == object.metadata.namespace"
)


def admission_policies() -> list[dict[str, Any]]:
    """The ValidatingAdmissionPolicy (and its binding) that refuses a MemberCluster naming a
    kubeconfig Secret in another namespace."""
    policy = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": MEMBER_SECRET_POLICY},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "resourceRules": [
                    {
                        "apiGroups": [GROUP],
                        "apiVersions": ["*"],
                        "operations": ["CREATE", "UPDATE"],
                        "resources": ["memberclusters"],
                    }
                ]
            },
            "validations": [
                {
                    "expression": MEMBER_SECRET_RULE,
                    "message": "spec.kubeconfigSecretRef.namespace: a MemberCluster may only use a "
                    "kubeconfig Secret in its own namespace",
                    "reason": "Forbidden",
                }
            ],
        },
    }
    binding = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": MEMBER_SECRET_POLICY},
        "spec": {"policyName": MEMBER_SECRET_POLICY, "validationActions": ["Deny"]},
    }
    return [policy, binding]
