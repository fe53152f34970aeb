"""Content and credential boundaries on the real management cluster (ADR 0046).

- a profile referencing fleetwave's own namespace, a non-addon Secret, a member kubeconfig or an
  unsupported source kind is refused in its status (and an Event), never delivered;
- content read from an addon Secret is delivered and pinned into a Secret, not a ConfigMap;
- a hand-made ClusterSummary pushing an existing snapshot is ignored with an Event, not delivered;
- a namespaced MemberCluster naming another namespace's Secret is refused (by the controller, and at
  admission once the ValidatingAdmissionPolicy is installed);
- a MemberCluster whose Secret holds an exec-plugin (or otherwise refused) kubeconfig is Ready=False
  with the reason, the plugin never runs, and the token appears in no log, Event or status.
"""

from __future__ import annotations

import base64
import json
import logging
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from lightkube import ApiError, Client
from lightkube.resources.core_v1 import ConfigMap, Event, Secret
from promotion_support import ControllerThread, registered, running_controller, wait_for

from fleetwave.api import crds
from fleetwave.controllers.fleet import members as member_rules
from fleetwave.controllers.sveltos import content
from fleetwave.controllers.sveltos import summary_status as ss
from fleetwave.kube import kinds, sync_ops
from fleetwave.local import binaries, fleet
from fleetwave.mgmt import install, registration

CONTROLLER_NS = install.NAMESPACE
SECRET_VALUE = f"pw-{uuid.uuid4().hex}"  # Secret content that must never be quoted
TOKEN = f"tok-{uuid.uuid4().hex}"  # a kubeconfig token that must never be shown


@pytest.fixture(scope="module")
def controller(
    local_fleet: fleet.FleetState, management: Client, bins: binaries.Binaries
) -> Iterator[ControllerThread]:
    with (
        registered(management, local_fleet),
        running_controller(local_fleet, bins.path("helm"), "boundaries") as thread,
    ):
        yield thread
    assert thread.error is None, thread.error


@pytest.fixture
def logs(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.DEBUG, logger="fleetwave")
    return caplog


def _manifest(name: str, namespace: str, message: str) -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace},
            "data": {"message": message},
        }
    )


def _b64(text: str | bytes) -> str:
    return base64.b64encode(text.encode() if isinstance(text, str) else text).decode()


def _secret(
    name: str, namespace: str, data: dict[str, str], *, type_: str, labels: Any = None
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
        "type": type_,
        "data": {k: _b64(v) for k, v in data.items()},
    }


def _profile(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "fleetwave.io/v1alpha1",
        "kind": "ClusterProfile",
        "metadata": {"name": name},
        "spec": {"clusterSelector": {"matchLabels": {"env": "dev"}}, **spec},
    }


