"""The pull-mode agent's member-side install (issue 44): `mgmt.agent_install` renders what
`fleetwave cluster register --pull` prints, and the chart deploy/chart/fleetwave-agent renders the
same objects with the real, pinned `helm template`.

- every container is locked down (non-root, read-only root filesystem, no privilege escalation, no
  capabilities, seccomp RuntimeDefault) and writes only to its /tmp emptyDir;
- the hub kubeconfig reaches the pod only as a whole Secret volume (no value in the Deployment, no
  environment variable, no subPath, which the kubelet would never refresh);
- the default member rights name no impersonate, escalate, bind or wildcard verb, and
  `memberRBAC.rules` (or `rules`) replaces them whole;
- the chart lints clean, its schema refuses what the module refuses (a missing cluster name, a
  malformed rule), and its versions are the package's.

The helm tests need the pinned helm (`FLEETWAVE_BIN_DIR`, or the binaries' cache
~/.cache/fleetwave/bin/*/ that `local.binaries.ensure` fills) and are skipped without it.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

import fleetwave
from fleetwave.mgmt import agent_install as ai

REPO = Path(__file__).resolve().parents[3]
CHART = REPO / "deploy" / "chart" / "fleetwave-agent"
RELEASE = NS = "fleetwave-agent"
REPOSITORY = "registry.example.com/fleetwave"
IMAGE = f"{REPOSITORY}:{fleetwave.__version__}"
CLUSTER, CLUSTER_NS = "prod-eu-1", "team-a"
HUB_KUBECONFIG = b"apiVersion: v1\nkind: Config\nusers:\n- name: hub\n  user: {token: s3cr3t-hub-token}\n"
REQUIRED = (
    "--set",
    f"image.repository={REPOSITORY}",
    "--set",
    f"cluster.name={CLUSTER}",
    "--set",
    f"cluster.namespace={CLUSTER_NS}",
    "--set",
    f"hub.kubeconfig={base64.b64encode(HUB_KUBECONFIG).decode()}",
)
FORBIDDEN_VERBS = {"impersonate", "escalate", "bind", "*"}
CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding"}


def _find_helm() -> str | None:
    override = os.environ.get("FLEETWAVE_BIN_DIR")
    candidates = [Path(override) / "helm"] if override else []
    candidates += sorted((Path.home() / ".cache" / "fleetwave" / "bin").glob("*/helm"), reverse=True)
    return next((str(c) for c in candidates if c.is_file() and os.access(c, os.X_OK)), None)


class Helm:
    """The pinned helm with private homes, rendering and linting this chart offline."""

    def __init__(self, binary: str, home: Path) -> None:
        self.binary = binary
        self.env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(home),
            "HELM_CONFIG_HOME": str(home / "config"),
            "HELM_CACHE_HOME": str(home / "cache"),
            "HELM_DATA_HOME": str(home / "data"),
        }

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            [self.binary, *args], capture_output=True, text=True, env=self.env, timeout=120, check=False
        )
        if check:
            assert proc.returncode == 0, f"helm {' '.join(args)}:\n{proc.stdout}\n{proc.stderr}"
        return proc

    def template(self, *values: str, required: tuple[str, ...] = REQUIRED) -> list[dict[str, Any]]:
        out = self.run("template", RELEASE, str(CHART), "--namespace", NS, *required, *values).stdout
        return [d for d in yaml.safe_load_all(out) if d]

    def refusal(self, *values: str) -> str:
        proc = self.run("template", RELEASE, str(CHART), "--namespace", NS, *values, check=False)
        assert proc.returncode != 0, proc.stdout
        return proc.stderr


@pytest.fixture(scope="module")
def helm(tmp_path_factory: pytest.TempPathFactory) -> Helm:
    binary = _find_helm()
    if binary is None:
        pytest.skip("no pinned helm: set FLEETWAVE_BIN_DIR or build the binaries (tools/binaries/build.sh)")
    return Helm(binary, tmp_path_factory.mktemp("helm"))


def _manifests(**overrides: Any) -> list[dict[str, Any]]:
    args: dict[str, Any] = {
        "cluster": CLUSTER,
        "cluster_namespace": CLUSTER_NS,
        "hub_kubeconfig": HUB_KUBECONFIG,
        "image": IMAGE,
        **overrides,
    }
    return ai.member_manifests(**args)


def _one(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    (doc,) = [d for d in docs if d["kind"] == kind]
    return doc


@pytest.fixture(params=["module", "chart"])
def rendered(request: pytest.FixtureRequest) -> Iterator[list[dict[str, Any]]]:
    """The same install from both sources: every property below holds for each."""
    if request.param == "module":
        yield _manifests()
    else:
        yield request.getfixturevalue("helm").template()


def _containers(pod: dict[str, Any]) -> list[dict[str, Any]]:
    return [*pod.get("initContainers", []), *pod["containers"], *pod.get("ephemeralContainers", [])]


def test_every_container_is_locked_down_and_writes_only_to_its_tmp_volume(
    rendered: list[dict[str, Any]],
) -> None:
    pod = _one(rendered, "Deployment")["spec"]["template"]["spec"]
    pod_sc = pod["securityContext"]
    assert pod["containers"], "no container rendered"
    for container in _containers(pod):
        sc = container["securityContext"]
        effective = {**pod_sc, **sc}  # a container's own setting wins over the pod's
        assert effective["runAsNonRoot"] is True, container["name"]
        assert effective.get("runAsUser", 0) != 0, container["name"]
        assert effective["seccompProfile"] == {"type": "RuntimeDefault"}, container["name"]
        assert sc["readOnlyRootFilesystem"] is True, container["name"]
        assert sc["allowPrivilegeEscalation"] is False, container["name"]
        assert sc.get("privileged", False) is False, container["name"]
        assert sc["capabilities"] == {"drop": ["ALL"]}, container["name"]  # and nothing added
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert env["HOME"] == env["TMPDIR"] == "/tmp"  # helm's homes and temporary files
        mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
        volumes = {v["name"]: v for v in pod["volumes"]}
        assert "emptyDir" in volumes[mounts["/tmp"]]
        assert all(m.get("readOnly") for m in container["volumeMounts"] if m["mountPath"] != "/tmp")
        assert {"limits", "requests"} <= container["resources"].keys()
        assert container["resources"]["limits"]["memory"]
        assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
        assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}
        (port,) = [p for p in container["ports"] if p["name"] == "health"]
        assert f"--health-port={port['containerPort']}" in container["args"]
    assert pod["automountServiceAccountToken"] is True  # the agent uses in-cluster config
    assert pod["serviceAccountName"] == _one(rendered, "ServiceAccount")["metadata"]["name"]


def test_the_hub_kubeconfig_reaches_the_pod_only_as_a_whole_secret_volume(
    rendered: list[dict[str, Any]],
) -> None:
    secret = _one(rendered, "Secret")
    assert secret["type"] == "Opaque"
    assert base64.b64decode(secret["data"][ai.HUB_KEY]) == HUB_KUBECONFIG
    deployment = _one(rendered, "Deployment")
    text = json.dumps(deployment)
    for leaked in (HUB_KUBECONFIG.decode(), "s3cr3t-hub-token", secret["data"][ai.HUB_KEY]):
        assert leaked not in text
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert "envFrom" not in container
    assert not [e for e in container["env"] if "secretKeyRef" in e.get("valueFrom", {})]
    (volume,) = [v for v in pod["volumes"] if "secret" in v]
    assert volume["secret"]["secretName"] == secret["metadata"]["name"]
    assert "items" not in volume["secret"]
    assert volume["secret"]["defaultMode"] & 0o077 == 0o040  # the fsGroup may read, no one else
    (mount,) = [m for m in container["volumeMounts"] if m["name"] == volume["name"]]
    assert "subPath" not in mount  # a subPath mount is never refreshed
    assert "subPathExpr" not in mount
    assert mount["readOnly"] is True
    hub_args = [a for a in container["args"] if a.startswith("--hub-kubeconfig=")]
    assert hub_args == [f"--hub-kubeconfig={mount['mountPath']}/{ai.HUB_KEY}"]
    assert not [a for a in container["args"] if a.startswith("--kubeconfig")]  # in-cluster config
    assert container["args"][:2] == ["agent", "run"]
    assert f"--cluster={CLUSTER}" in container["args"]
    assert f"--cluster-namespace={CLUSTER_NS}" in container["args"]


def test_an_existing_hub_secret_is_mounted_and_the_chart_writes_none(helm: Helm) -> None:
    docs = helm.template(
        "--set",
        "hub.existingSecret=rotated-by-vault",
        "--set",
        "hub.existingSecretKey=hub.yaml",
        required=REQUIRED[:6],
    )
    assert not [d for d in docs if d["kind"] == "Secret"]
    pod = _one(docs, "Deployment")["spec"]["template"]["spec"]
    (volume,) = [v for v in pod["volumes"] if "secret" in v]
    assert volume["secret"]["secretName"] == "rotated-by-vault"
    assert f"--hub-kubeconfig={ai.HUB_MOUNT}/hub.yaml" in pod["containers"][0]["args"]
    both = helm.refusal(*REQUIRED, "--set", "hub.existingSecret=rotated-by-vault")
    assert "not both" in both
    assert "hub.kubeconfig is not set" in helm.refusal(*REQUIRED[:6])


def test_default_member_rules_grant_no_impersonate_escalate_bind_or_wildcard_verb(
    rendered: list[dict[str, Any]],
) -> None:
    rules = _one(rendered, "ClusterRole")["rules"]
    assert rules == ai.DEFAULT_MEMBER_RULES
    for rule in rules:
        assert not set(rule["verbs"]) & FORBIDDEN_VERBS, rule
        assert set(rule["verbs"]) <= set(ai.VERBS), rule
    (urls,) = [r for r in rules if "nonResourceURLs" in r]
    assert urls == {"nonResourceURLs": ["/healthz", "/readyz", "/version"], "verbs": ["get"]}
    (everything,) = [r for r in rules if "resources" in r]
    assert everything["apiGroups"] == everything["resources"] == ["*"]
    assert everything["verbs"] == list(ai.VERBS)
    binding = _one(rendered, "ClusterRoleBinding")
    account = _one(rendered, "ServiceAccount")["metadata"]
    assert binding["roleRef"]["name"] == _one(rendered, "ClusterRole")["metadata"]["name"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": account["name"], "namespace": account["namespace"]}
    ]


NARROW = [
    {"apiGroups": [""], "resources": ["configmaps", "secrets"], "verbs": ["get", "list", "create", "patch"]},
    {"apiGroups": ["apps"], "resources": ["deployments"], "resourceNames": ["web"], "verbs": ["patch"]},
]


def test_member_rbac_rules_replace_the_default_whole(helm: Helm, tmp_path: Path) -> None:
    values = tmp_path / "narrow.yaml"
    values.write_text(yaml.safe_dump({"memberRBAC": {"rules": NARROW}}), encoding="utf-8")
    assert _one(helm.template("-f", str(values)), "ClusterRole")["rules"] == NARROW
    assert _one(_manifests(rules=NARROW), "ClusterRole")["rules"] == NARROW
    # The values file ships the module's default, so an unset value means the same grant.
    shipped = yaml.safe_load((CHART / "values.yaml").read_text(encoding="utf-8"))
    assert shipped["memberRBAC"]["rules"] == ai.DEFAULT_MEMBER_RULES


def test_the_returned_rules_are_copies() -> None:
    before = json.dumps(ai.DEFAULT_MEMBER_RULES)
    _one(_manifests(), "ClusterRole")["rules"][0]["verbs"].append("impersonate")
    given = [dict(NARROW[0], verbs=["get"])]
    _one(_manifests(rules=given), "ClusterRole")["rules"][0]["verbs"].append("escalate")
    assert json.dumps(ai.DEFAULT_MEMBER_RULES) == before
    assert given[0]["verbs"] == ["get"]


BAD_RULES = [
    pytest.param({"apiGroups": [""], "resources": ["pods"]}, id="no-verbs"),
    pytest.param({"apiGroups": [""], "resources": ["pods"], "verbs": []}, id="empty-verbs"),
    pytest.param({"resources": ["pods"], "verbs": ["get"]}, id="no-api-groups"),
    pytest.param({"apiGroups": [""], "verbs": ["get"]}, id="no-resources"),
    pytest.param(
        {"apiGroups": [""], "resources": ["pods"], "nonResourceURLs": ["/x"], "verbs": ["get"]},
        id="resources-and-urls",
    ),
    pytest.param({"nonResourceURLs": ["/x"], "resourceNames": ["a"], "verbs": ["get"]}, id="urls-and-names"),
    pytest.param({"apiGroups": [""], "resources": ["pods"], "verbs": ["get"], "verb": ["x"]}, id="typo"),
    pytest.param({"apiGroups": [""], "resources": "pods", "verbs": ["get"]}, id="not-a-list"),
]


@pytest.mark.parametrize("rule", BAD_RULES)
def test_the_module_refuses_a_malformed_rule(rule: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="rule 1"):
        _manifests(rules=[ai.DEFAULT_MEMBER_RULES[1], rule])


@pytest.mark.parametrize("rule", BAD_RULES)
def test_the_chart_schema_refuses_the_same_malformed_rule(
    helm: Helm, rule: dict[str, Any], tmp_path: Path
) -> None:
    values = tmp_path / "bad.yaml"
    values.write_text(yaml.safe_dump({"memberRBAC": {"rules": [rule]}}), encoding="utf-8")
    assert "/memberRBAC/rules/0" in helm.refusal(*REQUIRED, "-f", str(values))


def test_the_module_refuses_what_the_pod_could_not_use() -> None:
    for bad in ({"cluster": "Prod EU"}, {"cluster": "a" * 254}, {"cluster_namespace": "team.a"}):
        with pytest.raises(ValueError, match="not a valid Kubernetes name"):
            _manifests(**bad)
    with pytest.raises(ValueError, match="hub kubeconfig is empty"):
        _manifests(hub_kubeconfig=b"")
    with pytest.raises(ValueError, match="image"):
        _manifests(image="")


def test_the_namespace_enforces_the_restricted_pod_security_standard() -> None:
    docs = _manifests(namespace="agents")
    namespace = _one(docs, "Namespace")
    assert namespace["metadata"]["name"] == "agents"
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    assert docs[0] is namespace  # applied first: everything else lives in it
    assert {d["metadata"].get("namespace") for d in docs if d["kind"] not in CLUSTER_SCOPED} == {"agents"}


def test_the_chart_renders_what_the_module_prints(helm: Helm) -> None:
    """Release fleetwave-agent in namespace fleetwave-agent: the same objects, names, rules, pod and
    Secret; only Helm's bookkeeping labels differ (and the chart leaves the Namespace to Helm)."""
    chart = {(d["kind"], d["metadata"]["name"]): d for d in helm.template()}
    module = {(d["kind"], d["metadata"]["name"]): d for d in _manifests() if d["kind"] != "Namespace"}
    assert chart.keys() == module.keys()
    for key, ours in module.items():
        theirs = chart[key]
        assert ours["metadata"]["labels"].items() <= theirs["metadata"]["labels"].items(), key
        assert theirs["metadata"].get("namespace") == ours["metadata"].get("namespace"), key
        strip = ("metadata", "spec") if key[0] == "Deployment" else ("metadata",)
        assert {k: v for k, v in theirs.items() if k not in strip} == {
            k: v for k, v in ours.items() if k not in strip
        }, key
    ours, theirs = module["Deployment", ai.NAME]["spec"], chart["Deployment", ai.NAME]["spec"]
    assert theirs["template"]["spec"] == ours["template"]["spec"]
    assert theirs["selector"] == ours["selector"]
    assert theirs["replicas"] == ours["replicas"]
    assert ours["template"]["metadata"]["labels"].items() <= theirs["template"]["metadata"]["labels"].items()


