"""Where the controller may connect for a user (ADR 0096): metric sources, webhook gates, the
notification sink and Helm chart repositories refuse link-local, cloud-metadata and unspecified
addresses, also embedded in IPv6 and behind a name, and loopback unless the operator opted in;
the opt-in never opens the others, and it reaches the sandbox workers through the environment."""

from __future__ import annotations

import asyncio
import base64
import sys
from collections.abc import Callable, Sequence

import httpx2
import pytest

from fleetwave.api.sveltos import HelmChart
from fleetwave.controllers import app
from fleetwave.delivery import helmplan
from fleetwave.delivery.content import ContentError
from fleetwave.promapi import guards
from fleetwave.runtime import notify, webhook

LINK_LOCAL = "a link-local or cloud-metadata address"
UNSPECIFIED = "an unspecified address"
LOOPBACK = "a loopback address"

# Address (as written in a URL's host) -> why it is refused, opt-in or not.
NEVER = {
    "169.254.169.254": LINK_LOCAL,
    "[fd00:ec2::254]": LINK_LOCAL,
    "100.100.100.200": LINK_LOCAL,  # Alibaba Cloud's metadata service
    "168.63.129.16": LINK_LOCAL,  # Azure's wireserver
    "0.0.0.0": UNSPECIFIED,
    "0.1.2.3": UNSPECIFIED,
    "[::]": UNSPECIFIED,
    "[::ffff:169.254.169.254]": LINK_LOCAL,  # IPv4-mapped
    "[::ffff:0:a9fe:a9fe]": LINK_LOCAL,  # IPv4-translated (SIIT)
    "[::a9fe:a9fe]": LINK_LOCAL,  # IPv4-compatible
    "[64:ff9b::a9fe:a9fe]": LINK_LOCAL,  # NAT64, the well-known prefix
    "[64:ff9b:1::a9fe:a9fe]": LINK_LOCAL,  # NAT64, a local-use /96 prefix
    "[64:ff9b:1:a9fe:a9:fe00::]": LINK_LOCAL,  # NAT64, a local-use /48 prefix (RFC 6052's layout)
    "[2002:a9fe:a9fe::]": LINK_LOCAL,  # 6to4
    "[2001:0:a9fe:a9fe::]": LINK_LOCAL,  # Teredo, the server's address
    "[2001:0:4136:e378:8000:63bf:5601:5601]": LINK_LOCAL,  # Teredo, the client's (obfuscated) address
    "[::ffff:0.0.0.0]": UNSPECIFIED,
}
# Loopback, however written: refused unless the operator opted in.
LOOPBACKS = ["127.0.0.1", "127.1.2.3", "[::1]", "[::ffff:127.0.0.1]", "[2002:7f00:1::]", "[64:ff9b::7f00:1]"]


def _metric(host: str) -> None:
    guards.endpoint(f"http://{host}:9090", "api/v1/query")


def _webhook(host: str) -> None:
    webhook.endpoint(f"https://{host}/hook?token=x")


def _notification(host: str) -> None:
    url = base64.b64encode(f"https://{host}/services/T0".encode()).decode()
    notify.sink_from_secret({"url": url})


def _helm_repository(host: str) -> None:
    helmplan.chart_source(_chart(f"http://{host}:8879/charts"))


def _helm_registry(host: str) -> None:
    helmplan.chart_source(_chart(f"oci://{host}:5000/charts"))


CALLERS: dict[str, Callable[[str], None]] = {
    "metricSource": _metric,
    "webhook": _webhook,
    "notification": _notification,
    "helm repository": _helm_repository,
    "helm oci registry": _helm_registry,
}
REFUSALS = (guards.Refused, notify.SinkError, ContentError)


def _cases(hosts: Sequence[str]) -> list[tuple[str, str]]:
    """(caller, host) pairs; an oci:// reference cannot hold an IPv6 literal (`_OCI` refuses it)."""
    return [(c, h) for h in hosts for c in CALLERS if not (c == "helm oci registry" and h.startswith("["))]


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


