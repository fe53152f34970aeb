"""The labels Sveltos' own controllers keep on a SveltosCluster, kept by fleetwave too (pure).

Sveltos labels each registered cluster with its Kubernetes version (`projectsveltos.io/k8s-version=
v1.34.2`, the gitVersion without its build suffix) and with `sveltos-agent=present` once its agent
runs there; profiles select on them (`kubectl get sveltoscluster -A --show-labels` in seed 002). The
MemberCluster controller writes them from what its probe read, so an upgraded member is selected by
its new version at its next detailed probe. `sveltos-agent=present` is written for a pull member only
(ADR 0106: fleetwave's agent runs there); a push member runs no agent of fleetwave's, and the label is
never removed (a person may have set it for their own selectors).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

K8S_VERSION_LABEL = "projectsveltos.io/k8s-version"
AGENT_LABEL = "sveltos-agent"
AGENT_PRESENT = "present"

# gitVersion as `/version` reports it: v1.34.2, v1.34.2+k3s1, v1.31.0-gke.1234, 1.30.1-eks-...
_SEMVER = re.compile(r"^v?(\d{1,4})\.(\d{1,4})\.(\d{1,6})")


def version_label(git_version: str | None) -> str | None:
    """`v<major>.<minor>.<patch>` of a gitVersion, None when it does not start with one."""
    found = _SEMVER.match(git_version or "")
    return None if found is None else "v{}.{}.{}".format(*(int(g) for g in found.groups()))


def labels_patch(labels: Mapping[str, str], git_version: str | None, pull: bool) -> dict[str, str]:
    """The labels to set (empty: the member's labels are already what they should be). A version
    that cannot be read leaves the label as it is: an unreachable member keeps its last version."""
    wanted: dict[str, str] = {}
    version = version_label(git_version)
    if version is not None and labels.get(K8S_VERSION_LABEL) != version:
        wanted[K8S_VERSION_LABEL] = version
    if pull and labels.get(AGENT_LABEL) != AGENT_PRESENT:
        wanted[AGENT_LABEL] = AGENT_PRESENT
    return wanted