def _ready(client: Client, kind: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
    obj = client.get(kinds.resource(kind), name, namespace=namespace)
    return next((c for c in (obj.status or {}).get("conditions") or [] if c.get("type") == "Ready"), None)


def _events(client: Client, name: str) -> list[Any]:
    return list(client.list(Event, namespace="*", fields={"involvedObject.name": name}))


def _on_member(member: Client, name: str, namespace: str) -> str | None:
    try:
        return (member.get(ConfigMap, name, namespace=namespace).data or {}).get("message")
    except ApiError as e:
        if e.status.code == 404:
            return None
        raise


def _delete_profile(client: Client, name: str) -> None:
    client.delete(kinds.resource("ClusterProfile"), name)

    def gone() -> bool:
        return not any(
            (s.metadata.labels or {}).get(ss.PROFILE_LABEL) == name
            for s in client.list(kinds.resource("ClusterSummary"), namespace="*")
        )

    wait_for(gone, timeout=90, what=f"summaries of {name} withdrawn")


def _refused(client: Client, name: str) -> dict[str, Any]:
    return wait_for(
        lambda: (c := _ready(client, "ClusterProfile", name)) and c.get("reason") == "InvalidSpec" and c,
        what=f"{name} refused in status",
    )


def test_profiles_reading_outside_the_boundary_are_refused_in_status(
    controller: ControllerThread,
    management: Client,
    members: dict[str, Client],
    namespace: str,
    logs: pytest.LogCaptureFixture,
) -> None:
    # Content a profile must not read: in fleetwave's namespace, an Opaque Secret, a kubeconfig copy.
    sync_ops.apply(
        management,
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": f"own-{namespace}", "namespace": CONTROLLER_NS},
            "data": {"a.yaml": _manifest("leak-own", namespace, "from fleetwave's namespace")},
        },
    )
    sync_ops.apply(
        management,
        _secret(
            "opaque", namespace, {"a.yaml": _manifest("leak-opaque", namespace, SECRET_VALUE)}, type_="Opaque"
        ),
    )
    sync_ops.apply(
        management,
        _secret(
            "kubeconfig-copy",
            namespace,
            {
                "kubeconfig": "apiVersion: v1\nkind: Config\n"
                f"users: [{{name: u, user: {{token: {SECRET_VALUE}}}}}]\n"
            },
            type_=content.ADDON_SECRET_TYPE,
            labels={content.MEMBER_SECRET_LABEL: "member-1"},
        ),
    )
    sync_ops.apply(
        management,
        _secret(
            "broken",
            namespace,
            {
                "a.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n"
                f"data: {{a: *{SECRET_VALUE}}}\n"
            },
            type_=content.ADDON_SECRET_TYPE,
        ),
    )
    member_secret = registration.secret_name("member-1")
    cases = {
        "own": (
            [{"kind": "ConfigMap", "namespace": CONTROLLER_NS, "name": f"own-{namespace}"}],
            "fleetwave's own namespace is never a content source",
        ),
        "default-ns": (
            [{"kind": "ConfigMap", "name": f"own-{namespace}"}],
            "policyRefs[0].namespace: required",
        ),
        "opaque": (
            [{"kind": "Secret", "namespace": namespace, "name": "opaque"}],
            f"has type Opaque; only Secrets of type {content.ADDON_SECRET_TYPE} are content",
        ),
        "kubeconfig": (
            [{"kind": "Secret", "namespace": namespace, "name": "kubeconfig-copy"}],
            "is a member cluster's kubeconfig, never content",
        ),
        "member-secret": (
            [{"kind": "Secret", "namespace": CONTROLLER_NS, "name": member_secret}],
            "fleetwave's own namespace is never a content source",
        ),
        "gitrepository": (
            [{"kind": "GitRepository", "namespace": "flux-system", "name": "repo", "path": "deploy"}],
            "policyRefs[0].kind: GitRepository is a Flux source, read only when the controller runs with "
            "--flux-sources",
        ),
        "broken": (
            [{"kind": "Secret", "namespace": namespace, "name": "broken"}],
            "not valid YAML (invalid YAML at line 4, column",
        ),
    }
    names = {case: f"cb-{case}-{namespace}" for case in cases}
    for case, (refs, _) in cases.items():
        sync_ops.apply(management, _profile(names[case], {"policyRefs": refs}))
    try:
        for case, (_, expected) in cases.items():
            condition = _refused(management, names[case])
            assert expected in condition["message"], (case, condition["message"])
            wait_for(
                lambda n=names[case]: any(e.reason == "InvalidSpec" for e in _events(management, n)),
                what=f"InvalidSpec event of {names[case]}",
            )
        # Nothing reached a member, and no status, Event or log line quotes the Secrets' data.
        for client in members.values():
            for leaked in ("leak-own", "leak-opaque"):
                assert _on_member(client, leaked, namespace) is None
        for name in names.values():
            profile = management.get(kinds.resource("ClusterProfile"), name)
            assert SECRET_VALUE not in json.dumps(profile.status)
            assert all(SECRET_VALUE not in (e.message or "") for e in _events(management, name))
        assert SECRET_VALUE not in logs.text
    finally:
        for name in names.values():
            management.delete(kinds.resource("ClusterProfile"), name)
        management.delete(ConfigMap, f"own-{namespace}", namespace=CONTROLLER_NS)


