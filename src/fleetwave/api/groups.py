"""The API groups and versions fleetwave serves: its own and the upstream ones it can serve too.

Plain constants with no imports, so the CLI can name them without loading the models."""

GROUP = "fleetwave.io"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"

SVELTOS_CONFIG = "config.projectsveltos.io/v1beta1"
SVELTOS_LIB = "lib.projectsveltos.io/v1beta1"
FLEET_PLACEMENT = "placement.kubernetes-fleet.io/v1beta1"
FLEET_CLUSTER = "cluster.kubernetes-fleet.io/v1beta1"
# placement.kubernetes-fleet.io also serves v1 with the same fields (seed 004 reads snapshots as v1).
FLEET_PLACEMENT_ALSO = ("v1",)

# Cluster API's `Cluster`: read (never served) as members of the Sveltos family, as Sveltos does
# (ADR 0109). v1beta2 is what Cluster API 1.11+ stores and Sveltos reads; older releases serve only
# v1beta1, tried next.
CAPI_GROUP = "cluster.x-k8s.io"
CAPI_VERSIONS = ("v1beta2", "v1beta1")
CAPI_KIND = "Cluster"
CAPI_PLURAL = "clusters"


def upstream_api_versions() -> list[str]:
    """Every upstream apiVersion fleetwave serves with `install --upstream-apis`, sorted."""
    placement_group = FLEET_PLACEMENT.rpartition("/")[0]
    also = {f"{placement_group}/{v}" for v in FLEET_PLACEMENT_ALSO}
    return sorted({SVELTOS_CONFIG, SVELTOS_LIB, FLEET_PLACEMENT, FLEET_CLUSTER} | also)
