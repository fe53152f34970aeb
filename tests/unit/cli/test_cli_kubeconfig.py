"""Which management cluster a command talks to, as kubectl chooses it: --kubeconfig, a merged
$KUBECONFIG list, ~/.kube/config, and only then a running local fleet, which is said out loud."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import typer

from fleetwave.cli import common, manage
from fleetwave.kube import client as kubeclient


def _doc(cluster: str, server: str, *, current: str | None = None, **extra: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": cluster, "cluster": {"server": server, **extra}}],
        "users": [{"name": f"{cluster}-user", "user": {"token": "t"}}],
        "contexts": [{"name": cluster, "context": {"cluster": cluster, "user": f"{cluster}-user"}}],
    }
    if current:
        doc["current-context"] = current
    return doc


def _write(path: Path, doc: object) -> Path:
    path.write_text(json.dumps(doc) if not isinstance(doc, str) else doc)
    return path


def test_a_kubeconfig_list_is_merged_as_kubectl_merges_it(tmp_path: Path) -> None:
    (tmp_path / "certs").mkdir()
    first = _write(tmp_path / "a.yaml", _doc("one", "https://one.example:6443"))
    second = _write(
        tmp_path / "certs" / "b.yaml",
        {
            **_doc("two", "https://two.example:6443", current="two", **{"certificate-authority": "ca.crt"}),
            "clusters": [
                {"name": "one", "cluster": {"server": "https://shadowed.example"}},
                {
                    "name": "two",
                    "cluster": {"server": "https://two.example:6443", "certificate-authority": "ca.crt"},
                },
            ],
        },
    )
    config = kubeclient.config_from_files([first, second])
    assert config.current_context == "two"  # the first file that sets one
    assert config.clusters["one"].server == "https://one.example:6443"  # the first definition wins
    # A file a kubeconfig names is found beside that kubeconfig.
    assert config.clusters["two"].certificate_auth == str(tmp_path / "certs" / "ca.crt")
    picked = kubeclient.config_from_files([first, second], context="one")
    assert picked.current_context == "one"


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "no clusters or contexts"),
        ("clusters: [\n", "invalid YAML"),
        ("- just\n- a list\n", "not a kubeconfig"),
        (json.dumps(_doc("one", "https://one.example")), "sets no current-context"),
    ],
)
def test_an_empty_or_malformed_kubeconfig_is_a_config_error_naming_the_file(
    tmp_path: Path, text: str, says: str
) -> None:
    path = _write(tmp_path / "kubeconfig", text)
    with pytest.raises(kubeclient.ConfigError, match=says) as raised:
        kubeclient.config_from_file(path)
    assert str(path) in str(raised.value)


def test_kubeconfig_list_from_the_environment_beats_home_and_the_local_fleet(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = _write(tmp_path / "a.yaml", _doc("one", "https://one.example", current="one"))
    b = _write(tmp_path / "b.yaml", _doc("two", "https://two.example"))
    monkeypatch.setenv("KUBECONFIG", f"{a}:{tmp_path / 'missing.yaml'}:{b}")
    monkeypatch.setattr(common.Globals, "kubeconfig", None)
    paths, source = common.kubeconfig_files(None)
    assert (paths, source) == ([a, b], "$KUBECONFIG")  # files that do not exist are skipped


def test_home_kubeconfig_beats_a_running_local_fleet(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = _write(tmp_path / "config", _doc("one", "https://one.example", current="one"))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setattr(common.Globals, "kubeconfig", None)
    monkeypatch.setattr(common, "HOME_KUBECONFIG", home)
    monkeypatch.setattr(common.fleet, "load", lambda _dir: pytest.fail("the local fleet was consulted"))
    assert common.kubeconfig_files(None) == ([home], "~/.kube/config")


def test_the_local_fleet_is_used_only_without_a_kubeconfig_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    local = _write(tmp_path / "local.yaml", _doc("local", "https://127.0.0.1:6443", current="local"))

    class _State:
        def cluster(self, _name: str) -> Any:
            return type("C", (), {"kubeconfig": str(local)})()

    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setattr(common.Globals, "kubeconfig", None)
    monkeypatch.setattr(common, "HOME_KUBECONFIG", tmp_path / "absent")
    monkeypatch.setattr(common.fleet, "load", lambda _dir: _State())
    config = common.management_config(None)
    assert config.current_context == "local"
    assert "using the local fleet's management cluster" in capsys.readouterr().err


def test_the_cli_honours_https_proxy_for_the_management_cluster(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _write(tmp_path / "k.yaml", _doc("one", "https://one.example", current="one"))
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    monkeypatch.setenv("NO_PROXY", "")
    with common.management_client(path) as client:
        session = client._client._client  # the HTTP session lightkube keeps
        mounts = {str(pattern.pattern) for pattern in session._mounts}
    assert any("https" in m for m in mounts), mounts


def test_cluster_rows_and_tables_for_every_output() -> None:
    row = manage._cluster_row(
        {
            "metadata": {"name": "prod-1", "namespace": "fleet", "labels": {"env": "prod"}},
            "spec": {"kubeconfigSecretRef": {"name": "prod-1-creds"}},
            "status": {"ready": True, "version": "v1.35.4"},
        }
    )
    assert row == {
        "namespace": "fleet",
        "name": "prod-1",
        "labels": {"env": "prod"},
        "ready": True,
        "version": "v1.35.4",
        "message": "",
        "mode": "push",
        "kubeconfigSecret": "prod-1-creds",
    }
    narrow = [c.header for c in manage._clusters_table([row], wide=False).columns]
    wide = [c.header for c in manage._clusters_table([row], wide=True).columns]
    assert "kubeconfig secret" in wide
    assert "mode" in wide
    assert "kubeconfig secret" not in narrow
    pulled = manage._cluster_row(
        {"metadata": {"name": "edge", "namespace": "fleet"}, "spec": {"pullMode": True}}
    )
    assert (pulled["mode"], pulled["kubeconfigSecret"]) == ("pull", None)  # the hub holds none


def test_apply_reads_a_directory_and_with_r_its_subdirectories(tmp_path: Path) -> None:
    def cm(name: str) -> str:
        return f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: default}}\n"

    (tmp_path / "nested" / "deeper").mkdir(parents=True)
    (tmp_path / "b.yaml").write_text(cm("b"))
    (tmp_path / "a.yml").write_text(cm("a"))
    (tmp_path / "notes.txt").write_text("not a manifest")
    (tmp_path / "nested" / "c.json").write_text(json.dumps(yaml_free_cm("c")))
    (tmp_path / "nested" / "deeper" / "d.yaml").write_text(cm("d"))

    def names(recursive: bool) -> list[str]:
        return [d["metadata"]["name"] for d in manage._documents(tmp_path, recursive=recursive)]

    assert names(False) == ["a", "b"]
    assert names(True) == ["a", "b", "c", "d"]
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(typer.Exit) as exited:
        manage._documents(empty, recursive=True)
    assert exited.value.exit_code == 2


def yaml_free_cm(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default"}}
