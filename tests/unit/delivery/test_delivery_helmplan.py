"""Pure Helm decisions: chart sources, values, flags, release parsing, idempotency and recovery."""

from __future__ import annotations

import json
from typing import Any

import pytest

from fleetwave.api.sveltos import HelmChart
from fleetwave.delivery import helmplan as hp
from fleetwave.delivery.content import ContentError


def _chart(**fields: Any) -> HelmChart:
    base = {
        "repositoryURL": "https://kyverno.github.io/kyverno/",
        "repositoryName": "kyverno",
        "chartName": "kyverno/kyverno",
        "chartVersion": "3.6.2",
        "releaseName": "kyverno-latest",
        "releaseNamespace": "kyverno",
    }
    return HelmChart.model_validate({**base, **fields})


def test_http_repository_uses_repo_flag_and_the_bare_chart_name() -> None:
    source = hp.chart_source(_chart())
    assert source == hp.ChartSource("kyverno", repo="https://kyverno.github.io/kyverno/", version="3.6.2")
    assert hp.source_flags(source) == ["--repo", "https://kyverno.github.io/kyverno/", "--version", "3.6.2"]
    assert not source.local


@pytest.mark.parametrize(
    ("url", "name", "ref"),
    [
        ("oci://registry.example/charts", "charts/vault", "oci://registry.example/charts/vault"),
        ("oci://registry.example/charts/vault", "vault", "oci://registry.example/charts/vault"),
    ],
)
def test_oci_references_name_the_chart_once(url: str, name: str, ref: str) -> None:
    source = hp.chart_source(_chart(repositoryURL=url, chartName=name))
    assert source.ref == ref
    assert source.repo is None
    assert not source.local


@pytest.mark.parametrize("url", ["/srv/charts/hello", "file:///srv/charts/hello-1.0.0.tgz"])
def test_local_charts_are_paths(url: str) -> None:
    source = hp.chart_source(_chart(repositoryURL=url, chartName=None, chartVersion=None))
    assert source.local
    assert source.ref == url.removeprefix("file://")


@pytest.mark.parametrize("url", ["gitrepository://flux-system/repo/charts", "relative/path"])
def test_unsupported_sources_are_content_errors(url: str) -> None:
    with pytest.raises(ContentError, match="unsupported repositoryURL"):
        hp.chart_source(_chart(repositoryURL=url))


def test_values_from_merge_over_inline_values_key_by_key() -> None:
    chart = _chart(values="admissionController:\n  replicas: 1\n  image: a\nfoo: bar\n")
    merged = hp.desired_values(chart, {"admissionController": {"replicas": 3}, "extra": True})
    assert merged == {"admissionController": {"replicas": 3, "image": "a"}, "foo": "bar", "extra": True}
    assert hp.desired_values(_chart()) == {}


@pytest.mark.parametrize(("values", "message"), [("a: [", "not valid YAML"), ("- 1\n- 2\n", "YAML mapping")])
def test_bad_inline_values_are_content_errors(values: str, message: str) -> None:
    with pytest.raises(ContentError, match=message):
        hp.desired_values(_chart(values=values))


def test_upgrade_argv_is_idempotent_install_with_exact_values() -> None:
    argv = hp.upgrade_argv(_chart(), hp.chart_source(_chart()), "/tmp/v.yaml", dry_run=False)
    assert argv[:2] == ["upgrade", "--install"]
    assert argv[argv.index("--namespace") + 1] == "kyverno"
    # Release and chart come last, after `--`, so neither can be read as an option.
    assert argv[-3:] == ["--", "kyverno-latest", "kyverno"]
    for flag in ("--reset-values", "--create-namespace"):
        assert flag in argv
    assert argv[argv.index("--values") + 1] == "/tmp/v.yaml"
    assert argv[argv.index("--output") + 1] == "json"
    assert "--dry-run=server" not in argv
    assert "--dry-run=server" in hp.upgrade_argv(_chart(), hp.chart_source(_chart()), "v", dry_run=True)


def test_sveltos_options_map_onto_helm_flags() -> None:
    chart = _chart(
        options={
            "wait": True,
            "timeout": "2m",
            "skipCRDs": True,
            "installOptions": {"createNamespace": False},
        }
    )
    flags = hp.option_flags(chart)
    assert flags == ["--wait", "--skip-crds", "--timeout", "2m"]


STATUS = {
    "name": "greeter",
    "namespace": "apps",
    "version": 3,
    "info": {"status": "deployed"},
    "config": {"replicas": 2},
}


def test_status_plus_metadata_parse_into_a_release() -> None:
    metadata = json.dumps({"name": "greeter", "chart": "hello", "version": "1.1.0", "revision": 3})
    release = hp.parse_release(json.dumps(STATUS), metadata)
    assert release == hp.Release("greeter", "apps", 3, "deployed", "hello", "1.1.0", {"replicas": 2})
    upgraded = {**STATUS, "chart": {"metadata": {"name": "hello", "version": "1.0.0"}}}
    assert hp.parse_release(json.dumps(upgraded)).chart_version == "1.0.0"


def test_up_to_date_needs_deployed_status_same_chart_and_identical_values() -> None:
    current = hp.Release("greeter", "apps", 3, "deployed", "hello", "1.1.0", {"replicas": 2, "a": {"b": 1}})
    same = {"a": {"b": 1}, "replicas": 2}
    assert hp.is_up_to_date(current, chart_name="hello", chart_version="1.1.0", values=same)
    assert not hp.is_up_to_date(current, chart_name="hello", chart_version="1.2.0", values=same)
    assert not hp.is_up_to_date(current, chart_name="other", chart_version="1.1.0", values=same)
    assert not hp.is_up_to_date(current, chart_name="hello", chart_version="1.1.0", values={"replicas": 2})
    failed = hp.Release("greeter", "apps", 4, "failed", "hello", "1.1.0", same)
    assert not hp.is_up_to_date(failed, chart_name="hello", chart_version="1.1.0", values=same)
    assert not hp.is_up_to_date(None, chart_name="hello", chart_version="1.1.0", values=same)


def test_recovery_returns_to_the_newest_good_revision_before_the_failure() -> None:
    history = [
        {"revision": 1, "status": "superseded"},
        {"revision": 2, "status": "deployed"},
        {"revision": 3, "status": "failed"},
    ]
    assert hp.last_good_revision(history, below=3) == 2
    assert hp.last_good_revision([{"revision": 1, "status": "failed"}], below=1) is None
    assert hp.last_good_revision([{"revision": 1, "status": "pending-install"}], below=2) is None


def test_unreachable_members_are_told_apart_from_server_refusals() -> None:
    down = (
        'Error: Kubernetes cluster unreachable: Get "https://127.0.0.1:1/version": '
        "dial tcp: connect: connection refused"
    )
    refused = 'Error: UPGRADE FAILED: Deployment.apps "x" is invalid: spec.replicas: Invalid value'
    assert hp.is_unreachable(down)
    assert not hp.is_unreachable(refused)
    assert (
        hp.error_text(refused + "\n")
        == 'UPGRADE FAILED: Deployment.apps "x" is invalid: spec.replicas: Invalid value'
    )
    assert hp.error_text("") == "helm failed without a message"
