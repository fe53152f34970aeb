"""fleetwave's webhook gates (issue 13, ADR 0080): an HTTP(S) call that must answer 2xx (and satisfy
an optional CEL condition over its answer) before a stage promotes.

The same type sits on a ClusterPromotion stage (`spec.stages[].webhooks`) and on a staged update
strategy's stage (`spec.stages[].webhooks`); neither Sveltos nor KubeFleet has the field, so upstream
manifests stay valid.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from fleetwave.api import validation as v
from fleetwave.api.meta import DNSLabel, Duration, Model, cel, validations

MAX_WEBHOOKS = 8
MAX_URL = 2048
MAX_CONDITION = 4096
MAX_TIMEOUT_SECONDS = 30.0
MAX_RETRIES = 5
URL_PATTERN = r"^https?://[^\s@]+$"
CLUSTER_PLACEHOLDER = "${MEMBER-CLUSTER-NAME}"


class WebhookSecretRef(Model):
    """A Secret of type `fleetwave.io/webhook-headers`, by name and namespace."""

    name: DNSLabel = Field(description="The Secret's name.")
    namespace: DNSLabel | None = Field(
        None,
        description="The Secret's namespace. A namespaced StagedUpdateRun reads only its own "
        "namespace (the default there); a cluster-scoped object must name a namespace the "
        "controller watches, never the controller's own.",
    )


class HeadersFrom(Model):
    """Where a webhook's extra request headers come from."""

    secret_ref: WebhookSecretRef = Field(
        description="A Secret of type `fleetwave.io/webhook-headers` whose every key (at most 32) "
        "becomes a request header of that name, its value the header's value; Host, Content-Type, "
        "Content-Length, Transfer-Encoding and Connection cannot be set. Values never appear in a "
        "message, log, Event or status."
    )


class WebhookGate(Model):
    """One HTTP(S) call gating the promotion of a stage once its clusters are delivered."""

    model_config = validations(
        cel(
            "!has(self.perCluster) || !self.perCluster || !has(self.method) || self.method == 'POST' || "
            "self.url.contains('${MEMBER-CLUSTER-NAME}')",
            "a perCluster GET webhook must name the cluster in its url with ${MEMBER-CLUSTER-NAME}",
        )
    )

    name: DNSLabel = Field(description="Names the webhook in status and messages; unique in the stage.")
    url: str = Field(
        max_length=MAX_URL,
        pattern=URL_PATTERN,
        description="An http:// or https:// URL. ${MEMBER-CLUSTER-NAME} is replaced by the cluster's "
        "`namespace/name` for a perCluster webhook. Link-local and cloud-metadata addresses are refused.",
        json_schema_extra={
            "x-kubernetes-validations": [
                cel("isURL(self.replace('${MEMBER-CLUSTER-NAME}', 'x'))", "must be a URL"),
            ]
        },
    )
    method: Literal["GET", "POST"] = Field(
        "POST",
        description="`POST` (the default) sends a JSON body naming the rollout, the stage, the revision "
        "and its clusters (and the cluster, per cluster); `GET` sends no body.",
    )
    per_cluster: bool = Field(
        False,
        description="Call once per cluster of the stage; the gate opens when every call passes, and "
        "with a failureBudget a cluster whose call keeps failing counts against it. Defaults to false: "
        "one call for the whole stage.",
    )
    timeout: Duration = Field(
        "10s",
        description="How long one attempt may take: a duration such as `10s`, at most 30s. Defaults to 10s.",
        json_schema_extra={
            "x-kubernetes-validations": [
                cel(
                    "duration(self) > duration('0s') && duration(self) <= duration('30s')",
                    "must be more than 0s and at most 30s",
                )
            ]
        },
    )
    retries: int = Field(
        2,
        ge=0,
        le=MAX_RETRIES,
        description="Attempts after the first on a timeout, 5xx or 429 (0 to 5). Defaults to 2.",
    )
    interval: Duration = Field(
        "30s",
        description="How long an answer stands before the webhook is called again while the stage "
        "waits: a duration of at least 1s. Defaults to 30s.",
        json_schema_extra={
            "x-kubernetes-validations": [
                cel("duration(self) >= duration('1s')", "must be at least 1s"),
            ]
        },
    )
    success_condition: str | None = Field(
        None,
        max_length=MAX_CONDITION,
        description="A CEL expression over `status` (int) and `body` (the JSON answer, null when "
        "not JSON) that must be true. Omitted: any 2xx answer passes.",
    )
    headers_from: HeadersFrom | None = None
    """Extra request headers, read from a Secret at each call. Omitted: no extra headers."""

    @field_validator("timeout")
    @classmethod
    def _timeout(cls, value: str) -> str:
        seconds = v.duration_seconds(value)
        if not 0 < seconds <= MAX_TIMEOUT_SECONDS:
            raise ValueError("timeout must be more than 0s and at most 30s")
        return value

    @field_validator("interval")
    @classmethod
    def _interval(cls, value: str) -> str:
        if v.duration_seconds(value) < 1:
            raise ValueError("interval must be at least 1s")
        return value

    @model_validator(mode="after")
    def _per_cluster_get(self) -> WebhookGate:
        if self.per_cluster and self.method == "GET" and CLUSTER_PLACEHOLDER not in self.url:
            raise ValueError(
                "a perCluster GET webhook must name the cluster in its url with ${MEMBER-CLUSTER-NAME}"
            )
        return self


UNIQUE_WEBHOOKS_CEL = cel("self.all(x, self.exists_one(y, y.name == x.name))", "webhook names must be unique")


def webhooks_field() -> object:
    """The `webhooks` list of a stage: fleetwave's own, at most MAX_WEBHOOKS, unique names."""
    return Field(
        None,
        max_length=MAX_WEBHOOKS,
        description="A fleetwave extension: HTTP(S) calls that must pass, after the stage's clusters "
        "are delivered, before the stage promotes (at most 8, with unique names).",
        json_schema_extra={"x-kubernetes-validations": [UNIQUE_WEBHOOKS_CEL]},
    )


def check_unique(webhooks: list[WebhookGate] | None) -> None:
    v.check_unique_names([w.name for w in webhooks or []], "webhooks")
