"""A member kubeconfig that says `as` makes every client built from it act as that identity."""

from __future__ import annotations

import json
from typing import Any

import pytest

from fleetwave.controllers.fleet import tenancy
from fleetwave.kube import client as kubeclient
from fleetwave.kube import internals, kubeconfig_policy

SERVER = "https://127.0.0.1:1"


def _kubeconfig(**user: Any) -> bytes:
    return json.dumps(
        {
            "current-context": "c",
            "clusters": [{"name": "c", "cluster": {"server": SERVER}}],
            "users": [{"name": "u", "user": {"token": "t0ken", **user}}],
            "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
        }
    ).encode()


ADMIN = tenancy.TenantAdmin("eng", "eng-admin")


async def test_a_tenant_kubeconfig_sends_the_tenants_identity_with_every_request() -> None:
    config = kubeclient.member_config(tenancy.acting_as(_kubeconfig(), ADMIN, allow_insecure=False))
    client = kubeclient.async_client(config)
    try:
        request = internals.raw_http(client).build_request("GET", "/api")
        assert request.headers["Impersonate-User"] == "system:serviceaccount:eng:eng-admin"
        assert request.headers.get_list("Impersonate-Group") == [
            "system:serviceaccounts",
            "system:serviceaccounts:eng",
            "system:authenticated",
        ]
    finally:
        await client.close()
    with kubeclient.client(config) as sync:
        assert internals.raw_sync_http(sync).headers["Impersonate-User"] == ADMIN.username


async def test_a_kubeconfig_without_as_sends_no_impersonation() -> None:
    client = kubeclient.async_client(kubeclient.member_config(_kubeconfig()))
    try:
        assert "Impersonate-User" not in internals.raw_http(client).build_request("GET", "/").headers
    finally:
        await client.close()


def test_the_tenants_identity_replaces_any_the_member_secret_carried() -> None:
    acted = tenancy.acting_as(_kubeconfig(**{"as": "system:admin"}), ADMIN, allow_insecure=False)
    document = kubeconfig_policy.load(acted)
    assert kubeconfig_policy.impersonation(document) == (ADMIN.username, ADMIN.groups)


@pytest.mark.parametrize(
    "user",
    [
        {"as": "x" * 257},
        {"as": "bad\nheader"},
        {"as": " padded"},
        {"as": 7},
        {"as-groups": ["g"]},
        {"as": "u", "as-groups": "g"},
        {"as": "u", "as-groups": [f"g{i}" for i in range(17)]},
    ],
)
def test_impersonation_that_is_not_a_bounded_header_value_is_refused(user: dict[str, Any]) -> None:
    with pytest.raises(kubeconfig_policy.KubeconfigRefused) as refused:
        kubeconfig_policy.load(_kubeconfig(**user))
    assert "user.as" in str(refused.value)


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        ({}, None),
        ({"env": "x"}, None),
        ({tenancy.SA_NAME_LABEL: "eng-admin", tenancy.SA_NAMESPACE_LABEL: "eng"}, ADMIN),
    ],
)
def test_a_profiles_labels_name_its_tenant_admin(labels: dict[str, str], expected: object) -> None:
    assert tenancy.admin_of(labels) == expected


@pytest.mark.parametrize(
    "labels",
    [
        {tenancy.SA_NAME_LABEL: "eng-admin"},
        {tenancy.SA_NAMESPACE_LABEL: "eng"},
        {tenancy.SA_NAME_LABEL: "Eng Admin", tenancy.SA_NAMESPACE_LABEL: "eng"},
        {tenancy.SA_NAME_LABEL: "a", tenancy.SA_NAMESPACE_LABEL: "eng.sub"},
    ],
)
def test_half_a_tenant_admin_or_a_name_no_service_account_has_is_a_refusal(labels: dict[str, str]) -> None:
    assert isinstance(tenancy.admin_of(labels), str)
