"""RoleRequest: the rules a tenant admin gets in the member clusters a selector picks (Sveltos'
`lib.projectsveltos.io` kind; ADR 0111)."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from fleetwave.api.meta import (
    AGE,
    LabelSelector,
    Model,
    ObjectReference,
    Resource,
    StatusModel,
    column,
)


class RoleRef(Model):
    """A ConfigMap or Secret (of type `addons.projectsveltos.io/cluster-profile`) whose data holds
    the Roles and ClusterRoles to grant, as YAML or JSON documents."""

    kind: Literal["ConfigMap", "Secret"]
    """`ConfigMap` or `Secret`."""
    namespace: str = Field(min_length=1, max_length=63)
    """Namespace of the ConfigMap or Secret."""
    name: str = Field(min_length=1, max_length=253)
    """Name of the ConfigMap or Secret."""


class RoleRequestSpec(Model):
    """Which clusters, which rules, and the tenant admin they are granted to."""

    cluster_selector: LabelSelector | None = None
    """The member clusters where the rules are granted; empty: none."""
    role_refs: list[RoleRef] | None = Field(None, max_length=32)
    """The Roles and ClusterRoles to create in each selected cluster, each bound to the tenant
    admin. Only Role and ClusterRole objects are accepted: a binding, or any other kind, refuses
    the whole request."""
    expiration_seconds: int | None = None
    """Sveltos: the lifetime of the token it issues for the tenant admin. fleetwave issues no
    token (it acts as the ServiceAccount by impersonation) and refuses a request that sets it."""
    service_account_name: str = Field(min_length=1, max_length=253)
    """The ServiceAccount that stands for the tenant admin. A profile labelled
    `projectsveltos.io/serviceaccount-name` with this name (and `-namespace` with the namespace
    below) delivers acting as it, with only the rules granted here."""
    service_account_namespace: str = Field(min_length=1, max_length=63)
    """The ServiceAccount's namespace (on the members; created there when missing)."""


class ClusterInfo(StatusModel):
    """Set by the controller: the rules' state in one cluster."""

    cluster: ObjectReference
    """The cluster."""
    hash: str | None = None
    """A digest of the objects granted there."""
    status: Literal["Provisioning", "Provisioned", "Failed", "Removing"] | None = None
    """Whether the rules are in place in that cluster."""
    failure_message: str | None = None
    """Why they are not."""


class RoleRequestStatus(StatusModel):
    """Set by the controller."""

    matching_clusters: list[ObjectReference] | None = None
    """The clusters the selector picks."""
    cluster_info: list[ClusterInfo] | None = None
    """The rules' state in each cluster they were granted in."""
    failure_message: str | None = None
    """Why the request cannot be acted on at all (a refused field, a role reference that cannot be
    read or holds something other than Roles and ClusterRoles)."""


class RoleRequest(Resource):
    """Grants a tenant admin (a ServiceAccount) rules in the clusters a selector picks: fleetwave
    creates the ServiceAccount, the Roles and ClusterRoles, and their bindings in each cluster, and
    delivers the tenant's profiles acting as that ServiceAccount."""

    kind_name: ClassVar[str] = "RoleRequest"
    plural: ClassVar[str] = "rolerequests"
    namespaced: ClassVar[bool] = False
    short_names: ClassVar[tuple[str, ...]] = ("rolereq",)
    printer_columns: ClassVar[tuple[dict[str, object], ...]] = (
        column("ServiceAccount", ".spec.serviceAccountName"),
        column("Namespace", ".spec.serviceAccountNamespace"),
        column("Failure", ".status.failureMessage", priority=1),
        AGE,
    )

    kind: Literal["RoleRequest"] = "RoleRequest"
    """The object's kind: `RoleRequest`."""
    spec: RoleRequestSpec
    """What is granted, where and to whom."""
    status: RoleRequestStatus | None = None
    """Set by the controller: where the rules are in place."""
