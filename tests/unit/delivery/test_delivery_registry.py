"""Private chart registries (ADR 0105): which Secrets are credentials and for which host, the files
and flags helm gets, and that a credential never reaches helm's command line, its environment, or
anything helm prints back. A fake `helm` script stands in for the binary where helm's view matters.
"""

from __future__ import annotations

import base64
import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest
import yaml

from fleetwave.api.sveltos import HelmChart
from fleetwave.delivery import helm, registry
from fleetwave.delivery import helmplan as hp
from fleetwave.delivery.registry import RegistryError
from fleetwave.delivery.target import MemberTarget

PASSWORD = "s3cr3t-pa55word-never-shown"
CERT = (
    b"-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIUQ2E=\n-----END CERTIFICATE-----\n"
    b"-----BEGIN CERTIFICATE-----\nMIIBtDCCAVqgAwIBAgIUR2E=\n-----END CERTIFICATE-----\n"
)


def _b64(data: str | bytes) -> str:
    return base64.b64encode(data.encode() if isinstance(data, str) else data).decode()


def _secret(
    type_: str, data: dict[str, str | bytes], annotations: dict[str, str] | None = None
) -> dict[str, Any]:
    return {
        "metadata": {"name": "creds", "namespace": "team", "annotations": annotations or {}},
        "type": type_,
        "data": {k: _b64(v) for k, v in data.items()},
    }


def _docker(auths: dict[str, Any]) -> dict[str, Any]:
    return _secret(registry.DOCKER_CONFIG_TYPE, {registry.DOCKER_CONFIG_KEY: json.dumps({"auths": auths})})


# --- which Secrets, which host ----------------------------------------------------------------------


def test_a_docker_config_gives_only_the_chart_hosts_entry() -> None:
    auth = _b64(f"robot:{PASSWORD}")
    secret = _docker(
        {
            "https://registry.example.com:5000/v1/": {"auth": auth},
            "other.example.com": {"username": "u", "password": "elsewhere"},
        }
    )
    assert registry.credentials(secret, "oci://registry.example.com:5000/charts", key=None) == (
        "robot",
        PASSWORD,
    )
    # The same host on another port, or another host: no entry, and nothing of the Secret is shown.
    for url in ("oci://registry.example.com/charts", "https://evil.example.com/charts"):
        with pytest.raises(RegistryError, match="has no entry for") as err:
            registry.credentials(secret, url, key=None)
        assert PASSWORD not in str(err.value)
        assert "elsewhere" not in str(err.value)
    # An explicit default port is the same host.
    plain = _docker({"charts.example.com:443": {"username": "u", "password": PASSWORD}})
    assert registry.credentials(plain, "https://charts.example.com/stable", key=None) == ("u", PASSWORD)


@pytest.mark.parametrize(
    ("config", "refused"),
    [
        ("{not json", "the docker config is not valid JSON"),
        (json.dumps({"credsStore": "desktop"}), "the docker config has no auths"),
        (json.dumps({"auths": {"r.example": {}}, "credHelpers": {"r.example": "x"}}), "no username"),
        (json.dumps({"auths": {"r.example": {"auth": "!!"}}}), "not base64 of user:password"),
        (
            json.dumps({"auths": {"r.example": {"auth": "a"}, "https://r.example/v2/": {"auth": "b"}}}),
            "more than one entry",
        ),
        ("x" * (registry.MAX_VALUE_BYTES + 1), "larger than"),
    ],
)
def test_a_docker_config_without_one_inline_entry_is_refused_without_quoting_it(
    config: str, refused: str
) -> None:
    secret = _secret(registry.DOCKER_CONFIG_TYPE, {registry.DOCKER_CONFIG_KEY: config})
    with pytest.raises(RegistryError, match=refused) as err:
        registry.credentials(secret, "oci://r.example/charts", key=None)
    assert "team/creds" in str(err.value)
    assert "desktop" not in str(err.value)


def test_key_names_the_docker_config_key_and_only_for_a_docker_config() -> None:
    config = json.dumps({"auths": {"r.example": {"username": "u", "password": PASSWORD}}})
    secret = _secret(registry.DOCKER_CONFIG_TYPE, {"config.json": config})
    assert registry.credentials(secret, "oci://r.example/c", key="config.json") == ("u", PASSWORD)
    with pytest.raises(RegistryError, match=r"has no key \.dockerconfigjson"):
        registry.credentials(secret, "oci://r.example/c", key=None)
    basic = _secret(
        registry.BASIC_AUTH_TYPE,
        {"username": "u", "password": PASSWORD},
        {registry.HOSTS_ANNOTATION: "r.example"},
    )
    with pytest.raises(RegistryError, match=r"key: only for a Secret of type kubernetes\.io/docker"):
        registry.credentials(basic, "oci://r.example/c", key="username")