def test_content_from_an_addon_secret_is_delivered_and_pinned_into_a_secret(
    controller: ControllerThread, management: Client, members: dict[str, Client], namespace: str
) -> None:
    sync_ops.apply(
        management,
        _secret(
            "addon",
            namespace,
            {"a.yaml": _manifest("from-secret", namespace, SECRET_VALUE)},
            type_=content.ADDON_SECRET_TYPE,
        ),
    )
    name = f"cb-addon-{namespace}"
    sync_ops.apply(
        management,
        _profile(name, {"policyRefs": [{"kind": "Secret", "namespace": namespace, "name": "addon"}]}),
    )
    try:
        wait_for(
            lambda: _on_member(members["member-1"], "from-secret", namespace) == SECRET_VALUE, what="delivery"
        )
        summary = management.get(
            kinds.resource("ClusterSummary"), ss.summary_name(name, "member-1"), namespace=CONTROLLER_NS
        )
        snapshot = summary.metadata.annotations[ss.CONTENT_ANNOTATION]
        assert snapshot.startswith(content.SECRET_SNAPSHOT_PREFIX)
        pinned = management.get(Secret, snapshot, namespace=CONTROLLER_NS)
        assert pinned.type == content.SNAPSHOT_SECRET_TYPE
        assert pinned.immutable is True
        # The ConfigMap of that name is only the snapshot's anchor (ADR 0084): empty, owning the Secret.
        anchor = management.get(ConfigMap, snapshot, namespace=CONTROLLER_NS)
        assert not anchor.data, "Secret content was pinned into a ConfigMap"
        assert (anchor.metadata.annotations or {}).get(content.ANCHOR_ANNOTATION) == "Secret"
        assert [o.uid for o in pinned.metadata.ownerReferences or []] == [anchor.metadata.uid]
        assert SECRET_VALUE not in json.dumps(summary.to_dict())
    finally:
        _delete_profile(management, name)
    assert _on_member(members["member-1"], "from-secret", namespace) is None  # withdrawn with the profile


def test_a_hand_made_cluster_summary_is_ignored_with_an_event_and_not_delivered(
    controller: ControllerThread, management: Client, members: dict[str, Client], namespace: str
) -> None:
    # A real snapshot made by a real profile that selects no cluster: what an attacker would push.
    sync_ops.apply(
        management,
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "payload", "namespace": namespace},
            "data": {"a.yaml": _manifest("pushed", namespace, "pushed by hand")},
        },
    )
    name = f"cb-source-{namespace}"
    profile = _profile(
        name, {"policyRefs": [{"kind": "ConfigMap", "namespace": namespace, "name": "payload"}]}
    )
    profile["spec"]["clusterSelector"] = {"matchLabels": {"env": f"none-{namespace}"}}
    sync_ops.apply(management, profile)
    summary_name = f"pushed-{namespace}"
    try:
        status = wait_for(
            lambda: (management.get(kinds.resource("ClusterProfile"), name).status or {}).get(
                "updatingClusters"
            ),
            what="the source profile resolved",
        )
        snapshot = content.SNAPSHOT_PREFIX + status["hash"][:40]
        assert management.get(ConfigMap, snapshot, namespace=CONTROLLER_NS) is not None
        forged = {
            "apiVersion": "fleetwave.io/v1alpha1",
            "kind": "ClusterSummary",
            "metadata": {
                "name": summary_name,
                "namespace": CONTROLLER_NS,
                "labels": {ss.CLUSTER_LABEL: "member-1"},
                "annotations": {ss.CONTENT_ANNOTATION: snapshot, ss.CONTENT_HASH_ANNOTATION: status["hash"]},
            },
            "spec": {"clusterNamespace": CONTROLLER_NS, "clusterName": "member-1", "clusterType": "Sveltos"},
        }
        sync_ops.apply(management, forged)
        condition = wait_for(
            lambda: (
                (c := _ready(management, "ClusterSummary", summary_name, CONTROLLER_NS))
                and c.get("reason") == "NotCreatedByFleetwave"
                and c
            ),
            what="the hand-made summary ignored",
        )
        assert condition["status"] == "False"
        assert "not created by fleetwave" in condition["message"]
        # The Event follows the status write: wait for it rather than race it.
        wait_for(
            lambda: any(
                e.type == "Warning" and e.reason == "NotCreatedByFleetwave"
                for e in _events(management, summary_name)
            ),
            what="the Warning Event on the hand-made summary",
        )
        stored = management.get(kinds.resource("ClusterSummary"), summary_name, namespace=CONTROLLER_NS)
        assert ss.FINALIZER not in (stored.metadata.finalizers or [])
        # The status says the reconcile ran and stopped before delivery: the member has nothing.
        for client in members.values():
            assert _on_member(client, "pushed", namespace) is None
    finally:
        management.delete(kinds.resource("ClusterSummary"), summary_name, namespace=CONTROLLER_NS)
        _delete_profile(management, name)


