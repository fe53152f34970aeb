"""fleetwave's analysis gates (issue 13, ADR 0081): a PromQL query measured every `interval`, each
measurement judged by a CEL `successCondition` over `result`; the gate passes once `count`
measurements were taken with at most `failureLimit` failed, and fails for good past it (the shape
Argo Rollouts' AnalysisTemplate has).

The same type sits on a ClusterPromotion stage (`spec.stages[].analyses`) and on a staged update
strategy's stage (`spec.stages[].analyses`); neither Sveltos nor KubeFleet has the field.
"""

from __future__ import annotations

from pydantic import Field, field_validator, model_validator

from fleetwave.api import validation as v
from fleetwave.api.meta import DNSLabel, Duration, Model, cel, validations
from fleetwave.api.webhooks import CLUSTER_PLACEHOLDER

MAX_ANALYSES = 8
MAX_URL = 2048
MAX_QUERY = 4096
MAX_CONDITION = 4096
MAX_COUNT = 100
URL_PATTERN = r"^https?://[^\s@?#]+$"


class AnalysisPrometheus(Model):
    """The Prometheus server an analysis queries (without credentials)."""

    url: str = Field(
        max_length=MAX_URL,
        pattern=URL_PATTERN,
        description="The Prometheus server: http:// or https://, no credentials, query or fragment. "
        "Link-local and cloud-metadata addresses are refused.",
        json_schema_extra={"x-kubernetes-validations": [cel("isURL(self)", "must be a URL")]},
    )
    path: str = Field(
        "api/v1/query",
        max_length=256,
        pattern=r"^[A-Za-z0-9._~/-]*$",
        description="The instant-query API path under url. Defaults to `api/v1/query`.",
    )


class AnalysisGate(Model):
    """A metric measured repeatedly after the stage's clusters are delivered, before it promotes."""

    model_config = validations(
        cel(
            "(has(self.perCluster) && self.perCluster) || !self.query.contains('${MEMBER-CLUSTER-NAME}')",
            "only a perCluster analysis may use ${MEMBER-CLUSTER-NAME} in its query",
        ),
        cel(
            "!has(self.failureLimit) || !has(self.count) || self.failureLimit < self.count",
            "failureLimit must be less than count",
        ),
    )

    name: DNSLabel = Field(description="Names the analysis in status and messages; unique in the stage.")
    prometheus: AnalysisPrometheus
    """The Prometheus server to query, without credentials."""
    query: str = Field(
        min_length=1,
        max_length=MAX_QUERY,
        description="A PromQL instant query that must answer one number (a scalar or a one-sample "
        "vector). ${MEMBER-CLUSTER-NAME} is replaced by the cluster's `namespace/name` for a perCluster "
        "analysis.",
    )
    success_condition: str = Field(
        min_length=1,
        max_length=MAX_CONDITION,
        description="A CEL expression over `result` (a double) that must be true for a measurement to "
        "succeed, e.g. `result < 0.05`.",
    )
    interval: Duration = Field(
        "30s",
        description="Time between measurements: a duration of at least 1s. Defaults to 30s. The "
        "first measurement is taken as soon as the stage's clusters are delivered.",
        json_schema_extra={
            "x-kubernetes-validations": [cel("duration(self) >= duration('1s')", "must be at least 1s")]
        },
    )
    count: int = Field(3, ge=1, le=MAX_COUNT, description="Measurements to take, 1 to 100. Defaults to 3.")
    failure_limit: int = Field(
        0,
        ge=0,
        le=MAX_COUNT - 1,
        description="Failed measurements tolerated, less than count; one more fails the analysis for "
        "good. A query that cannot be answered (unreachable, not one number, NaN) is a failed "
        "measurement. Defaults to 0.",
    )
    per_cluster: bool = Field(
        False,
        description="Measure once per cluster of the stage: a cluster whose analysis fails counts "
        "against the failureBudget, or holds the stage without one. Defaults to false: one series "
        "for the stage, whose failure fails the rollout when it has a failureBudget or onFailure "
        "Rollback, and otherwise holds the stage.",
    )

    @field_validator("interval")
    @classmethod
    def _interval(cls, value: str) -> str:
        if v.duration_seconds(value) < 1:
            raise ValueError("interval must be at least 1s")
        return value

    @model_validator(mode="after")
    def _shape(self) -> AnalysisGate:
        if not self.per_cluster and CLUSTER_PLACEHOLDER in self.query:
            raise ValueError("only a perCluster analysis may use ${MEMBER-CLUSTER-NAME} in its query")
        if self.failure_limit >= self.count:
            raise ValueError("failureLimit must be less than count")
        return self


UNIQUE_ANALYSES_CEL = cel(
    "self.all(x, self.exists_one(y, y.name == x.name))", "analysis names must be unique"
)


def analyses_field() -> object:
    """The `analyses` list of a stage: fleetwave's own, at most MAX_ANALYSES, unique names."""
    return Field(
        None,
        max_length=MAX_ANALYSES,
        description="A fleetwave extension: Prometheus measurements that must succeed, after the "
        "stage's clusters are delivered, before the stage promotes (at most 8, with unique names).",
        json_schema_extra={"x-kubernetes-validations": [UNIQUE_ANALYSES_CEL]},
    )


def check_unique(analyses: list[AnalysisGate] | None) -> None:
    v.check_unique_names([a.name for a in analyses or []], "analyses")