def test_basic_auth_goes_only_to_the_hosts_its_annotation_names() -> None:
    data: dict[str, str | bytes] = {"username": "u", "password": PASSWORD}
    hosts = {registry.HOSTS_ANNOTATION: " charts.example.com, https://r.example:5000/ "}
    secret = _secret(registry.BASIC_AUTH_TYPE, data, hosts)
    assert registry.credentials(secret, "https://charts.example.com/stable", key=None) == ("u", PASSWORD)
    assert registry.credentials(secret, "oci://r.example:5000/charts", key=None) == ("u", PASSWORD)
    with pytest.raises(RegistryError, match=r"is not for evil\.example\.com"):
        registry.credentials(secret, "https://evil.example.com/stable", key=None)
    # Without the annotation the message says how to fix it, and names the host to write.
    bare = _secret(registry.BASIC_AUTH_TYPE, data)
    with pytest.raises(RegistryError, match=r"annotate it fleetwave.io/registry-hosts=charts.example.com"):
        registry.credentials(bare, "https://charts.example.com/stable", key=None)


@pytest.mark.parametrize(
    "type_", ["Opaque", "addons.projectsveltos.io/cluster-profile", "kubernetes.io/tls", ""]
)
def test_other_secret_types_are_not_credentials(type_: str) -> None:
    secret = _secret(type_, {"username": "u", "password": PASSWORD})
    with pytest.raises(RegistryError, match="read only from Secrets of type") as err:
        registry.credentials(secret, "https://charts.example.com", key=None)
    assert PASSWORD not in str(err.value)


def test_the_ca_must_be_pem_certificates_only() -> None:
    assert registry.ca_bundle(_secret("Opaque", {"ca.crt": CERT})) == CERT
    key = b"-----BEGIN EC PRIVATE KEY-----\nMHcCAQEE\n-----END EC PRIVATE KEY-----\n"
    for bad in (CERT + key, b"hello", key):
        with pytest.raises(RegistryError, match=r"ca\.crt must hold PEM certificates only") as err:
            registry.ca_bundle(_secret("kubernetes.io/tls", {"ca.crt": bad}))
        assert "MHcCAQEE" not in str(err.value)
    with pytest.raises(RegistryError, match=r"has no key ca\.crt"):
        registry.ca_bundle(_secret("Opaque", {"tls.crt": CERT}))


@pytest.mark.parametrize(
    ("url", "options", "refused"),
    [
        ("https://c.example", {"plain_http": True}, "plainHTTP: repositoryURL is https://"),
        ("http://c.example", {"ca": True}, "ca: repositoryURL is http://"),
        ("http://c.example", {"insecure": True}, "insecureSkipTLSVerify: repositoryURL is http://"),
        ("oci://c.example/x", {"plain_http": True, "ca": True}, "plainHTTP: plain HTTP has no TLS"),
        ("oci://c.example/x", {"insecure": True, "ca": True}, "verify with it or skip, not both"),
        ("/charts/web", {"insecure": True}, "only for an oci:// registry or an http"),
    ],
)
def test_options_that_mean_nothing_together_are_refused_by_name(
    url: str, options: dict[str, bool], refused: str
) -> None:
    chosen = {"ca": False, "insecure": False, "plain_http": False, **options}
    with pytest.raises(RegistryError, match=refused):
        registry.check_config(url, where="spec.helmCharts[0].registryCredentialsConfig", **chosen)
    registry.check_config("oci://c.example/x", ca=False, insecure=False, plain_http=True, where="w")
    registry.check_config("http://c.example", ca=False, insecure=False, plain_http=True, where="w")


def test_a_repr_never_shows_the_credential() -> None:
    access = registry.Access("oci://r.example/c", "robot", PASSWORD, CERT)
    assert PASSWORD not in repr(access)
    assert "MIIB" not in repr(access)
    assert PASSWORD not in repr(helm.Private(access, [{"patch": PASSWORD}]))


# --- the files and flags ----------------------------------------------------------------------------


def test_oci_credentials_become_a_registry_config_of_one_host() -> None:
    access = registry.Access("oci://r.example:5000/charts", "robot", PASSWORD)
    files = registry.files(access, "/d")
    assert set(files) == {"registry.json"}
    config = json.loads(files["registry.json"])
    assert config == {"auths": {"r.example:5000": {"auth": _b64(f"robot:{PASSWORD}")}}}
    assert registry.flags(access, "/d") == ["--registry-config", "/d/registry.json"]
    assert registry.flags(access, "/d", index=True) == []


