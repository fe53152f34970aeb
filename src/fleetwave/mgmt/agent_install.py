"""The member side of pull mode (issue 44): what a member cluster runs so that `fleetwave agent run`
fetches its work from the hub and applies it there. `fleetwave cluster register --pull` prints
these manifests; the chart `deploy/chart/fleetwave-agent` renders the same objects (same names,
rules and security settings; a unit test compares them).

Objects, all in `namespace` (default `fleetwave-agent`) but the cluster-scoped ones:

- Namespace, labelled to enforce the `restricted` Pod Security Standard: the agent's pod meets it,
  so nothing less hardened can run next to the hub credential;
- Secret `fleetwave-agent-hub` (key `kubeconfig`): the hub credential. The pod reads it only from a
  Secret volume, never from an environment variable or a `subPath` mount, because the kubelet
  refreshes a Secret volume in place: rotating the Secret reaches the agent, which re-reads the
  file, without a restart;
- ServiceAccount, ClusterRole and ClusterRoleBinding `fleetwave-agent`: the agent's rights in the
  member (`DEFAULT_MEMBER_RULES` unless `rules` are given);
- Deployment `fleetwave-agent`: the controller's image with `agent run`, non-root, read-only root
  filesystem (helm's and Python's scratch space is an emptyDir at /tmp, where HOME and TMPDIR
  point, as in the controller's chart), no privilege escalation, no capabilities, seccomp
  RuntimeDefault. Several replicas are allowed: a Lease on the hub lets one act at a time.

What `DEFAULT_MEMBER_RULES` allows and does not allow
-----------------------------------------------------

The agent applies whatever the hub's profiles and placements deliver (server-side apply, pruning,
helm releases, CRDs included), so it cannot know the kinds in advance. RBAC has no "every verb
except", so the default names the eight standard verbs (get, list, watch, create, update, patch,
delete, deletecollection) on every resource and subresource of every API group, cluster-wide, and
`get` on the non-resource URLs /healthz, /readyz and /version.

Allowed, and so as powerful as cluster-admin in the hands of whoever controls the agent (which
includes everyone whose content the hub delivers to this member): reading every Secret; creating
Pods in any namespace with any ServiceAccount (and hostPath or privileged settings wherever that
namespace's admission permits them); `pods/exec`, `pods/attach`, `pods/portforward`,
`nodes/proxy`; `serviceaccounts/token` (a token of any ServiceAccount, hence any right one holds);
writing Roles, ClusterRoles and bindings with rights the agent itself holds; CRDs, admission
webhooks, the agent's own namespace and roles.

Not allowed: `impersonate` (users, groups, ServiceAccounts), `escalate` and `bind` on roles,
custom verbs (`approve` and `sign` on certificate signers, `use`, and any defined later), and other
non-resource URLs (/metrics, /logs, /debug/...). Discovery and OpenAPI reads come from Kubernetes'
`system:discovery` role, as for every authenticated user. Because of the API server's escalation
check, the agent therefore cannot apply RBAC that grants more than it holds: a role with `*`
verbs, with those verbs or with other non-resource URLs, a binding to such a role (`cluster-admin`,
and the built-in `admin` and `edit`, which hold `impersonate` on ServiceAccounts), or a ClusterRole
with an `aggregationRule` (the API server requires full authority for it). The withheld verbs are
therefore no defence against a hostile hub; they keep a delivery from quietly creating
impersonation or escalation rights.

Platform teams narrow (or widen) the grant with the chart value `memberRBAC.rules`, or `rules`
here: the list replaces the default whole.
"""

from __future__ import annotations

import base64
import copy
import re
from typing import Any, Final

NAME: Final = "fleetwave-agent"  # ServiceAccount, ClusterRole, ClusterRoleBinding, Deployment
HUB_SECRET: Final = f"{NAME}-hub"
HUB_KEY: Final = "kubeconfig"
HUB_MOUNT: Final = "/etc/fleetwave/hub"
NAMESPACE: Final = "fleetwave-agent"
CLUSTER_NAMESPACE: Final = "fleetwave-system"  # where the hub registers members by default
HEALTH_PORT: Final = 8081
HELM: Final = "/usr/local/bin/helm"  # where the image puts it (Containerfile)
USER_ID: Final = 65532  # the image's user
RBAC_API: Final = "rbac.authorization.k8s.io/v1"

