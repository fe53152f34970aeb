"""The committed deploy/rbac.yaml is exactly what `fleetwave install` applies (for kubectl users)."""

from __future__ import annotations

from pathlib import Path

import yaml

from fleetwave.mgmt import install

RBAC_FILE = Path(__file__).resolve().parents[2] / "deploy" / "rbac.yaml"
HEADER = (
    "# Least-privilege RBAC for the fleetwave controller (generated from fleetwave.mgmt.rbac;\n"
    "# ADR 0047). Member clusters are reached with the kubeconfigs registered in MemberCluster\n"
    "# Secrets, never with these permissions.\n"
)


def render() -> str:
    return HEADER + yaml.safe_dump_all(install.rbac_documents(), sort_keys=False)


def test_committed_rbac_matches_what_install_applies() -> None:
    assert RBAC_FILE.read_text(encoding="utf-8") == render(), (
        "deploy/rbac.yaml drifted: regenerate it with "
        "`.venv/bin/python -c 'import tests.unit.test_deploy_rbac as t; print(t.render(), end=\"\")' "
        "> deploy/rbac.yaml`"
    )


def test_no_wildcards_and_no_escalation_verbs() -> None:
    for doc in install.rbac_documents():
        for rule in doc.get("rules") or []:
            assert "*" not in rule.get("resources", []), rule
            assert "*" not in rule.get("verbs", []), rule
            assert not {"escalate", "bind", "impersonate"} & set(rule.get("verbs", [])), rule
