"""MemberWork: what one pull-mode member cluster must run, written by the hub into the member's
namespace on the hub (`fleet-member-<name>`), carried out by `fleetwave agent` in the member, and
reported back in its status (ADR 0106)."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from fleetwave.api.meta import AGE, FreeForm, Model, Resource, StatusModel, column


class MemberWorkSpec(Model):
    """Written by the controller: one delivery to one pull-mode member, already decided and rendered
    for that cluster (templates and overrides applied, the revision pinned)."""

    cluster: str = Field(min_length=1, max_length=317)
    """The member the work is for, as `namespace/name`. An agent refuses work for any other cluster."""
    owner: str = Field(min_length=1, max_length=512)
    """Who the work delivers for, as `Kind/namespace/name` or `Kind/name`: its report wakes it."""
    revision: str = Field(min_length=1, max_length=128)
    """A digest of the rest of the spec: a report names the revision it is about, and a report about
    an older one is never read as one about this."""
    summary: FreeForm | None = None
    """A ClusterSummary's delivery: the summary as the agent delivers it (metadata, spec, the status
    the hub holds) and its `content`, rendered for this cluster."""
    placement: FreeForm | None = None
    """A KubeFleet placement's delivery: `objects` (rendered, overrides applied), `inventory`,
    `rules` (apply strategy) and whether availability is to be judged."""
    withdraw: bool = False
    """Remove what the work delivered from the member, then report; the controller deletes the work
    after that report."""


class MemberWorkStatus(StatusModel):
    """Set by the member's agent: how the revision it last carried out went."""

    observed_revision: str | None = None
    """Set by the agent: the spec revision this report is about."""
    agent: str | None = None
    """Set by the agent: the identity of the agent that wrote the report (the holder of the member's
    lease)."""
    reported_at: str | None = None
    """Set by the agent: when the report was written (RFC 3339)."""
    outcome: FreeForm | None = None
    """Set by the agent: what the delivery did and what health it judged, in the form the hub turns
    into the owner's status."""
    withdrawn: bool | None = None
    """Set by the agent: the work's content was removed from the member (`spec.withdraw`)."""


class MemberWork(Resource):
    """Set by the controller: one delivery for one pull-mode member cluster, in the member's namespace
    on the management cluster. Its agent carries it out and reports in status; not written by users."""

    kind_name: ClassVar[str] = "MemberWork"
    plural: ClassVar[str] = "memberworks"
    namespaced: ClassVar[bool] = True
    short_names: ClassVar[tuple[str, ...]] = ("mwork",)
    printer_columns: ClassVar[tuple[dict[str, object], ...]] = (
        column("Cluster", ".spec.cluster"),
        column("Owner", ".spec.owner"),
        column("Reported", ".status.reportedAt"),
        AGE,
    )

    kind: Literal["MemberWork"] = "MemberWork"
    """The object's kind: `MemberWork`."""
    spec: MemberWorkSpec
    """Written by the controller: the delivery, rendered for the member."""
    status: MemberWorkStatus | None = None
    """Set by the member's agent: how it went."""