def _member_cluster(
    name: str, namespace: str, ref: dict[str, Any], annotations: Any = None
) -> dict[str, Any]:
    return {
        "apiVersion": "fleetwave.io/v1alpha1",
        "kind": "MemberCluster",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"env": f"boundary-{namespace}"},  # selected by nothing
            "annotations": annotations or {},
        },
        "spec": {"kubeconfigSecretRef": ref},
    }


def _member_condition(client: Client, name: str, namespace: str, reason: str) -> dict[str, Any]:
    return wait_for(
        lambda: (c := _ready(client, "MemberCluster", name, namespace)) and c.get("reason") == reason and c,
        what=f"MemberCluster {namespace}/{name} {reason}",
    )


def test_a_member_cluster_naming_another_namespace_s_secret_is_refused(
    controller: ControllerThread, management: Client, namespace: str
) -> None:
    other = registration.secret_name("member-1")
    # `fleetwave install` puts an admission policy in front of this rule; without it (an older
    # install, a policy removed by hand) the controller must still refuse.
    _remove_admission_policy(management)
    thief = _member_cluster("thief", namespace, {"name": other, "namespace": CONTROLLER_NS})

    def admitted() -> bool | None:
        try:
            sync_ops.apply(management, thief)
        except ApiError as e:
            if e.status.code in (400, 403, 422):
                return None  # the removed policy is still in force (it stops asynchronously)
            raise
        return True

    wait_for(admitted, what="the admission policy out of force")
    try:
        condition = _member_condition(management, "thief", namespace, member_rules.SECRET_REFUSED)
        assert condition["status"] == "False"
        assert "may only use a kubeconfig Secret in its own namespace" in condition["message"]
        stored = management.get(kinds.resource("MemberCluster"), "thief", namespace=namespace)
        assert stored.status["ready"] is False
        assert stored.status.get("version") is None  # never probed with the borrowed credentials
        # The Event follows the status write: wait for it rather than race it.
        wait_for(
            lambda: any(e.reason == member_rules.SECRET_REFUSED for e in _events(management, "thief")),
            what="the KubeconfigSecretRefused Event",
        )
    finally:
        management.delete(kinds.resource("MemberCluster"), "thief", namespace=namespace)

    # With the admission policy (re)installed, the API server refuses such a MemberCluster outright.
    policy, binding = crds.admission_policies()
    for doc in (policy, binding):
        sync_ops.apply(management, doc)
    try:

        def refused() -> str | None:
            try:
                sync_ops.apply(
                    management,
                    _member_cluster("thief2", namespace, {"name": other, "namespace": CONTROLLER_NS}),
                )
            except ApiError as e:
                return e.status.message if e.status.code in (400, 403, 422) else None
            management.delete(kinds.resource("MemberCluster"), "thief2", namespace=namespace)
            return None  # the policy is not in force yet (it propagates asynchronously)

        message = wait_for(refused, what="the admission policy in force")
        assert "may only use a kubeconfig Secret in its own namespace" in message
        # Its own namespace, written out or left empty, is admitted.
        sync_ops.apply(management, _member_cluster("own", namespace, {"name": "x", "namespace": namespace}))
        sync_ops.apply(management, _member_cluster("implicit", namespace, {"name": "x"}))
    finally:
        for name in ("own", "implicit"):
            try:
                management.delete(kinds.resource("MemberCluster"), name, namespace=namespace)
            except ApiError as e:
                if e.status.code != 404:
                    raise
        # The policy stays: it is part of what `fleetwave install` sets up.


def _remove_admission_policy(management: Client) -> None:
    for resource in (_vap_binding(), _vap()):
        try:
            management.delete(resource, crds.MEMBER_SECRET_POLICY)
        except ApiError as e:
            if e.status.code != 404:
                raise