VERBS: Final = ("get", "list", "watch", "create", "update", "patch", "delete", "deletecollection")
DEFAULT_MEMBER_RULES: Final[list[dict[str, Any]]] = [
    {"apiGroups": ["*"], "resources": ["*"], "verbs": list(VERBS)},
    {"nonResourceURLs": ["/healthz", "/readyz", "/version"], "verbs": ["get"]},
]

SELECTOR_LABELS: Final = {
    "app.kubernetes.io/name": NAME,
    "app.kubernetes.io/instance": NAME,  # the chart's, for a release named fleetwave-agent
    "app.kubernetes.io/component": "agent",
}
LABELS: Final = {**SELECTOR_LABELS, "app.kubernetes.io/part-of": "fleetwave"}

POD_SECURITY: Final = {
    "runAsNonRoot": True,
    "runAsUser": USER_ID,
    "runAsGroup": USER_ID,
    "fsGroup": USER_ID,
    "seccompProfile": {"type": "RuntimeDefault"},
}
CONTAINER_SECURITY: Final = {
    "allowPrivilegeEscalation": False,
    "readOnlyRootFilesystem": True,
    "privileged": False,
    "capabilities": {"drop": ["ALL"]},
}
RESOURCES: Final = {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"memory": "1Gi"}}
TMP_SIZE: Final = "1Gi"
# Owner and group read only: the group is the pod's fsGroup, which the kubelet gives the files.
HUB_FILE_MODE: Final = 0o440

_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_RESOURCE_KEYS = frozenset({"apiGroups", "resources", "resourceNames"})
_RULE_KEYS = _RESOURCE_KEYS | {"nonResourceURLs", "verbs"}