def test_helm_lint_is_clean(helm: Helm) -> None:
    for values in ((), ("--set", "replicaCount=2", "--set", "agent.logFormat=json")):
        out = helm.run("lint", "--strict", str(CHART), *REQUIRED, *values).stdout
        assert "1 chart(s) linted, 0 chart(s) failed" in out, out
        assert not [line for line in out.splitlines() if line.startswith("[")], out  # no INFO/WARNING/ERROR


def test_the_schema_refuses_a_missing_cluster_name_and_unknown_keys(helm: Helm) -> None:
    image = ("--set", f"image.repository={REPOSITORY}")
    hub = ("--set", f"hub.kubeconfig={base64.b64encode(HUB_KUBECONFIG).decode()}")
    assert "/cluster/name" in helm.refusal(*image, *hub)  # the shipped "" is refused
    assert "missing property 'name'" in helm.refusal(*image, *hub, "--set", "cluster.name=null")
    assert "/cluster/name" in helm.refusal(*image, *hub, "--set", "cluster.name=Prod EU")
    assert "clustr" in helm.refusal(*REQUIRED, "--set", "clustr.name=x")
    assert "/hub/kubeconfig" in helm.refusal(
        *image, "--set", f"cluster.name={CLUSTER}", "--set", "hub.kubeconfig=not base64!"
    )
    assert "image.repository is not set" in helm.refusal(*REQUIRED[2:])


def test_values_schema_refuses_unknown_keys_at_every_level_it_describes() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text(encoding="utf-8"))
    values = yaml.safe_load((CHART / "values.yaml").read_text(encoding="utf-8"))

    def check(node: dict[str, Any], value: Any, where: str) -> None:
        if node.get("type") != "object" or "properties" not in node:
            return
        assert node.get("additionalProperties") is False, f"{where or 'values'} accepts typos"
        for key, sub in value.items():
            assert key in node["properties"], f"values.yaml key {where}.{key} is not in the schema"
            check(node["properties"][key], sub, f"{where}.{key}")

    check(schema, values, "")


def test_chart_versions_are_the_package_and_controller_chart_versions() -> None:
    meta = yaml.safe_load((CHART / "Chart.yaml").read_text(encoding="utf-8"))
    controller = yaml.safe_load((CHART.parent / "fleetwave" / "Chart.yaml").read_text(encoding="utf-8"))
    assert meta["version"] == meta["appVersion"] == fleetwave.__version__
    assert (meta["version"], meta["appVersion"]) == (controller["version"], controller["appVersion"])