def _vap() -> Any:
    return kinds.builtin_resource("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy")


def _vap_binding() -> Any:
    return kinds.builtin_resource("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding")


def _kubeconfig(local_fleet: fleet.FleetState, user: dict[str, Any], *, server: str | None = None) -> str:
    """member-1's kubeconfig (its real server and CA) with another user."""
    config = yaml.safe_load(Path(local_fleet.members[0].kubeconfig).read_text(encoding="utf-8"))
    for entry in config["users"]:
        entry["user"] = user
    if server is not None:
        for entry in config["clusters"]:
            entry["cluster"] = {"server": server}
    return yaml.safe_dump(config)


def test_refused_kubeconfigs_are_ready_false_never_run_and_never_shown(
    controller: ControllerThread,
    management: Client,
    local_fleet: fleet.FleetState,
    namespace: str,
    tmp_path: Path,
    logs: pytest.LogCaptureFixture,
) -> None:
    marker = tmp_path / "exec-plugin-ran"
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN, encoding="utf-8")
    credential = json.dumps(
        {
            "apiVersion": "client.authentication.k8s.io/v1",
            "kind": "ExecCredential",
            "status": {"token": TOKEN},
        }
    )
    exec_user = {
        "token": TOKEN,
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": "/bin/sh",
            "args": ["-c", f"touch {marker}; echo '{credential}'"],
            "interactiveMode": "Never",
        },
    }
    texts = {
        "exec": (_kubeconfig(local_fleet, exec_user), "user.exec runs a program"),
        "tokenfile": (
            _kubeconfig(local_fleet, {"tokenFile": str(token_file)}),
            "user.tokenFile reads a local file",
        ),
        "auth-provider": (
            _kubeconfig(local_fleet, {"auth-provider": {"name": "oidc", "config": {"id-token": TOKEN}}}),
            "user.auth-provider",
        ),
        "alias": (f"apiVersion: v1\nkind: Config\nusers: *{TOKEN}\n", "not valid YAML at line 3"),
        "tag": (f"apiVersion: v1\nkind: Config\ntoken: !{TOKEN} x\n", "not valid YAML at line 3"),
        "http": (
            _kubeconfig(local_fleet, {"token": TOKEN}, server="http://127.0.0.1:9"),
            "cluster.server uses http://",
        ),
    }
    for case, (text, _) in texts.items():
        sync_ops.apply(management, _secret(f"kc-{case}", namespace, {"kubeconfig": text}, type_="Opaque"))
        sync_ops.apply(
            management, _member_cluster(case, namespace, {"name": f"kc-{case}", "key": "kubeconfig"})
        )
    try:
        for case, (_, expected) in texts.items():
            condition = _member_condition(management, case, namespace, member_rules.KUBECONFIG_REFUSED)
            assert expected in condition["message"], (case, condition["message"])
            stored = management.get(kinds.resource("MemberCluster"), case, namespace=namespace)
            assert stored.status["ready"] is False
            assert stored.status["connectionStatus"] == "Down"
        wait_for(
            lambda: all(
                any(e.reason == member_rules.KUBECONFIG_REFUSED for e in _events(management, case))
                for case in texts
            ),
            what="a KubeconfigRefused event for each",
        )

        # The visible opt-in accepts the http:// server: then it is probed (and found unreachable).
        patch = {"metadata": {"annotations": {registration.ALLOW_INSECURE_ANNOTATION: "true"}}}
        sync_ops.merge_patch(management, kinds.resource("MemberCluster"), "http", patch, namespace=namespace)
        condition = _member_condition(management, "http", namespace, "APIServerUnreachable")
        assert condition["status"] == "False"

        assert not marker.exists(), "the exec credential plugin ran"
        for case in texts:
            stored = management.get(kinds.resource("MemberCluster"), case, namespace=namespace)
            assert TOKEN not in json.dumps(stored.status), case
            assert all(TOKEN not in (e.message or "") for e in _events(management, case)), case
        assert TOKEN not in logs.text
        assert str(token_file) not in logs.text
        assert controller.error is None
    finally:
        for case in texts:
            management.delete(kinds.resource("MemberCluster"), case, namespace=namespace)
