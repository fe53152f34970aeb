"""`fleetwave cluster list`'s Cluster API rows: read as the controller reads a Cluster, and none
(rather than a failure) where Cluster API is not installed or the user may not list Clusters."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx2
import pytest

from fleetwave.cli import capi_rows


class _Client:
    """Answers every list with `code` (plain text, as an API server that serves no such kind)."""

    def __init__(self, code: int) -> None:
        self.code = code
        self.asked: list[str] = []

    def list(self, resource: Any, namespace: str) -> Iterator[Any]:
        self.asked.append(resource._api_info.resource.version)
        request = httpx2.Request("GET", "https://hub/apis/cluster.x-k8s.io")
        response = httpx2.Response(self.code, text="404 page not found", request=request)
        raise httpx2.HTTPStatusError("refused", request=request, response=response)


@pytest.mark.parametrize("code", [403, 404])
def test_no_rows_where_cluster_api_is_not_served_or_not_listable(code: int) -> None:
    client = _Client(code)
    assert capi_rows.rows(client, "*") == []  # type: ignore[arg-type]
    assert client.asked == ["v1beta2", "v1beta1"]  # the preferred version first, then the older


def test_other_failures_are_not_hidden() -> None:
    with pytest.raises(httpx2.HTTPStatusError):
        capi_rows.rows(_Client(500), "*")  # type: ignore[arg-type]


def test_a_row_says_whether_the_cluster_takes_deliveries_and_why_not() -> None:
    provisioning = {
        "metadata": {"name": "edge", "namespace": "civo", "labels": {"env": "prod"}},
        "spec": {"topology": {"version": "v1.34.1"}},
        "status": {"phase": "Provisioning"},
    }
    row = capi_rows.row(provisioning)
    assert (row["name"], row["mode"], row["ready"], row["version"]) == ("edge", "capi", False, "v1.34.1")
    assert row["kubeconfigSecret"] == "edge-kubeconfig"
    assert row["message"]
    ready = {**provisioning, "status": {"initialization": {"controlPlaneInitialized": True}}}
    assert capi_rows.row(ready)["ready"] is True
