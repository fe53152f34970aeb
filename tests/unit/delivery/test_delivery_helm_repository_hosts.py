"""A chart repository's host is resolved and every address checked before helm is given it (ADR 0096):
a name leading to a link-local, metadata or unspecified address, or to loopback without the
operator's opt-in, fails the release naming `repositoryURL`, and helm never runs. (Address literals
are refused earlier, in `helmplan.chart_source`: test_runtime_outbound_addresses.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from fleetwave.api.sveltos import HelmChart
from fleetwave.delivery import helm
from fleetwave.delivery import helmplan as hp
from fleetwave.delivery.content import ContentError
from fleetwave.delivery.target import MemberTarget
from fleetwave.promapi import guards


def _chart(url: str) -> HelmChart:
    return HelmChart.model_validate(
        {
            "repositoryURL": url,
            "repositoryName": "r",
            "chartName": "r/web",
            "chartVersion": "1.0.0",
            "releaseName": "web",
            "releaseNamespace": "apps",
        }
    )


def _resolving_to(monkeypatch: pytest.MonkeyPatch, *addresses: str) -> list[str]:
    asked: list[str] = []

    def lookup(host: str, _port: int, _timeout: float) -> list[str]:
        asked.append(host)
        return list(addresses)

    monkeypatch.setattr(guards, "_getaddrinfo", lookup)
    return asked


@pytest.fixture(autouse=True)
def _not_opted_in(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(guards.ALLOW_LOOPBACK_ENV, "0")


@pytest.fixture
def helm_session(tmp_path: Path) -> Any:
    """A session whose `helm` only leaves a mark that it ran."""
    script = tmp_path / "helm"
    script.write_text(f"#!/bin/sh\ntouch {tmp_path / 'ran'}\nexit 1\n")
    script.chmod(0o755)
    kubeconfig = tmp_path / "home" / "kubeconfig"
    kubeconfig.parent.mkdir()
    kubeconfig.write_text("{}")
    return helm._Helm(str(script), MemberTarget("m", b"{}"), kubeconfig)


@pytest.mark.parametrize(
    ("url", "resolved", "why"),
    [
        ("https://charts.example/stable", "169.254.169.254", "a link-local or cloud-metadata address"),
        ("http://charts.example:8879/", "::ffff:a9fe:a9fe", "a link-local or cloud-metadata address"),
        ("oci://registry.example/charts", "100.100.100.200", "a link-local or cloud-metadata address"),
        ("oci://registry.example:5000/charts", "127.0.0.1", "a loopback address"),
        ("https://charts.example/stable", "0.0.0.0", "an unspecified address"),
    ],
)
async def test_a_repository_name_leading_to_a_forbidden_address_never_reaches_helm(
    monkeypatch: pytest.MonkeyPatch, helm_session: Any, tmp_path: Path, url: str, resolved: str, why: str
) -> None:
    asked = _resolving_to(monkeypatch, "192.0.2.10", resolved)
    with pytest.raises(ContentError) as refused:
        await helm._install(helm_session, _chart(url), None, False)
    host = url.split("://", 1)[1].split("/", 1)[0].split(":", 1)[0]
    assert asked == [host]
    message = str(refused.value)
    assert message.startswith(f"helm chart web: repositoryURL refused: {host} resolves to {resolved}")
    assert why in message
    assert "\n" not in message
    assert not (tmp_path / "ran").exists()


async def test_a_decimal_host_only_the_resolver_decodes_is_refused_after_resolution() -> None:
    source = hp.chart_source(_chart("oci://2852039166/charts"))  # not an address literal to Python
    with pytest.raises(ContentError, match=r"resolves to 169\.254\.169\.254, a link-local"):
        await helm._check_repository(source, "web")


async def test_the_opt_in_lets_a_repository_on_loopback_through(monkeypatch: pytest.MonkeyPatch) -> None:
    _resolving_to(monkeypatch, "127.0.0.1")
    monkeypatch.setenv(guards.ALLOW_LOOPBACK_ENV, "1")
    await helm._check_repository(hp.chart_source(_chart("http://charts.local:8879/")), "web")


async def test_a_name_that_does_not_resolve_is_left_to_helm_and_a_local_chart_is_not_looked_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked = _resolving_to(monkeypatch)  # no address: helm's own lookup fails and says so
    await helm._check_repository(hp.chart_source(_chart("https://gone.example/charts")), "web")
    assert asked == ["gone.example"]
    await helm._check_repository(hp.chart_source(_chart("/charts/web")), "web")
    assert asked == ["gone.example"]
