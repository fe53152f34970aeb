"""`fleetwave approve` run by someone without the approval rights: it says which verb on which
resource it needs (docs/security.md, Approvals) and exits 3, instead of printing a raw 403."""

from __future__ import annotations

from pathlib import Path

from lightkube import Client
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import ServiceAccount
from promotion_support import service_account_kubeconfig
from typer.testing import CliRunner

from fleetwave.cli import app
from fleetwave.local import fleet


def _nobody(local_fleet: fleet.FleetState, management: Client, namespace: str, tmp_path: Path) -> str:
    """A kubeconfig of a ServiceAccount that no role is bound to."""
    management.create(ServiceAccount(metadata=ObjectMeta(name="nobody", namespace=namespace)))
    admin = local_fleet.cluster(fleet.MANAGEMENT).kubeconfig
    path = tmp_path / "nobody.kubeconfig"
    path.write_bytes(service_account_kubeconfig(admin, namespace=namespace, name="nobody"))
    return str(path)


def test_approving_without_the_rights_names_what_is_needed(
    local_fleet: fleet.FleetState, management: Client, namespace: str, tmp_path: Path
) -> None:
    kubeconfig = _nobody(local_fleet, management, namespace, tmp_path)

    promotion = CliRunner().invoke(
        app, ["approve", "promotion", "kyverno", "--stage", "staging", "--kubeconfig", kubeconfig]
    )
    assert promotion.exit_code == 3, promotion.output
    said = " ".join(promotion.output.split())
    assert "not allowed to approve" in said
    assert "clusterpromotions.fleetwave.io" in said
    assert "Traceback" not in said

    run = CliRunner().invoke(
        app, ["approve", "run", "web", "--stage", "prod", "-n", namespace, "--kubeconfig", kubeconfig]
    )
    assert run.exit_code == 3, run.output
    said = " ".join(run.output.split())
    assert "approvalrequests/status" in said
    assert f"in namespace {namespace}" in said


def test_pausing_rolling_back_or_aborting_without_the_rights_names_what_is_needed(
    local_fleet: fleet.FleetState, management: Client, namespace: str, tmp_path: Path
) -> None:
    kubeconfig = _nobody(local_fleet, management, namespace, tmp_path)
    for command, verb in (("pause", "pause"), ("rollback", "roll back"), ("abort", "abort")):
        result = CliRunner().invoke(app, [command, "promotion", "kyverno", "--kubeconfig", kubeconfig])
        assert result.exit_code == 3, result.output
        said = " ".join(result.output.split())
        assert f"not allowed to {verb} ClusterPromotion kyverno" in said
        assert "get and patch on clusterpromotions" in said
        assert "Traceback" not in said