@pytest.fixture
def opted_in(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(guards.ALLOW_LOOPBACK_ENV, "1")


@pytest.fixture(autouse=True)
def _not_opted_in(monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever the process's environment says, each test starts without the opt-in, and what a
    test sets (app.build sets os.environ itself) is undone after it."""
    monkeypatch.setenv(guards.ALLOW_LOOPBACK_ENV, "0")  # recorded, so the teardown restores it
    monkeypatch.delenv(guards.ALLOW_LOOPBACK_ENV)


@pytest.mark.parametrize(("caller", "host"), _cases(list(NEVER)))
def test_link_local_metadata_and_unspecified_addresses_are_refused_everywhere(caller: str, host: str) -> None:
    with pytest.raises(REFUSALS, match=NEVER[host]):
        CALLERS[caller](host)


@pytest.mark.parametrize(("caller", "host"), _cases(LOOPBACKS))
def test_loopback_is_refused_without_the_opt_in(caller: str, host: str) -> None:
    with pytest.raises(REFUSALS, match=f"{LOOPBACK}, contacted only with --allow-loopback-targets"):
        CALLERS[caller](host)


@pytest.mark.usefixtures("opted_in")
@pytest.mark.parametrize(("caller", "host"), _cases(LOOPBACKS))
def test_the_opt_in_allows_loopback(caller: str, host: str) -> None:
    CALLERS[caller](host)


@pytest.mark.usefixtures("opted_in")
@pytest.mark.parametrize(
    ("caller", "host"), _cases(["169.254.169.254", "[::a9fe:a9fe]", "[2002:a9fe:a9fe::]", "0.0.0.0"])
)
def test_the_opt_in_still_refuses_metadata_its_embeddings_and_unspecified(caller: str, host: str) -> None:
    with pytest.raises(REFUSALS, match=NEVER[host]):
        CALLERS[caller](host)


def test_a_refusal_never_shows_the_urls_credentials_path_or_query() -> None:
    with pytest.raises(ContentError) as helm_refused:
        helmplan.chart_source(_chart("https://user:s3cret@127.0.0.1/charts"))
    assert str(helm_refused.value) == (
        "helm chart web: repositoryURL refused: 127.0.0.1 is a loopback address, contacted only with "
        "--allow-loopback-targets"
    )
    with pytest.raises(notify.SinkError) as sink_refused:
        _notification("169.254.169.254")
    assert "T0" not in str(sink_refused.value)
    assert str(sink_refused.value).startswith("key url: 169.254.169.254 is")


# --- after resolution -----------------------------------------------------------------------------


def _resolving_to(monkeypatch: pytest.MonkeyPatch, *addresses: str) -> None:
    monkeypatch.setattr(guards, "_getaddrinfo", lambda _host, _port, _timeout: list(addresses))


@pytest.mark.parametrize(
    "forbidden", ["169.254.169.254", "::a9fe:a9fe", "64:ff9b::a9fe:a9fe", "0.0.0.0", "::"]
)
def test_a_name_is_refused_if_any_address_it_resolves_to_is_forbidden(
    monkeypatch: pytest.MonkeyPatch, forbidden: str
) -> None:
    _resolving_to(monkeypatch, "192.0.2.10", forbidden)
    with pytest.raises(guards.Refused, match=f"prom.example resolves to {forbidden}"):
        guards.resolve_host("prom.example", 80, timeout=5)


def test_a_name_resolving_to_loopback_needs_the_opt_in(monkeypatch: pytest.MonkeyPatch) -> None:
    # The system's resolver: `localhost` and the decimal form of 127.0.0.1 only it decodes.
    for host in ("localhost", "2130706433"):
        with pytest.raises(guards.Refused, match=f"{host} resolves to .*, {LOOPBACK}"):
            guards.resolve_host(host, 80, timeout=5)
    monkeypatch.setenv(guards.ALLOW_LOOPBACK_ENV, "1")
    assert guards.resolve_host("2130706433", 80, timeout=5) == ["127.0.0.1"]
    _resolving_to(monkeypatch, "127.0.0.1", "169.254.169.254")
    with pytest.raises(guards.Refused, match=LINK_LOCAL):
        guards.resolve_host("both.example", 80, timeout=5)


def test_a_name_that_does_not_resolve_is_unresolved_not_forbidden(monkeypatch: pytest.MonkeyPatch) -> None:
    _resolving_to(monkeypatch)
    with pytest.raises(guards.Unresolved, match="resolves to no address"):
        guards.resolve_host("nowhere.example", 80, timeout=5)


async def test_a_notification_to_a_name_resolving_to_metadata_is_never_sent(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    _resolving_to(monkeypatch, "169.254.169.254")
    calls: list[httpx2.Request] = []

    def record(request: httpx2.Request) -> httpx2.Response:
        calls.append(request)
        return httpx2.Response(200)

    sink = notify.Sink("https://hooks.example/services/T0SECRET")
    notifier = notify.Notifier(lambda: sink, transport=httpx2.MockTransport(record))
    notifier.notify(notify.Notification("Failed", "ClusterPromotion", "p", None, "r", "m", _now()))
    await notifier.flush()
    await notifier.close()
    assert (calls, notifier.failed) == ([], 1)
    assert "to https://hooks.example:443 not delivered: refused: hooks.example resolves to" in caplog.text
    assert "T0SECRET" not in caplog.text


async def test_a_webhook_to_a_name_resolving_to_metadata_is_never_called(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _resolving_to(monkeypatch, "192.0.2.10", "::ffff:a9fe:a9fe")
    calls: list[httpx2.Request] = []
    transport = httpx2.MockTransport(lambda r: calls.append(r) or httpx2.Response(200))
    request = webhook.Request("https://gate.example/h", "GET", {}, {}, timeout=2.0, retries=0)
    answer = await webhook.call(request, transport=transport)
    assert calls == []
    assert answer.problem.startswith("refused: gate.example resolves to ::ffff:a9fe:a9fe (embedding")


# --- the opt-in's plumbing ----------------------------------------------------------------------


async def test_a_controller_built_with_the_opt_in_passes_it_to_the_processes_it_starts() -> None:
    manager = app.build(
        object(),  # type: ignore[arg-type]  # nothing is sent while the manager is only built
        app.Settings(helm_binary="helm", leader_election=False, allow_loopback_targets=True),
        handle_signals=False,
    )
    await manager.health_pool.close()  # type: ignore[attr-defined]
    assert guards.loopback_allowed()
    # A sandbox worker is such a process: it runs the metric queries with the same rules.
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        "from fleetwave.promapi import guards; print(guards.loopback_allowed())",
        stdout=asyncio.subprocess.PIPE,
    )
    out, _ = await child.communicate()
    assert out.decode().strip() == "True"


async def test_a_controller_built_without_the_opt_in_keeps_loopback_refused() -> None:
    manager = app.build(
        object(),  # type: ignore[arg-type]
        app.Settings(helm_binary="helm", leader_election=False),
        handle_signals=False,
    )
    await manager.health_pool.close()  # type: ignore[attr-defined]
    assert not guards.loopback_allowed()


def _now() -> notify.dt.datetime:
    return notify.dt.datetime(2026, 11, 25, 8, 0, tzinfo=notify.dt.UTC)