def member_manifests(
    *,
    cluster: str,
    cluster_namespace: str,
    hub_kubeconfig: bytes,
    image: str,
    namespace: str = NAMESPACE,
    rules: list[dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """Every object the member needs to run the agent, in apply order (the namespace first, the
    Deployment last, so its Secret and ServiceAccount exist when its pod starts). ValueError for a
    name the API server or the agent's arguments would not take, an empty credential or image, or a
    malformed rule: nothing half-usable is printed."""
    _require(_SUBDOMAIN, cluster, "cluster", 253)
    _require(_LABEL, cluster_namespace, "cluster namespace", 63)
    _require(_LABEL, namespace, "namespace", 63)
    if not hub_kubeconfig:
        raise ValueError("the hub kubeconfig is empty")
    if not image or image != image.strip():
        raise ValueError(f"image {image!r} is not an image reference")
    granted = copy.deepcopy(DEFAULT_MEMBER_RULES if rules is None else rules)
    for i, rule in enumerate(granted):
        _check_rule(i, rule)
    return [
        _namespace(namespace),
        _hub_secret(namespace, hub_kubeconfig),
        _meta_object("v1", "ServiceAccount", NAME, namespace),
        {**_meta_object(RBAC_API, "ClusterRole", NAME, None), "rules": granted},
        _cluster_role_binding(namespace),
        _deployment(namespace, agent_args(cluster, cluster_namespace), image),
    ]


def agent_args(cluster: str, cluster_namespace: str) -> list[str]:
    """`fleetwave agent run` as the pod runs it (the image's entrypoint is `fleetwave`). The hub
    kubeconfig is a file in the Secret volume; no `--kubeconfig`, so the member is reached with the
    pod's in-cluster ServiceAccount."""
    return [
        "agent",
        "run",
        f"--cluster={cluster}",
        f"--cluster-namespace={cluster_namespace}",
        f"--hub-kubeconfig={HUB_MOUNT}/{HUB_KEY}",
        f"--helm={HELM}",
        "--bind-address=0.0.0.0",  # the kubelet's probes come from outside the pod's loopback
        f"--health-port={HEALTH_PORT}",
        "--log-level=INFO",
        "--log-format=text",
    ]


def _require(pattern: re.Pattern[str], value: str, what: str, limit: int) -> None:
    if len(value) > limit or not pattern.match(value):
        raise ValueError(f"{what} {value!r} is not a valid Kubernetes name")


def _check_rule(index: int, rule: Any) -> None:
    """The shape the chart's schema accepts: non-empty verbs, and either API groups + resources
    (resourceNames optional) or non-resource URLs alone. The API server would refuse the ClusterRole
    otherwise, after the Namespace and the Secret had already been applied."""
    if not isinstance(rule, dict) or not rule.keys() <= _RULE_KEYS:
        raise ValueError(f"rule {index}: a PolicyRule has only the keys {', '.join(sorted(_RULE_KEYS))}")
    for key, value in rule.items():
        # "" is the core API group; every other entry names something.
        if not isinstance(value, list) or not all(
            isinstance(v, str) and (v or key == "apiGroups") for v in value
        ):
            raise ValueError(f"rule {index}: {key} must be a list of names")
    if "nonResourceURLs" in rule:
        shaped = bool(rule["nonResourceURLs"]) and not rule.keys() & _RESOURCE_KEYS
    else:
        shaped = bool(rule.get("apiGroups")) and bool(rule.get("resources"))
    if not rule.get("verbs") or not shaped:
        raise ValueError(
            f"rule {index}: needs verbs, and either apiGroups + resources or nonResourceURLs alone"
        )


def _meta_object(api_version: str, kind: str, name: str, namespace: str | None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": dict(LABELS)}
    if namespace is not None:
        meta["namespace"] = namespace
    return {"apiVersion": api_version, "kind": kind, "metadata": meta}


def _namespace(namespace: str) -> dict[str, Any]:
    """The agent's namespace enforces `restricted`: the pod meets it, and no pod that does not can
    be started beside the hub credential by someone who may create pods only there."""
    doc = _meta_object("v1", "Namespace", namespace, None)
    doc["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] = "restricted"
    return doc


def _hub_secret(namespace: str, hub_kubeconfig: bytes) -> dict[str, Any]:
    """`data` (base64), as the chart's `hub.kubeconfig` value is: any byte survives YAML unquoted."""
    doc = _meta_object("v1", "Secret", HUB_SECRET, namespace)
    doc["type"] = "Opaque"
    doc["data"] = {HUB_KEY: base64.b64encode(hub_kubeconfig).decode("ascii")}
    return doc


def _cluster_role_binding(namespace: str) -> dict[str, Any]:
    doc = _meta_object(RBAC_API, "ClusterRoleBinding", NAME, None)
    doc["roleRef"] = {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": NAME}
    doc["subjects"] = [{"kind": "ServiceAccount", "name": NAME, "namespace": namespace}]
    return doc


def _deployment(namespace: str, args: list[str], image: str) -> dict[str, Any]:
    doc = _meta_object("apps/v1", "Deployment", NAME, namespace)
    doc["spec"] = {
        "replicas": 1,
        "selector": {"matchLabels": dict(SELECTOR_LABELS)},
        "template": {"metadata": {"labels": dict(LABELS)}, "spec": _pod_spec(args, image)},
    }
    return doc


def _pod_spec(args: list[str], image: str) -> dict[str, Any]:
    """The agent's pod: its ServiceAccount's token is mounted (the agent reaches the member with
    in-cluster config); the hub credential is a whole Secret volume, read-only."""
    return {
        "serviceAccountName": NAME,
        "automountServiceAccountToken": True,
        "securityContext": copy.deepcopy(POD_SECURITY),
        "containers": [_container(args, image)],
        "volumes": [
            {"name": "tmp", "emptyDir": {"sizeLimit": TMP_SIZE}},
            {"name": "hub", "secret": {"secretName": HUB_SECRET, "defaultMode": HUB_FILE_MODE}},
        ],
    }


def _container(args: list[str], image: str) -> dict[str, Any]:
    def probe(path: str, period: int, failures: int) -> dict[str, Any]:
        return {
            "httpGet": {"path": path, "port": "health"},
            "periodSeconds": period,
            "failureThreshold": failures,
        }

    return {
        "name": "agent",
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "args": args,
        "env": [
            # The Lease holder's name on the hub: the pod's name says which replica acts.
            {"name": "FLEETWAVE_IDENTITY", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            # helm's cache, config and data homes and Python's temporary files: the only writable place.
            {"name": "HOME", "value": "/tmp"},
            {"name": "TMPDIR", "value": "/tmp"},
        ],
        "ports": [{"name": "health", "containerPort": HEALTH_PORT, "protocol": "TCP"}],
        # The first start (imports, the first reads of the hub) gets up to 2 minutes.
        "startupProbe": probe("/healthz", 5, 24),
        "livenessProbe": probe("/healthz", 10, 3),
        "readinessProbe": probe("/readyz", 5, 3),
        "resources": copy.deepcopy(RESOURCES),
        "securityContext": copy.deepcopy(CONTAINER_SECURITY),
        "volumeMounts": [
            {"name": "tmp", "mountPath": "/tmp"},
            {"name": "hub", "mountPath": HUB_MOUNT, "readOnly": True},
        ],
    }
