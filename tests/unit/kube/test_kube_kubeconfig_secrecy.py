"""Malformed and hostile member kubeconfigs: whatever goes wrong, the secret they carry never shows up
in an exception message or a log record (the places that reach status, Events and terminals)."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import pytest

from fleetwave.delivery.target import MemberTarget, MemberUnreachable
from fleetwave.kube import client as kubeclient
from fleetwave.kube import kinds
from fleetwave.mgmt import registration

SECRET = "TOPSECRET-9f3c1e"


def _config(cluster: dict[str, Any], user: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": cluster}],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }


HTTPS = {"server": "https://127.0.0.1:1"}
CASES: dict[str, bytes] = {
    "exec plugin": json.dumps(_config(HTTPS, {"exec": {"command": SECRET}, "token": SECRET})).encode(),
    "token file": json.dumps(_config(HTTPS, {"tokenFile": f"/var/run/{SECRET}"})).encode(),
    "basic auth": json.dumps(_config(HTTPS, {"username": "u", "password": SECRET})).encode(),
    "proxy": json.dumps(_config({**HTTPS, "proxy-url": f"http://{SECRET}:3128"}, {"token": SECRET})).encode(),
    "http server": json.dumps(_config({"server": f"http://{SECRET}.example"}, {"token": SECRET})).encode(),
    "ca file": json.dumps(
        _config({**HTTPS, "certificate-authority": f"/{SECRET}"}, {"token": SECRET})
    ).encode(),
    "bad yaml": f"users: [{{token: {SECRET}\n  - : :".encode(),
    "not a mapping": f"- {SECRET}\n- {SECRET}\n".encode(),
    "binary": b"\xff\xfe" + SECRET.encode() + b"\x00",
    "tab indented": f"users:\n\t- token: {SECRET}\n".encode(),
    "wrong types": json.dumps(
        {"clusters": SECRET, "users": {"token": SECRET}, "current-context": 3}
    ).encode(),
    "missing context": json.dumps({**_config(HTTPS, {"token": SECRET}), "current-context": SECRET}).encode(),
}


def _failures(data: bytes) -> list[str]:
    """Every message the kubeconfig produces on the paths that use a member kubeconfig."""
    out: list[str] = []
    try:
        kubeclient.member_config(data)
    except Exception as e:  # the test is about what any failure says
        out.append(f"{type(e).__name__}: {e}")
    try:
        MemberTarget("ns/m1", data).config()
    except MemberUnreachable as e:
        out.append(str(e))
    out.append(registration.probe(data, timeout=0.5).message)
    out.append(repr(MemberTarget("ns/m1", data)))
    return out


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_refused_kubeconfig_never_reveals_its_secret(case: str, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG):
        messages = _failures(CASES[case])
    assert messages[0]  # it was refused
    for text in [*messages, caplog.text]:
        assert SECRET not in text, f"{case}: {text}"


def test_an_accepted_kubeconfig_of_an_unreachable_member_does_not_reveal_its_token() -> None:
    data = json.dumps(_config(HTTPS, {"token": SECRET})).encode()
    probe = registration.probe(data, timeout=0.5)
    assert not probe.ready
    assert SECRET not in probe.message

    async def session() -> str:
        try:
            async with MemberTarget("ns/m1", data).session() as client:
                await client.get(kinds.resource("MemberCluster"), "x")
        except Exception as e:  # what the delivery path would report
            return str(e)
        return ""

    assert SECRET not in asyncio.run(session())