def test_http_credentials_become_a_repositories_file_entry_bound_to_its_host() -> None:
    access = registry.Access("https://c.example/stable", "u", PASSWORD, CERT)
    files = registry.files(access, "/d")
    assert set(files) == {"ca.crt", "repositories.yaml"}
    (entry,) = yaml.safe_load(files["repositories.yaml"])["repositories"]
    assert entry == {
        "name": registry.REPOSITORY_NAME,
        "url": "https://c.example/stable",
        "username": "u",
        "password": PASSWORD,
        "caFile": "/d/ca.crt",
        "insecure_skip_tls_verify": False,
        "pass_credentials_all": False,
    }
    assert registry.flags(access, "/d", index=True) == ["--repository-config", "/d/repositories.yaml"]
    assert registry.flags(access, "/d") == [
        "--repository-config",
        "/d/repositories.yaml",
        "--ca-file",
        "/d/ca.crt",
    ]
    source = hp.ChartSource("web", repo="https://c.example/stable", version="1.0.0")
    named = source.via_repository_file(registry.REPOSITORY_NAME)
    assert (named.ref, hp.source_flags(named), named.local) == (
        f"{registry.REPOSITORY_NAME}/web",
        ["--version", "1.0.0"],
        False,
    )


def _fake_helm(tmp_path: Path) -> str:
    """A helm that prints its argv, its environment, and each file a flag names with its mode."""
    script = tmp_path / "helm"
    script.write_text(
        "#!/bin/sh\n"
        'for a in "$@"; do echo "ARG $a"; done\n'
        'env | sed "s/^/ENV /"\n'
        'prev=""\n'
        'for a in "$@"; do\n'
        '  case "$prev" in --registry-config|--repository-config|--ca-file)\n'
        '    echo "MODE $prev $(stat -c %a "$a") $(stat -c %a "$(dirname "$a")")"; cat "$a"; echo;;\n'
        "  esac\n"
        '  case "$a" in --post-renderer-args=*patches.json) echo "MODE patches $(stat -c %a "${a#*=}")";;\n'
        "  esac\n"
        '  prev="$a"\n'
        "done\n"
        'echo "$(echo \'leak: \' $(grep -h password "$HOME"/run-*/repositories.yaml 2>/dev/null))" >&2\n'
        "exit 3\n"
    )
    script.chmod(0o755)
    return str(script)


