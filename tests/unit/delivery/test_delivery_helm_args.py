"""What reaches helm's command line, and what happens to helm when its reconcile goes away.

Names from a profile are validated before helm runs and positional arguments follow `--`; inline
values go through the bounded YAML loader; a cancelled or timed-out helm is killed with its whole
process group and reaped (a fake `helm` script stands in for the binary).
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from fleetwave.api.sveltos import HelmChart
from fleetwave.delivery import egress, helm
from fleetwave.delivery import helmplan as hp
from fleetwave.delivery.content import ContentError
from fleetwave.delivery.target import MemberTarget


def _chart(**fields: Any) -> HelmChart:
    base = {
        "repositoryURL": "https://charts.example/stable",
        "repositoryName": "stable",
        "chartName": "stable/web",
        "chartVersion": "1.2.3",
        "releaseName": "web",
        "releaseNamespace": "apps",
    }
    return HelmChart.model_validate({**base, **fields})


# --- validation -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    ["-rf", "--set=image=evil", "Web", "web_1", "web/1", "a" * 54, "", "web-", ".web", "web\n"],
)
def test_release_names_must_be_dns_1123_of_at_most_53_characters(name: str) -> None:
    with pytest.raises(ContentError, match="releaseName"):
        hp.chart_source(_chart(releaseName=name))


@pytest.mark.parametrize("namespace", ["-n", "--namespace=kube-system", "Apps", "a.b", "a" * 64, "", "a b"])
def test_namespaces_must_be_dns_1123_labels(namespace: str) -> None:
    with pytest.raises(ContentError, match="releaseNamespace"):
        hp.chart_source(_chart(releaseNamespace=namespace))


@pytest.mark.parametrize(
    "chart_name",
    ["--post-renderer=/bin/sh", "../../etc", "stable/../web", "a/b/c", ".hidden", "-web", "w eb"],
)
def test_chart_names_are_plain_names_or_repo_slash_name(chart_name: str) -> None:
    with pytest.raises(ContentError, match="chartName"):
        hp.chart_source(_chart(chartName=chart_name))


@pytest.mark.parametrize(
    "version", ["--devel", "latest", "1.0.0; rm -rf /", "1.2.3.4", "01.2.3", "1.2.3 -", "v", "1.2.3\n"]
)
def test_versions_must_be_semantic_versions_or_constraints(version: str) -> None:
    with pytest.raises(ContentError, match="chartVersion"):
        hp.chart_source(_chart(chartVersion=version))


@pytest.mark.parametrize(
    "version", ["1.2.3", "v1.2.3", "1.2", "1.x", "1.2.*", "^1.2.0", "~1.2", ">=1.0.0 <2.0.0", ">= 1.0, < 2",
                "1.0.0-rc.1+build.5", "1.0.0 || 2.0.0"],
)  # fmt: skip
def test_helm_version_constraints_are_accepted(version: str) -> None:
    assert hp.chart_source(_chart(chartVersion=version)).version == version


@pytest.mark.parametrize(
    ("field", "value", "named"),
    [
        ("repositoryURL", "https://charts.example/a b", "repositoryURL"),
        ("repositoryURL", "oci://registry.example/charts/--insecure", "repositoryURL"),
        ("repositoryURL", "oci://-registry/charts", "repositoryURL"),
        ("options", {"timeout": "--wait"}, "options.timeout"),
        ("options", {"timeout": "5 minutes"}, "options.timeout"),
    ],
)
def test_urls_oci_references_and_timeouts_are_checked(field: str, value: Any, named: str) -> None:
    with pytest.raises(ContentError, match=named):
        hp.chart_source(_chart(**{field: value}))


def test_the_error_names_the_release_and_the_field_and_stays_one_short_line() -> None:
    with pytest.raises(ContentError) as err:
        hp.chart_source(_chart(chartVersion="x" * 5000))
    message = str(err.value)
    assert message.startswith("helm chart web: chartVersion ")
    assert "\n" not in message
    assert len(message) < 200


# --- argument layout --------------------------------------------------------------------------------


def test_upgrade_puts_release_and_chart_after_the_double_dash() -> None:
    chart = _chart(options={"wait": True, "timeout": "90s"})
    argv = hp.upgrade_argv(chart, hp.chart_source(chart), "/tmp/v.yaml", dry_run=True)
    assert argv[:2] == ["upgrade", "--install"]
    assert argv[-3:] == ["--", "web", "web"]
    assert argv.count("--") == 1
    flags = argv[: argv.index("--")]
    assert flags[flags.index("--namespace") + 1] == "apps"
    assert flags[flags.index("--repo") + 1] == "https://charts.example/stable"
    assert flags[flags.index("--version") + 1] == "1.2.3"
    assert flags[flags.index("--values") + 1] == "/tmp/v.yaml"
    assert flags[flags.index("--timeout") + 1] == "90s"
    assert {"--reset-values", "--wait", "--dry-run=server", "--create-namespace"} <= set(flags)


def _fake_helm(tmp_path: Path, body: str) -> str:
    script = tmp_path / "helm"
    script.write_text("#!/bin/sh\n" + body)
    script.chmod(0o755)
    return str(script)


@pytest.fixture
def session(tmp_path: Path) -> Any:
    def make(body: str) -> Any:
        kubeconfig = tmp_path / "home" / "kubeconfig"
        kubeconfig.parent.mkdir(exist_ok=True)
        kubeconfig.write_text("{}")
        return helm._Helm(_fake_helm(tmp_path, body), MemberTarget("m", b"{}"), kubeconfig)

    return make


async def test_the_kubeconfig_flag_goes_before_the_double_dash(session: Any) -> None:
    h = session('for a in "$@"; do echo "$a"; done\n')
    result = await h.run("status", "--namespace", "apps", "--output", "json", "--", "web")
    argv = result.stdout.splitlines()
    assert argv[: argv.index("--")] == [
        "status",
        "--namespace",
        "apps",
        "--output",
        "json",
        "--kubeconfig",
        str(h.kubeconfig),
    ]
    assert argv[argv.index("--") :] == ["--", "web"]


# --- values ---------------------------------------------------------------------------------------


def test_inline_values_use_the_bounded_loader_and_errors_never_quote_them() -> None:
    bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{n}: &{n} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
        for p, n in zip("abcdefgh", "bcdefghi", strict=True)
    )
    with pytest.raises(ContentError, match="values"):
        hp.desired_values(_chart(values=bomb))
    with pytest.raises(ContentError) as err:
        hp.desired_values(_chart(values="password: hunter2-secret\n  bad: [\n"))
    assert "hunter2" not in str(err.value)
    assert "line" in str(err.value)
    with pytest.raises(ContentError, match="values"):
        hp.desired_values(_chart(values="n: !!python/object:os.system x\n"))
    assert hp.desired_values(_chart(values="replicas: 2\nimage: {tag: '1.0'}\n")) == {
        "replicas": 2,
        "image": {"tag": "1.0"},
    }


def test_chart_metadata_is_read_with_the_bounded_loader() -> None:
    assert hp.chart_metadata("apiVersion: v2\nname: web\nversion: 1.2.3\n") == ("web", "1.2.3")
    with pytest.raises(ContentError, match=r"Chart\.yaml"):
        hp.chart_metadata("a: " + "[" * 200 + "]" * 200)
    with pytest.raises(ContentError, match="mapping"):
        hp.chart_metadata("- web\n")


# --- cancellation ---------------------------------------------------------------------------------


def _gone(pid: int) -> bool:
    """Exited (a zombie waiting for a parent that is not us counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


def _wait_gone(pid: int) -> bool:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if _gone(pid):
            return True
        time.sleep(0.05)
    return False


async def _pids(tmp_path: Path) -> tuple[int, int]:
    marker = tmp_path / "pids"
    for _ in range(600):
        if marker.exists() and len(text := marker.read_text().split()) == 2:
            return int(text[0]), int(text[1])
        await asyncio.sleep(0.05)
    pytest.fail("the fake helm did not start")


HANGING = 'sleep 300 &\necho "$$ $!" > "$(dirname "$0")/pids.tmp"; mv "$(dirname "$0")/pids.tmp" "$(dirname "$0")/pids"\nwait\n'  # noqa: E501


async def test_a_cancelled_call_kills_helm_and_its_children_and_reaps_helm(
    session: Any, tmp_path: Path
) -> None:
    h = session(HANGING)
    task = asyncio.create_task(h.run("upgrade", "--install", "--", "web", "web"))
    helm_pid, child_pid = await _pids(tmp_path)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    # helm itself was reaped before the cancellation went on: no such process, not even a zombie.
    assert not os.path.exists(f"/proc/{helm_pid}")  # noqa: ASYNC240 - /proc, instantaneous
    assert _wait_gone(child_pid), "helm's child survived the cancellation"


async def test_a_call_past_its_timeout_is_killed_with_its_group(
    session: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(helm, "_COMMAND_TIMEOUT", 1.0)
    h = session(HANGING)
    result = await h.run("status", "--", "web")
    helm_pid, child_pid = await _pids(tmp_path)
    assert result.code == -1
    assert "timed out" in result.stderr
    assert not os.path.exists(f"/proc/{helm_pid}")  # noqa: ASYNC240 - /proc, instantaneous
    assert _wait_gone(child_pid)


async def test_helm_fetches_through_the_egress_proxy_and_reaches_its_member_directly(tmp_path: Path) -> None:
    kubeconfig = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": "https://10.0.0.7:6443"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }
    target = MemberTarget("m", json.dumps(kubeconfig).encode())
    fake = _fake_helm(tmp_path, 'echo "$HTTPS_PROXY $HTTP_PROXY $NO_PROXY"\n')

    with helm._session(fake, target) as h:
        result = await h.run("version", "--")

    url = egress.shared().url
    assert result.stdout.split() == [url, url, "10.0.0.7"]
