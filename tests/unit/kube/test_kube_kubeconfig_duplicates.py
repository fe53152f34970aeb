"""A repeated or dangling name in a member kubeconfig is refused whole, and what clients and helm get
is only the canonical document the policy built from the entries it checked."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fleetwave.delivery.target import CredentialsRefused, MemberTarget
from fleetwave.kube import client as kubeclient
from fleetwave.kube import kubeconfig_policy as policy

TOKEN = "tok-0a1b2c-planted"
GOOD_CLUSTER = {"server": "https://10.0.0.1:6443"}


def _config(**sections: list[dict[str, Any]]) -> dict[str, Any]:
    config: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": GOOD_CLUSTER}],
        "users": [{"name": "u", "user": {"token": TOKEN}}],
        "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "ctx",
    }
    for section, extra in sections.items():
        config[section] = config[section] + extra
    return config


@pytest.mark.parametrize(
    ("section", "entry"),
    [
        # The reviewer's attacks: lightkube reads the last entry of a name, the old check the first.
        ("users", {"name": "u", "user": {"exec": {"apiVersion": "v1", "command": "/bin/sh"}}}),
        ("users", {"name": "u", "user": {"tokenFile": "/var/run/secrets/token"}}),
        ("clusters", {"name": "c", "cluster": {"server": "http://10.0.0.1:8080"}}),
        ("contexts", {"name": "ctx", "context": {"cluster": "c", "user": "u"}}),
    ],
)
def test_a_repeated_name_is_refused_in_every_section(section: str, entry: dict[str, Any]) -> None:
    verdict = policy.check(_config(**{section: [entry]}))
    assert not verdict.ok
    assert any("repeats the name of an earlier entry" in p for p in verdict.problems), verdict.problems
    with pytest.raises(policy.KubeconfigRefused, match=rf"{section}\[1\] repeats"):
        policy.load(json.dumps(_config(**{section: [entry]})))


def test_a_context_naming_an_undefined_cluster_or_user_is_refused_even_when_not_current() -> None:
    stale = {"name": "old", "context": {"cluster": "gone", "user": "nobody"}}
    problems = policy.check(_config(contexts=[stale])).problems
    assert "contexts[1] names a cluster that is not defined in clusters" in problems
    assert "contexts[1] names a user that is not defined in users" in problems


@pytest.mark.parametrize(
    "broken",
    [
        {"users": {"u": {"token": TOKEN}}},
        {"users": [{"user": {"token": TOKEN}}]},
        {"users": [{"name": "u", "user": "token"}]},
        {"clusters": [{"name": "c", "cluster": {"server": "https://h:99999"}}]},
        {"clusters": [{"name": "c", "cluster": {"server": "https://user:pw@h"}}]},
        {"clusters": [{"name": "c", "cluster": {"server": "https://h", "insecure-skip-tls-verify": "no"}}]},
        {"clusters": [{"name": "c", "cluster": {"server": "https://h", "certificate-authority-data": "%%"}}]},
        {"users": [{"name": "u", "user": {"token": "two words"}}]},
        {"users": [{"name": "u", "user": {"token": 42}}]},
        {"users": [{"name": "u", "user": {"exec": {}}}]},
    ],
)
def test_malformed_entries_are_refused_by_the_policy_not_by_a_later_crash(broken: dict[str, Any]) -> None:
    config = _config()
    config.update(broken)
    with pytest.raises(policy.KubeconfigRefused):
        kubeclient.member_config(json.dumps(config))


def test_the_canonical_document_keeps_only_the_checked_fields_of_the_current_entries() -> None:
    config = _config(
        clusters=[{"name": "other", "cluster": {"server": "https://elsewhere"}}],
        users=[{"name": "spare", "user": {"token": "spare-token"}}],
    )
    config["clusters"][0]["cluster"] = {**GOOD_CLUSTER, "extensions": [{"name": "x"}], "tls-server-name": "a"}
    config["contexts"][0]["context"]["namespace"] = "team-a"
    loaded = policy.load(json.dumps(config))
    assert loaded["clusters"] == [{"name": "member", "cluster": GOOD_CLUSTER}]
    assert loaded["users"] == [{"name": "member", "user": {"token": TOKEN}}]
    assert loaded["contexts"] == [
        {"name": "member", "context": {"cluster": "member", "user": "member", "namespace": "team-a"}}
    ]
    assert "spare-token" not in json.dumps(loaded)


def test_certificate_data_that_is_not_pem_is_refused_when_the_client_is_built() -> None:
    config = _config()
    not_pem = {"client-certificate-data": "Q0VSVA==", "client-key-data": "S0VZ"}
    config["users"] = [{"name": "u", "user": not_pem}]
    assert policy.check(config).ok  # base64, so the pure check passes ...
    with pytest.raises(policy.KubeconfigRefused, match="not a valid PEM"):
        kubeclient.member_config(json.dumps(config))  # ... and loading it as TLS material does not


def test_helm_is_given_the_canonical_document_not_the_authors_text() -> None:
    config = _config(users=[{"name": "spare", "user": {"token": "spare-token"}}])
    target = MemberTarget("m1", json.dumps(config).encode())
    with target.kubeconfig_file() as path:
        written = Path(path).read_text()
    assert "spare-token" not in written
    assert json.loads(written)["users"] == [{"name": "member", "user": {"token": TOKEN}}]


def test_helm_never_gets_a_file_for_a_refused_kubeconfig() -> None:
    attack = _config(users=[{"name": "u", "user": {"exec": {"apiVersion": "v1", "command": "/bin/sh"}}}])
    target = MemberTarget("m1", json.dumps(attack).encode())
    with pytest.raises(CredentialsRefused), target.kubeconfig_file():
        pass
