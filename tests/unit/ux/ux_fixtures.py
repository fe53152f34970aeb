"""Fixture dicts shaped like what the API server returns for a promotion mid-rollout."""

from __future__ import annotations

from typing import Any

HASH = "abc123"


def promotion(*, approved: bool = False, generation: int = 2, observed: int = 2) -> dict[str, Any]:
    return {
        "apiVersion": "fleetwave.io/v1alpha1",
        "kind": "ClusterPromotion",
        "metadata": {"name": "hello", "generation": generation},
        "spec": {
            "stages": [
                {"name": "dev", "trigger": {"auto": {"delay": "30s"}}},
                {"name": "staging", "trigger": {"manual": {"approved": approved, "automaticReset": True}}},
                {"name": "production"},
            ]
        },
        "status": {
            "observedGeneration": observed,
            "currentStageName": "dev",
            "stages": [
                {"name": "dev", "currentStatusDescription": "waiting for delay until 2030-01-01T00:00:30Z"}
            ],
            "conditions": [
                {
                    "type": "Ready",
                    "status": "False",
                    "reason": "Waiting",
                    "message": "dev waits",
                    "lastTransitionTime": "2030-01-01T00:00:00Z",
                },
            ],
            "rollout": {
                "contentHash": HASH,
                "phase": "Waiting",
                "startedAt": "2030-01-01T00:00:00Z",
                "stages": [
                    {
                        "name": "dev",
                        "clusters": ["ns/member-1", "ns/member-4", "ns/member-5"],
                        "phase": "WaitingAfter",
                        "started": ["ns/member-1", "ns/member-4"],
                        "failed": [{"cluster": "ns/member-4", "message": "helm: bad values"}],
                        "startedAt": "2030-01-01T00:00:00Z",
                        "gates": [
                            {
                                "kind": "Delay",
                                "state": "Waiting",
                                "message": "waiting for delay until 2030-01-01T00:00:30Z",
                                "until": "2030-01-01T00:00:30Z",
                            }
                        ],
                    },
                    {"name": "staging", "clusters": ["ns/member-2"], "phase": "Pending", "gates": []},
                    {"name": "production", "clusters": ["ns/member-3"], "phase": "Pending", "gates": []},
                ],
            },
        },
    }


def summary(
    cluster: str,
    *,
    profile: str = "hello-dev",
    content_hash: str = HASH,
    ready: str = "True",
    reason: str = "Provisioned",
    message: str = "deployed and healthy",
) -> dict[str, Any]:
    namespace, _, name = cluster.partition("/")
    return {
        "metadata": {
            "name": f"{profile}-sveltos-{name}",
            "namespace": namespace,
            "labels": {"fleetwave.io/cluster-profile": profile, "fleetwave.io/cluster": name},
        },
        "spec": {"clusterNamespace": namespace, "clusterName": name},
        "status": {
            "observedContentHash": content_hash,
            "conditions": [{"type": "Ready", "status": ready, "reason": reason, "message": message}],
        },
    }