async def test_each_option_reaches_helm_as_its_flag_and_files_stay_private(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "home" / "kubeconfig"
    kubeconfig.parent.mkdir()
    kubeconfig.write_text("{}")
    access = registry.Access("oci://r.example/charts", "robot", PASSWORD, CERT, plain_http=False)
    insecure = registry.Access("oci://r.example/charts", "robot", PASSWORD, insecure=True, plain_http=False)
    plain = registry.Access("oci://r.example/charts", plain_http=True)
    for chosen, flag in (
        (access, "--ca-file"),
        (insecure, "--insecure-skip-tls-verify"),
        (plain, "--plain-http"),
    ):
        private = helm.Private(chosen, [{"patch": "x"}], "/bin/kustomize")
        h = helm._Helm(_fake_helm(tmp_path), MemberTarget("m", b"{}"), kubeconfig, private)
        result = await h.run(
            "upgrade", "--install", "--", "web", "oci://r.example/charts/web", fetch="chart", render=True
        )
        args = [line.removeprefix("ARG ") for line in result.stdout.splitlines() if line.startswith("ARG ")]
        assert flag in args[: args.index("--")]
        assert args[-2:] == ["web", "oci://r.example/charts/web"]
        assert "--post-renderer" in args
        assert "MODE patches 600" in result.stdout
        # The credential is only ever in a 0600 file in a 0700 directory: not an argument, not the
        # environment; and removed once helm has exited.
        assert not any(PASSWORD in a for a in args)
        assert not any(PASSWORD in line for line in result.stdout.splitlines() if line.startswith("ENV "))
        if chosen.has_credentials:
            assert "MODE --registry-config 600 700" in result.stdout
            assert _b64(f"robot:{PASSWORD}") not in result.stdout  # scrubbed from what helm printed
        assert [p for p in kubeconfig.parent.iterdir() if p.name.startswith("run-")] == []
    # A command that neither fetches nor renders gets neither files nor flags.
    h = helm._Helm(_fake_helm(tmp_path), MemberTarget("m", b"{}"), kubeconfig, helm.Private(access))
    result = await h.run("status", "--", "web")
    assert "--registry-config" not in result.stdout
    assert "--post-renderer" not in result.stdout


async def test_what_helm_prints_is_scrubbed_of_the_credential(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "home" / "kubeconfig"
    kubeconfig.parent.mkdir()
    kubeconfig.write_text("{}")
    access = registry.Access("https://c.example/stable", "u", PASSWORD)
    h = helm._Helm(_fake_helm(tmp_path), MemberTarget("m", b"{}"), kubeconfig, helm.Private(access))
    result = await h.run("repo", "update", "--", registry.REPOSITORY_NAME, fetch="index")
    assert "password: ***" in result.stderr
    assert PASSWORD not in result.stderr
    assert PASSWORD not in result.stdout
    assert "MODE --repository-config 600 700" in result.stdout
    assert "--ca-file" not in result.stdout  # `helm repo update` reads the CA from the file


def test_post_render_patches_count_for_up_to_date_and_leave_when_removed() -> None:
    chart = HelmChart.model_validate(
        {
            "repositoryURL": "oci://r.example/c",
            "chartVersion": "1.0.0",
            "releaseName": "w",
            "releaseNamespace": "a",
        }
    )
    digest = hp.post_render_digest([{"patch": "p", "target": {"kind": "Deployment"}, "name": "ignored"}])
    assert digest == hp.post_render_digest([{"target": {"kind": "Deployment"}, "patch": "p"}])
    release = hp.Release("w", "a", 1, "deployed", "c", "1.0.0", {}, {hp.POST_RENDER_LABEL: digest})
    same = {"chart_name": "c", "chart_version": "1.0.0", "values": {}}
    assert hp.is_up_to_date(release, **same, post_render=digest)
    assert not hp.is_up_to_date(release, **same, post_render=hp.post_render_digest([{"patch": "q"}]))
    assert not hp.is_up_to_date(release, **same)
    labels = hp.release_labels(None, "", release)
    assert labels == {hp.POST_RENDER_LABEL: "null"}  # helm removes a label set to "null"
    argv = hp.upgrade_argv(chart, hp.chart_source(chart), "/v.yaml", dry_run=True, labels=labels)
    assert argv[argv.index("--labels") + 1] == f"{hp.POST_RENDER_LABEL}=null"
    unlabelled = hp.Release("w", "a", 1, "deployed", "c", "1.0.0", {})
    assert hp.release_labels(None, "", unlabelled) == {}
    assert hp.is_up_to_date(unlabelled, **same)  # releases from before post-rendering are not churned


def test_private_files_are_not_world_readable_even_with_a_loose_umask(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        helm._write_private(tmp_path / "f", b"x")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "f").stat().st_mode) == 0o600


def _recording_helm(tmp_path: Path) -> str:
    """A helm whose `status` finds nothing and whose `upgrade` records its argv and the files its
    flags name, then answers with a deployed release."""
    script = tmp_path / "helm"
    release = json.dumps(
        {
            "name": "web",
            "namespace": "apps",
            "version": 1,
            "info": {"status": "deployed"},
            "chart": {"metadata": {"name": "web", "version": "1.0.0"}},
        }
    )
    script.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = status ]; then echo "Error: release: not found" >&2; exit 1; fi\n'
        'out="$(dirname "$0")/calls"\n'
        'for a in "$@"; do echo "$a" | sed "s#/run-[^/]*/#/RUN/#"; done >> "$out"\n'
        'for a in "$@"; do case "$a" in */run-*/*) f="${a#*=}"\n'
        '  [ -f "$f" ] && echo "FILE $(basename "$f")" >> "$out";; esac; done\n'
        'echo "--- end" >> "$out"\n'
        f"echo '{release}'\n"
    )
    script.chmod(0o755)
    return str(script)


async def test_a_dry_run_gives_helm_the_same_arguments_and_files_as_the_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DryRun (`helm upgrade --dry-run=server`) goes through the same code with the same flags,
    registry files and post-renderer as the real install: what it reports is what install would do."""
    monkeypatch.setenv("FLEETWAVE_ALLOW_LOOPBACK_TARGETS", "1")
    kubeconfig = tmp_path / "home" / "kubeconfig"
    kubeconfig.parent.mkdir()
    kubeconfig.write_text("{}")
    chart = HelmChart.model_validate(
        {
            "repositoryURL": "oci://127.0.0.1:5000/charts",
            "chartName": "web",
            "chartVersion": "1.0.0",
            "releaseName": "web",
            "releaseNamespace": "apps",
        }
    )
    access = registry.Access("oci://127.0.0.1:5000/charts", "robot", PASSWORD, CERT)
    private = helm.Private(access, [{"patch": "p", "target": {"kind": "Deployment"}}], "/bin/kustomize")
    h = helm._Helm(_recording_helm(tmp_path), MemberTarget("m", b"{}"), kubeconfig, private)
    for dry_run in (True, False):
        report = await helm._install(h, chart, None, dry_run)
        assert report.ok, report.error
    planned, done = (c.strip().splitlines() for c in (tmp_path / "calls").read_text().split("--- end")[:2])
    assert [a for a in planned if a != "--dry-run=server"] == done
    assert "--dry-run=server" in planned
    assert {"FILE registry.json", "FILE ca.crt", "FILE patches.json"} <= set(done)
    assert f"{hp.POST_RENDER_LABEL}={hp.post_render_digest(private.patches)}" in ",".join(done)
