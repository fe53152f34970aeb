"""API families: which group, version and kind name each native kind is served under.

The engine and the controllers think in native kinds ("ClusterProfile", "MemberCluster"). A family
says where a set of controllers finds and writes those objects: `fleetwave.io/v1alpha1` (the
default), or the upstream groups of Sveltos (`config.projectsveltos.io`, `lib.projectsveltos.io`)
so that manifests written for Sveltos are reconciled as they are (docs/adr/0062-upstream-api-groups.md).
Objects a controller generates (stage profiles, summaries) go to the family of their parent.

`view` turns an object served under a family into the native form the controllers read; for most
kinds only apiVersion/kind change, because the native models use the upstream field names.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from fleetwave.api import groups, models, upstream
from fleetwave.api.meta import API_VERSION

# The groups' names (api.groups) are re-exported here, where most of the code looks for them.
SVELTOS_CONFIG, SVELTOS_LIB = groups.SVELTOS_CONFIG, groups.SVELTOS_LIB
FLEET_PLACEMENT, FLEET_CLUSTER = groups.FLEET_PLACEMENT, groups.FLEET_CLUSTER
FLEET_PLACEMENT_ALSO = groups.FLEET_PLACEMENT_ALSO
CONTROLLER_NAMESPACE = "fleetwave-system"


@dataclass(frozen=True, slots=True)
class Served:
    """Where one native kind lives in a family."""

    api_version: str
    kind: str
    plural: str
    namespaced: bool

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    @property
    def version(self) -> str:
        return self.api_version.rpartition("/")[2]


def _identity(doc: dict[str, Any]) -> dict[str, Any]:
    return doc


@dataclass(frozen=True, slots=True)
class Family:
    name: str
    kinds: Mapping[str, Served]
    # native kind -> how a served object's body becomes the native body (apiVersion/kind set by `view`)
    converters: Mapping[str, Callable[[dict[str, Any]], dict[str, Any]]] = field(default_factory=dict)
    # Whether Cluster API clusters (cluster.x-k8s.io `Cluster`) are members of this family's fleet
    # next to its registered ones, as in Sveltos (ADR 0109). They are not a kind the family serves.
    capi: bool = False

    @property
    def native(self) -> bool:
        return self.name == NATIVE_NAME

    def served(self, kind: str) -> Served:
        """Where a native kind is served; KeyError if this family does not serve it."""
        return self.kinds[kind]

    def api_version(self, kind: str) -> str:
        return self.kinds[kind].api_version

    def view(self, kind: str, obj: dict[str, Any]) -> dict[str, Any]:
        """The native form of an object of this family (a new dict; the input is not changed)."""
        if self.native:
            return obj
        convert = self.converters.get(kind, _identity)
        return {**convert(dict(obj)), "apiVersion": API_VERSION, "kind": kind}

    def controller_name(self, kind: str) -> str:
        """The name a controller of `kind` in this family gets (metrics, logs): native kinds keep
        their short name, others say their group."""
        served = self.kinds[kind]
        return kind.lower() if self.native else f"{served.kind.lower()}.{served.group}"


NATIVE_NAME = "fleetwave"

NATIVE = Family(
    NATIVE_NAME,
    {k: Served(API_VERSION, k, m.plural, m.namespaced) for k, m in models.KINDS.items()},
)

SVELTOS = Family(
    "sveltos",
    {
        "ClusterProfile": Served(SVELTOS_CONFIG, "ClusterProfile", "clusterprofiles", False),
        "ClusterPromotion": Served(SVELTOS_CONFIG, "ClusterPromotion", "clusterpromotions", False),
        "ClusterSummary": Served(SVELTOS_CONFIG, "ClusterSummary", "clustersummaries", True),
        "ClusterReport": Served(SVELTOS_CONFIG, "ClusterReport", "clusterreports", True),
        "Profile": Served(SVELTOS_CONFIG, "Profile", "profiles", True),
        "MemberCluster": Served(SVELTOS_LIB, "SveltosCluster", "sveltosclusters", True),
        "RoleRequest": Served(SVELTOS_LIB, "RoleRequest", "rolerequests", False),
        "ClusterSet": Served(SVELTOS_LIB, "ClusterSet", "clustersets", False),
        "Set": Served(SVELTOS_LIB, "Set", "sets", True),
    },
    {"MemberCluster": upstream.sveltos_cluster},
    capi=True,
)

FLEET_PLACEMENT_KINDS = upstream.KUBEFLEET_PLACEMENT_KINDS


def kubeconfig_secret_name(cluster: str) -> str:
    """Where a KubeFleet-group member's kubeconfig is: `<name>-kubeconfig` in the controller's
    namespace, the Secret `fleetwave cluster register` writes. KubeFleet members join through an
    agent and name no credentials, so fleetwave fixes the place; a MemberCluster cannot point
    anywhere else (it could otherwise borrow any Secret of that namespace)."""
    return f"{cluster}-kubeconfig"


def _fleet_member(namespace: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    def convert(doc: dict[str, Any]) -> dict[str, Any]:
        meta = dict(doc.get("metadata") or {})
        spec = dict(doc.get("spec") or {}) if isinstance(doc.get("spec"), dict) else {}
        meta["namespace"] = namespace
        spec["kubeconfigSecretRef"] = {"name": kubeconfig_secret_name(str(meta.get("name", "")))}
        return {**doc, "metadata": meta, "spec": spec}

    return convert


def kubefleet(namespace: str = CONTROLLER_NAMESPACE) -> Family:
    """The KubeFleet groups; their cluster-scoped MemberClusters are viewed as members of the
    controller's `namespace` (where their kubeconfig Secrets live)."""
    kinds = {
        k: Served(FLEET_PLACEMENT, k, m.plural, m.namespaced)
        for k in FLEET_PLACEMENT_KINDS
        for m in (models.KINDS[k],)
    }
    kinds["MemberCluster"] = Served(FLEET_CLUSTER, "MemberCluster", "memberclusters", False)
    return Family("kubefleet", kinds, {"MemberCluster": _fleet_member(namespace)})


KUBEFLEET = kubefleet()

UPSTREAM: tuple[Family, ...] = (SVELTOS, KUBEFLEET)


def upstream_families(namespace: str = CONTROLLER_NAMESPACE) -> tuple[Family, ...]:
    """The upstream families as a controller running in `namespace` serves them."""
    return (SVELTOS, kubefleet(namespace))
