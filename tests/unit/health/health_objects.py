"""Object and check builders shared by the health unit tests."""

from __future__ import annotations

from typing import Any

from fleetwave.api.sveltos import ValidateHealth


def check(**fields: Any) -> ValidateHealth:
    base: dict[str, Any] = {"name": "probe", "group": "apps", "version": "v1", "kind": "Deployment"}
    return ValidateHealth.model_validate({**base, **fields})


def deployment(
    name: str,
    *,
    namespace: str = "apps",
    replicas: int = 3,
    available: int | None = 3,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
        "spec": {"replicas": replicas},
    }
    if available is not None:
        obj["status"] = {"availableReplicas": available}
    return obj


def secret(name: str, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace},
        "data": {"tls.crt": "Y2VydA=="},
    }


# The validateHealths script of seed 001 (API form: hs.healthy).
AVAILABLE_SCRIPT = """
function evaluate()
  local hs = {healthy = false, message = "available replicas not matching requested replicas"}
  if obj.status and obj.status.availableReplicas ~= nil
     and obj.status.availableReplicas == obj.spec.replicas then
    hs.healthy = true
  end
  return hs
end
"""

# The postDelayHealthChecks script of seed 001 (docs form: hs.status and 4-argument getResource).
ISSUER_SCRIPT = """
function evaluate()
  hs = {}
  hs.status = "Degraded"
  hs.message = "Missing Secret or ClusterIssuer not ready"
  local secret = getResource("v1", "Secret", "cert-manager", "cloudflare-api-token")
  local issuerReady = false
  if obj.status and obj.status.conditions then
    for _, cond in ipairs(obj.status.conditions) do
      if cond.type == "Ready" and cond.status == "True" then
        issuerReady = true
        break
      end
    end
  end
  if secret and issuerReady then
    hs.status = "Healthy"
    hs.message = "ClusterIssuer and Secret are ready"
  end
  return hs
end
"""
