"""The built-in Kubernetes kinds a KubeFleet placement may select, written once (pure table).

Three things follow from it and must agree: which kinds a placement's selectors may name
(`controllers.kubefleet.selection`), the informer the controller runs over each
(`controllers.kubefleet.SELECTABLE`), and the controller's right to read them (`mgmt.rbac`). Kinds
beyond these are placed only when the controller is told to (`--placement-kind`, ADR 0091).

The order is load-bearing twice: within one scope it is the order of a resource snapshot's objects
(reordering changes every snapshot's hash, so every placement would roll out again), and it is the
order of the resources in the shipped RBAC rules (the generated chart).
"""

from __future__ import annotations

from fleetwave.kube.kinds import GVK, KindInfo

_CORE, _APPS, _BATCH = "v1", "apps/v1", "batch/v1"
_RBAC = "rbac.authorization.k8s.io/v1"

BUILTIN: tuple[KindInfo, ...] = (
    KindInfo(GVK(_CORE, "Namespace"), "namespaces", namespaced=False),
    KindInfo(GVK(_CORE, "ConfigMap"), "configmaps", namespaced=True),
    KindInfo(GVK(_CORE, "Secret"), "secrets", namespaced=True),
    KindInfo(GVK(_CORE, "ServiceAccount"), "serviceaccounts", namespaced=True),
    KindInfo(GVK(_CORE, "Service"), "services", namespaced=True),
    KindInfo(GVK(_APPS, "Deployment"), "deployments", namespaced=True),
    KindInfo(GVK(_APPS, "StatefulSet"), "statefulsets", namespaced=True),
    KindInfo(GVK(_APPS, "DaemonSet"), "daemonsets", namespaced=True),
    KindInfo(GVK(_BATCH, "Job"), "jobs", namespaced=True),
    KindInfo(GVK(_BATCH, "CronJob"), "cronjobs", namespaced=True),
    KindInfo(GVK(_RBAC, "Role"), "roles", namespaced=True),
    KindInfo(GVK(_RBAC, "RoleBinding"), "rolebindings", namespaced=True),
    KindInfo(GVK(_RBAC, "ClusterRole"), "clusterroles", namespaced=False),
    KindInfo(GVK(_RBAC, "ClusterRoleBinding"), "clusterrolebindings", namespaced=False),
)
