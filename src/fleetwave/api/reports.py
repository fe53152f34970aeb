"""ClusterReport: what a profile in `syncMode: DryRun` would change on one cluster (ADR 0113).

Field names follow addon-controller's v1beta1 ClusterReport (config.projectsveltos.io) and
libsveltos' ResourceReport; the native group serves the same kind under fleetwave.io. Written only
by the controller, one per profile and cluster, in the cluster's namespace.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from fleetwave.api.meta import AGE, Model, Resource, StatusModel, column

MAX_REPORTS = 2000  # entries of one list: a report's size stays far below an object's limit

ResourceAction = Literal["No Action", "Create", "Update", "Delete", "Conflict", "Error"]
HelmAction = Literal["No Action", "Install", "Upgrade", "Delete", "Conflict", "Update Values"]


class ReportedResource(StatusModel):
    """One object on the member cluster."""

    name: str
    """Name of the object."""
    namespace: str | None = None
    """Namespace of the object; empty for cluster-scoped objects."""
    group: str = ""
    """API group of the object; empty for the core group."""
    kind: str
    """Kind of the object."""
    version: str
    """API version of the object, such as `v1`."""


class ResourceReport(StatusModel):
    """What a delivery would do to one object."""

    resource: ReportedResource
    """The object."""
    action: ResourceAction | None = None
    """`Create` (it is not on the cluster), `Update` (it is, and applying would change it), `Delete`
    (it was deployed by this profile and is no longer in its content), `No Action`, `Conflict`
    (another profile or owner keeps it) or `Error` (it could not be evaluated)."""
    message: str | None = None
    """For `Update`: the paths that would change (for a Secret only that its data would change,
    never a value); for `Conflict` and `Error`: why."""


class ReleaseReport(StatusModel):
    """What a delivery would do to one Helm release."""

    release_name: str = Field(alias="chartName")
    """Name of the release (Sveltos calls this field chartName)."""
    release_namespace: str
    """Namespace of the release."""
    chart_version: str = ""
    """The chart version the release would run."""
    action: HelmAction | None = None
    """`Install`, `Upgrade` (another chart version), `Update Values` (same chart version, other
    values), `Delete` (uninstall), `No Action` or `Conflict` (another owner keeps the release)."""
    message: str | None = None
    """More about the action: the version installed now, or why it cannot be evaluated."""


class ClusterReportSpec(Model):
    """Written by the controller: the cluster this report is for."""

    cluster_namespace: str
    """Namespace of the member cluster."""
    cluster_name: str
    """Name of the member cluster."""


class ClusterReportStatus(StatusModel):
    """Set by the controller: what the profile's content would change on the cluster."""

    release_reports: list[ReleaseReport] | None = Field(None, max_length=MAX_REPORTS)
    """One entry per Helm release of the profile (helmCharts)."""
    helm_resource_reports: list[ResourceReport] | None = Field(None, max_length=MAX_REPORTS)
    """One entry per object of the profile's Helm releases that an install or upgrade would create,
    update or delete (helm's rendered manifest against the installed one)."""
    resource_reports: list[ResourceReport] | None = Field(None, max_length=MAX_REPORTS)
    """One entry per object of the profile's policyRefs, and per object it would delete."""
    kustomize_resource_reports: list[ResourceReport] | None = Field(None, max_length=MAX_REPORTS)
    """One entry per object built from the profile's kustomizationRefs."""


class ClusterReport(Resource):
    """Set by the controller for a profile in `syncMode: DryRun`: what its content would create,
    update or delete on one member cluster, without changing anything there. Removed when the profile
    leaves DryRun, stops selecting the cluster, or is deleted. Read with `kubectl get clusterreports
    -o yaml` or `fleetwave status profile NAME --dry-run-report`."""

    kind_name: ClassVar[str] = "ClusterReport"
    plural: ClassVar[str] = "clusterreports"
    namespaced: ClassVar[bool] = True
    short_names: ClassVar[tuple[str, ...]] = ("creport",)
    printer_columns: ClassVar[tuple[dict[str, object], ...]] = (
        column("Cluster", ".spec.clusterName"),
        column("Profile", ".metadata.labels.projectsveltos\\.io/cluster-profile-name"),
        AGE,
    )

    kind: Literal["ClusterReport"] = "ClusterReport"
    """The object's kind: `ClusterReport`."""
    spec: ClusterReportSpec
    """Written by the controller: the cluster this report is for."""
    status: ClusterReportStatus | None = None
    """Set by the controller: what would change on the cluster."""
