"""Member kubeconfigs: only inline credentials and TLS servers; problems named without values."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from fleetwave.kube import kubeconfig_policy as policy

SECRET = "tok-6f1e9c-very-secret"


def _config(cluster: dict[str, Any] | None = None, user: dict[str, Any] | None = None) -> dict[str, Any]:
    if cluster is None:
        cluster = {"server": "https://10.0.0.1:6443", "certificate-authority-data": "Q0E="}
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": cluster}],
        "users": [{"name": "u", "user": {"token": SECRET} if user is None else user}],
        "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "ctx",
    }


def test_inline_token_and_inline_client_certificates_are_accepted() -> None:
    assert policy.check(_config()).ok
    cert = {"client-certificate-data": "Q0VSVA==", "client-key-data": "S0VZ"}
    assert policy.check(_config(user=cert)).ok
    loaded = policy.load(json.dumps(_config()))
    assert loaded["current-context"] == policy.CANONICAL_NAME
    assert loaded["users"] == [{"name": policy.CANONICAL_NAME, "user": {"token": SECRET}}]


@pytest.mark.parametrize(
    ("user", "expected"),
    [
        ({"exec": {"command": "/bin/sh", "args": ["-c", "id"]}}, "user.exec runs a program"),
        ({"auth-provider": {"name": "oidc"}}, "user.auth-provider runs an auth provider"),
        (
            {"tokenFile": "/var/run/secrets/kubernetes.io/serviceaccount/token"},
            "user.tokenFile reads a local file",
        ),
        ({"client-certificate": "/etc/c.crt", "client-key": "/etc/c.key"}, "user.client-certificate reads"),
        ({"username": "admin", "password": SECRET}, "user.password uses basic auth"),
        ({"client-certificate-data": "Q0VSVA=="}, "must be set together"),
        ({}, "user has no inline credentials"),
    ],
)
def test_credentials_that_run_or_read_something_are_refused(user: dict[str, Any], expected: str) -> None:
    verdict = policy.check(_config(user=user))
    assert not verdict.ok
    assert any(expected in p for p in verdict.problems), verdict.problems


@pytest.mark.parametrize(
    ("cluster", "expected"),
    [
        ({"server": "http://10.0.0.1:8080"}, "http:// (plain text)"),
        ({"server": "https://x", "insecure-skip-tls-verify": True}, "insecure-skip-tls-verify is set"),
        (
            {"server": "https://x", "certificate-authority": "/etc/ca.crt"},
            "certificate-authority reads a local file",
        ),
        ({"server": "https://x", "proxy-url": "http://attacker:3128"}, "proxy-url"),
        ({"server": "ftp://x"}, "must be an https:// URL"),
        ({}, "cluster.server is missing"),
    ],
)
def test_servers_that_are_not_verified_tls_are_refused(cluster: dict[str, Any], expected: str) -> None:
    verdict = policy.check(_config(cluster=cluster))
    assert any(expected in p for p in verdict.problems), verdict.problems


def test_insecure_servers_pass_only_with_an_explicit_opt_in_that_is_reported() -> None:
    plain = _config(cluster={"server": "http://10.0.0.1:8080"})
    assert not policy.check(plain).ok
    verdict = policy.check(plain, allow_insecure=True)
    assert verdict.ok
    assert verdict.insecure
    assert not policy.check(_config(), allow_insecure=True).insecure


def test_broken_structure_is_refused_by_field() -> None:
    no_context = _config()
    no_context["current-context"] = "missing"
    assert "not defined in contexts" in policy.check(no_context).problems[0]
    dangling = copy.deepcopy(_config())
    dangling["contexts"][0]["context"]["user"] = "nobody"
    assert "names a user that is not defined in users" in " ".join(policy.check(dangling).problems)


@pytest.mark.parametrize(
    "data",
    [
        b"\xff\xfe garbage",
        "clusters: [",
        "- just\n- a list",
        json.dumps(_config(user={"token": SECRET, "exec": {"command": SECRET}})),
        json.dumps(_config(cluster={"server": f"http://{SECRET}"})),
        "a: &a [*a]",
    ],
)
def test_refusals_never_quote_the_kubeconfig(data: str | bytes) -> None:
    with pytest.raises(policy.KubeconfigRefused) as caught:
        policy.load(data)
    assert SECRET not in str(caught.value)
    assert str(caught.value).startswith("kubeconfig")
