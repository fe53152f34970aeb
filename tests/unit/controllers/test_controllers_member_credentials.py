"""Credentials are never a way in (controller side): a MemberCluster uses only its own namespace's
Secret, opts in to insecure servers visibly, and a kubeconfig the policy refuses is reported as
Ready=False with a reason, never probed, never quoted."""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import pytest

from fleetwave.api import families
from fleetwave.controllers.fleet import membercluster, members
from fleetwave.controllers.shared.context import Context
from fleetwave.delivery import sessions
from fleetwave.delivery.target import MemberTarget
from fleetwave.mgmt import registration

T0 = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
TOKEN = "tok-0d9f2a-never-shown"


async def _never_probed(_target: MemberTarget, **_: Any) -> registration.Probe:
    pytest.fail("probed")


def _kubeconfig(user: dict[str, Any] | None = None, server: str = "https://10.0.0.1:6443") -> bytes:
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "c", "cluster": {"server": server}}],
            "users": [{"name": "u", "user": user if user is not None else {"token": TOKEN}}],
            "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
            "current-context": "x",
        }
    ).encode()


def _secret(kubeconfig: bytes, key: str = "kubeconfig") -> dict[str, Any]:
    return {"metadata": {"name": "s"}, "type": "Opaque", "data": {key: base64.b64encode(kubeconfig).decode()}}


def _mc(
    name: str = "m1",
    namespace: str = "team-a",
    ref: dict[str, Any] | None = None,
    annotations: dict[str, str] | None = None,
    status: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return {
        "apiVersion": "fleetwave.io/v1alpha1",
        "kind": "MemberCluster",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "annotations": annotations or {},
            "resourceVersion": "5",
            "generation": 2,
        },
        "spec": {"kubeconfigSecretRef": ref if ref is not None else {"name": "s", "key": "kubeconfig"}},
        "status": status or {},
    }


class _Obj:
    def __init__(self, body: dict[str, Any]) -> None:
        self._body = body
        self.apiVersion = body["apiVersion"]
        self.kind = body["kind"]
        self.metadata = SimpleNamespace(**body["metadata"])

    @property
    def status(self) -> Any:
        return self._body.get("status")

    def to_dict(self) -> dict[str, Any]:
        return self._body


class _Cache:
    """Records every Secret read, so a test can prove a Secret was never read."""

    family = families.NATIVE

    def __init__(self, objects: dict[tuple[str, str, str], dict[str, Any]]) -> None:
        self.objects = objects
        self.reads: list[tuple[str, str, str]] = []

    def has(self, kind: str) -> bool:
        return False  # no Cluster API clusters here

    def obj(self, kind: str, namespace: str | None, name: str) -> Any:
        body = self.objects.get((kind, namespace or "", name))
        return None if body is None else _Obj(body)

    def get(self, kind: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        self.reads.append((kind, namespace or "", name))
        return self.objects.get((kind, namespace or "", name))

    def memo(self, name: str, kind: str, build: Any, *, everywhere: bool = False) -> Any:
        return build()  # nothing kept: every call sees the objects as they are now

    def labelled(self, kind: str, label: str, value: str) -> list[dict[str, Any]]:
        return [
            o for o in self.list(kind) if ((o.get("metadata") or {}).get("labels") or {}).get(label) == value
        ]


@dataclass
class _Client:
    patches: list[Any] = field(default_factory=list)  # status writes
    labelled: list[Any] = field(default_factory=list)  # metadata (registration labels) writes

    async def patch(self, resource: Any, name: str, body: Any, **_: Any) -> None:
        (self.patches if "status" in body else self.labelled).append(body)


class _Ctx(Context):
    async def event(self, obj: Any, warning: bool, reason: str, message: str) -> None:
        self.recorder.append((warning, reason, message))  # type: ignore[attr-defined]


def _ctx(cache: _Cache, client: _Client) -> _Ctx:
    return _Ctx(
        client=client,  # type: ignore[arg-type]
        cache=cache,  # type: ignore[arg-type]
        recorder=[],  # type: ignore[arg-type]
        helm=None,  # type: ignore[arg-type]
        health=None,  # type: ignore[arg-type]
        namespace="fleetwave-system",
        clock=lambda: T0,
    )


def test_a_secret_in_another_namespace_is_refused_and_never_read() -> None:
    mc = _mc(ref={"name": "their-kubeconfig", "namespace": "team-b"})
    cache = _Cache({("Secret", "team-b", "their-kubeconfig"): _secret(_kubeconfig())})
    member = members.from_object(mc)

    assert "may only use a kubeconfig Secret in its own namespace (team-a)" in member.secret_problem
    assert members.secret_of(cache, member) is None
    assert members.target(member, _secret(_kubeconfig())) is None
    found = members.credentials(cache, member)
    assert (found.kubeconfig, found.reason) == (None, members.SECRET_REFUSED)

    cache.objects[("MemberCluster", "team-a", "m1")] = mc
    assert members.target_for(cache, "team-a/m1") is None
    assert ("Secret", "team-b", "their-kubeconfig") not in cache.reads


def test_the_own_namespace_written_out_is_fine() -> None:
    mc = _mc(ref={"name": "s", "namespace": "team-a"})
    cache = _Cache({("Secret", "team-a", "s"): _secret(_kubeconfig()), ("MemberCluster", "team-a", "m1"): mc})
    target = members.target_for(cache, "team-a/m1")
    assert target is not None
    assert target.kubeconfig == _kubeconfig()
    assert not target.allow_insecure


def test_the_insecure_opt_in_is_the_visible_annotation() -> None:
    plain_http = _kubeconfig(server="http://10.0.0.1:8080")
    without = _mc()
    with_opt_in = _mc(annotations={registration.ALLOW_INSECURE_ANNOTATION: "true"})
    cache = _Cache({("Secret", "team-a", "s"): _secret(plain_http)})

    refused = members.credentials(cache, members.from_object(without))
    assert refused.reason == members.KUBECONFIG_REFUSED
    assert "http:// (plain text)" in refused.message

    member = members.from_object(with_opt_in)
    assert member.allow_insecure
    assert members.credentials(cache, member).kubeconfig == plain_http
    target = members.target(member, cache.get("Secret", "team-a", "s"))
    assert target is not None
    assert target.allow_insecure  # MemberTarget.config() applies the same opt-in


@pytest.mark.parametrize(
    ("user", "field_named"),
    [
        ({"exec": {"command": "/bin/sh", "args": ["-c", f"touch /tmp/x; echo {TOKEN}"]}}, "user.exec"),
        ({"tokenFile": "/var/run/secrets/kubernetes.io/serviceaccount/token"}, "user.tokenFile"),
        ({"auth-provider": {"name": "oidc", "config": {"id-token": TOKEN}}}, "user.auth-provider"),
    ],
)
def test_a_refused_kubeconfig_names_the_field_never_the_value(user: dict[str, Any], field_named: str) -> None:
    cache = _Cache({("Secret", "team-a", "s"): _secret(_kubeconfig(user))})
    found = members.credentials(cache, members.from_object(_mc()))
    assert found.kubeconfig is None
    assert found.reason == members.KUBECONFIG_REFUSED
    assert field_named in found.message
    assert TOKEN not in found.message
    assert "/bin/sh" not in found.message


@pytest.mark.parametrize(
    "text",
    [f"users: *{TOKEN}\n", f"token: !{TOKEN} x\n", f"a: [\n  {TOKEN}: : :\n", "\x00binary"],
)
def test_an_unreadable_kubeconfig_is_refused_by_line_and_column_only(text: str) -> None:
    cache = _Cache({("Secret", "team-a", "s"): _secret(text.encode())})
    found = members.credentials(cache, members.from_object(_mc()))
    assert found.reason == members.KUBECONFIG_REFUSED
    assert TOKEN not in found.message


def test_a_missing_secret_or_key_is_missing_not_refused() -> None:
    member = members.from_object(_mc())
    assert members.credentials(_Cache({}), member).reason == members.KUBECONFIG_MISSING
    other_key = _Cache({("Secret", "team-a", "s"): _secret(_kubeconfig(), key="value")})
    assert members.credentials(other_key, member).reason == members.KUBECONFIG_MISSING
    not_base64 = _Cache({("Secret", "team-a", "s"): {"data": {"kubeconfig": "%%%"}}})
    assert members.credentials(not_base64, member).reason == members.KUBECONFIG_MISSING


async def test_a_refused_kubeconfig_is_ready_false_with_its_reason_an_event_and_no_probe(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    probed: list[bytes] = []

    async def probe(target: MemberTarget, **_: Any) -> registration.Probe:
        probed.append(target.kubeconfig)
        return registration.Probe(True, "v1.35.4", "API server ready")

    monkeypatch.setattr(registration, "probe_pooled", probe)
    exec_user = {"exec": {"command": "/bin/sh", "args": ["-c", f"echo {TOKEN}"]}}
    mc = _mc(status={"ready": True, "connectionStatus": "Healthy", "version": "v1.35.0"})
    cache = _Cache(
        {("MemberCluster", "team-a", "m1"): mc, ("Secret", "team-a", "s"): _secret(_kubeconfig(exec_user))}
    )
    client = _Client()
    ctx = _ctx(cache, client)

    await membercluster.reconcile(ctx, "team-a/m1")

    assert probed == []  # nothing reached the member: the exec plugin could not have run
    (patch,) = client.patches
    status = patch["status"]
    assert status["ready"] is False
    assert status["connectionStatus"] == "Down"
    assert "user.exec runs a program" in status["failureMessage"]
    (condition,) = status["conditions"]
    assert condition["type"] == "Ready"
    assert condition["status"] == "False"
    assert condition["reason"] == members.KUBECONFIG_REFUSED
    assert condition["lastTransitionTime"] == "2026-11-22T10:00:00Z"
    assert ctx.recorder == [(True, members.KUBECONFIG_REFUSED, status["failureMessage"])]  # type: ignore[attr-defined]
    assert TOKEN not in json.dumps(patch)
    assert TOKEN not in json.dumps(ctx.recorder)  # type: ignore[attr-defined]


async def test_a_foreign_secret_reference_is_reported_without_reading_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(registration, "probe_pooled", _never_probed)
    mc = _mc(ref={"name": "their-kubeconfig", "namespace": "team-b"})
    cache = _Cache(
        {
            ("MemberCluster", "team-a", "m1"): mc,
            ("Secret", "team-b", "their-kubeconfig"): _secret(_kubeconfig()),
        }
    )
    client = _Client()
    ctx = _ctx(cache, client)

    await membercluster.reconcile(ctx, "team-a/m1")

    (condition,) = client.patches[0]["status"]["conditions"]
    assert condition["reason"] == members.SECRET_REFUSED
    assert ("Secret", "team-b", "their-kubeconfig") not in cache.reads
    assert [r for _, r, _ in ctx.recorder] == [members.SECRET_REFUSED]  # type: ignore[attr-defined]


async def test_an_accepted_kubeconfig_is_probed_with_the_opt_in(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[bytes, bool]] = []

    async def probe(target: MemberTarget, **_: Any) -> registration.Probe:
        calls.append((target.kubeconfig, target.allow_insecure))
        return registration.Probe(True, "v1.35.4", "API server ready")

    monkeypatch.setattr(registration, "probe_pooled", probe)
    config = _kubeconfig(server="http://10.0.0.1:8080")
    mc = _mc(annotations={registration.ALLOW_INSECURE_ANNOTATION: "true"})
    cache = _Cache({("MemberCluster", "team-a", "m1"): mc, ("Secret", "team-a", "s"): _secret(config)})
    client = _Client()
    ctx = _ctx(cache, client)

    await membercluster.reconcile(ctx, "team-a/m1")

    assert calls == [(config, True)]
    status = client.patches[0]["status"]
    assert (status["ready"], status["version"], status["conditions"][0]["reason"]) == (
        True,
        "v1.35.4",
        membercluster.REACHABLE,
    )


@pytest.mark.parametrize(
    "spec",
    [
        {"consecutiveFailureThreshold": 3},
        {"livenessChecks": [{"name": "x"}]},
    ],
)
async def test_a_member_field_fleetwave_does_not_act_on_keeps_it_unused_and_says_which(
    monkeypatch: pytest.MonkeyPatch, spec: dict[str, Any]
) -> None:
    monkeypatch.setattr(registration, "probe_pooled", _never_probed)
    mc = _mc(status={"ready": True})
    mc["spec"] = {**mc.get("spec", {}), **spec}
    cache = _Cache({("MemberCluster", "team-a", "m1"): mc, ("Secret", "team-a", "s"): _secret(_kubeconfig())})
    client = _Client()
    ctx = _ctx(cache, client)

    await membercluster.reconcile(ctx, "team-a/m1")

    status = client.patches[0]["status"]
    assert status["ready"] is False  # never delivered to as if the field were in force
    (condition,) = status["conditions"]
    assert condition["reason"] == membercluster.UNSUPPORTED
    assert condition["message"] == f"spec.{next(iter(spec))}: not supported by fleetwave yet"


def test_pull_mode_false_and_kubefleet_agent_fields_are_accepted() -> None:
    mc = _mc()
    mc["spec"] = {**mc.get("spec", {}), "pullMode": False, "identity": {"kind": "ServiceAccount"}}
    mc["spec"]["heartbeatPeriodSeconds"] = 60
    assert members.unhonoured(mc) == ""


def test_a_paused_member_stays_in_the_fleet_but_is_not_delivered_to() -> None:
    paused = _mc(status={"ready": True})
    paused["spec"] = {**paused.get("spec", {}), "paused": True}
    fleet = members.fleet(
        [members.from_object(paused), members.from_object(_mc(name="m2", status={"ready": True}))]
    )
    ready = {name: c.ready for name, c in fleet.by_name.items()}
    assert ready == {"team-a/m1": False, "team-a/m2": True}


async def test_outside_its_active_window_a_member_is_not_ready_and_wakes_when_it_opens(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(registration, "probe_pooled", _never_probed)
    mc = _mc(status={"ready": True})  # T0 is 10:00 UTC: the window opens at 10:30
    mc["spec"] = {**mc.get("spec", {}), "activeWindow": {"from": "30 10 * * *", "to": "0 18 * * *"}}
    cache = _Cache({("MemberCluster", "team-a", "m1"): mc, ("Secret", "team-a", "s"): _secret(_kubeconfig())})
    client = _Client()

    result = await membercluster.reconcile(_ctx(cache, client), "team-a/m1")

    status = client.patches[0]["status"]
    assert status["ready"] is False
    (condition,) = status["conditions"]
    assert condition["reason"] == membercluster.OUTSIDE_WINDOW
    assert condition["message"] == "outside spec.activeWindow until 2026-11-22T10:30:00Z"
    # 30 min away: the usual probe first
    assert result.requeue_after == membercluster.next_probe_in("team-a/m1", T0)


def test_the_window_says_when_it_changes_and_an_invalid_one_keeps_the_member_out() -> None:
    def window(spec: dict[str, str], at: dt.datetime) -> membercluster.Window | None:
        return membercluster.active_window({"spec": {"activeWindow": spec}}, at)

    inside = window({"from": "0 8 * * *", "to": "0 18 * * *"}, T0)
    assert inside is not None
    assert inside.open
    assert inside.seconds_left == 8 * 3600  # closes at 18:00
    soon = window({"from": "0 10 * * *", "to": "0 18 * * *"}, T0 - dt.timedelta(seconds=20))
    assert soon is not None
    assert (soon.open, soon.seconds_left) == (False, 20.0)
    broken = window({"from": "not cron", "to": "0 18 * * *"}, T0)
    assert broken is not None
    assert not broken.open
    assert "invalid cron expression" in broken.message
    assert membercluster.active_window({"spec": {}}, T0) is None


async def test_the_node_count_is_written_as_kubefleets_property_and_only_moves_when_it_changes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    nodes: list[int | None] = [3]

    async def probe(_target: MemberTarget, **_: Any) -> registration.Probe:
        return registration.Probe(True, "v1.35.4", "API server ready", nodes[0])

    monkeypatch.setattr(registration, "probe_pooled", probe)
    config = _kubeconfig()
    seen = {"kubernetes-fleet.io/node-count": {"value": "3", "observationTime": "2020-01-01T00:00:00Z"}}
    for previous, count, written in (
        (None, 3, "3"),
        (seen, 3, None),  # unchanged: nothing written, the old observation time stays (no churn)
        (seen, 4, "4"),
        (seen, None, None),  # not known this time (e.g. no right to list nodes): kept as it was
    ):
        nodes[0] = count
        status = {"properties": previous} if previous else {}
        mc = _mc(status=status)
        cache = _Cache({("MemberCluster", "team-a", "m1"): mc, ("Secret", "team-a", "s"): _secret(config)})
        client = _Client()
        await membercluster.reconcile(_ctx(cache, client), "team-a/m1")
        patch = client.patches[0]["status"]  # a merge patch: what changed
        if written is None:
            assert "properties" not in patch
            continue
        node_count = patch["properties"]["kubernetes-fleet.io/node-count"]
        assert node_count == {"value": written, "observationTime": "2026-11-22T10:00:00Z"}


async def test_the_pooled_probe_refuses_a_kubeconfig_the_policy_refuses_before_opening_anything() -> None:
    pool = sessions.pool()
    before = pool.created
    exec_user = {"exec": {"command": "/bin/sh", "args": ["-c", f"echo {TOKEN}"]}}
    probe = await registration.probe_pooled(MemberTarget(name="m1", kubeconfig=_kubeconfig(exec_user)))
    assert not probe.ready
    assert "user.exec runs a program" in probe.message
    assert TOKEN not in probe.message
    assert not probe.message.startswith("API server unreachable")  # a refusal, not a network failure
    assert pool.created == before  # no client was made for it


def test_members_are_probed_each_at_its_own_moment_of_the_interval() -> None:
    interval = membercluster.PROBE_INTERVAL
    keys = [f"fleet/member-{i}" for i in range(100)]
    # Registered together, probed spread over the interval: no second holds more than a few.
    due = [T0 + dt.timedelta(seconds=membercluster.next_probe_in(k, T0)) for k in keys]
    per_second = [sum(1 for d in due if int((d - T0).total_seconds()) == s) for s in range(int(interval) + 2)]
    assert max(per_second) <= 10
    assert sum(1 for n in per_second if n) >= 20
    for key in keys[:10]:
        first = membercluster.next_probe_in(key, T0)
        assert 1.0 <= first <= interval + 1.0
        # Probed at its moment, the next is one interval later: the moment is the key's, stable.
        at = T0 + dt.timedelta(seconds=first, milliseconds=5)
        assert membercluster.next_probe_in(key, at) == pytest.approx(interval - 0.005, abs=1e-3)
        # Woken just before its moment (a change to the member): not probed twice in a row.
        just_before = T0 + dt.timedelta(seconds=first - 0.5)
        assert membercluster.next_probe_in(key, just_before) == pytest.approx(interval + 0.5, abs=1e-3)


def test_version_and_node_count_are_read_at_one_probe_in_a_few_once_known() -> None:
    ready = {"ready": True, "version": "v1.35.4", "conditions": [{"type": "Ready", "status": "True"}]}
    every = membercluster.DETAILS_EVERY
    cycles = [T0 + dt.timedelta(seconds=membercluster.PROBE_INTERVAL * i) for i in range(every * 4)]
    for key in ("fleet/a", "fleet/b", "team-a/m1"):
        due = [membercluster.details_due(key, ready, at) for at in cycles]
        assert sum(due) == 4  # once in every DETAILS_EVERY consecutive probes
        assert all(due[i] == due[i + every] for i in range(len(due) - every))  # the member's own turn
        # Unknown or just back from not ready: read at once, whatever the turn.
        assert all(membercluster.details_due(key, {"ready": True}, at) for at in cycles)
        assert all(membercluster.details_due(key, {**ready, "ready": False}, at) for at in cycles)
        # Registered (ready and version written by `fleetwave register`) but never probed by the
        # controller: the first probe reads everything, in the one status write it makes.
        registered = {"ready": True, "version": "v1.35.4", "connectionStatus": "Healthy"}
        assert all(membercluster.details_due(key, registered, at) for at in cycles)


async def test_a_probe_without_details_keeps_the_version_and_node_count_it_had(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked: list[bool] = []

    async def probe(_target: MemberTarget, *, details: bool) -> registration.Probe:
        asked.append(details)
        return registration.Probe(
            True, "v1.36.0" if details else None, "API server ready", 7 if details else None
        )

    monkeypatch.setattr(registration, "probe_pooled", probe)
    count = {"kubernetes-fleet.io/node-count": {"value": "3", "observationTime": "2020-01-01T00:00:00Z"}}
    ready = [{"type": "Ready", "status": "True", "reason": membercluster.REACHABLE}]
    previous = {"ready": True, "version": "v1.35.4", "properties": count, "conditions": ready}
    every = membercluster.DETAILS_EVERY
    off_turn = next(
        T0 + dt.timedelta(seconds=membercluster.PROBE_INTERVAL * i)
        for i in range(every)
        if not membercluster.details_due(
            "team-a/m1", previous, T0 + dt.timedelta(seconds=membercluster.PROBE_INTERVAL * i)
        )
    )
    cache = _Cache(
        {
            ("MemberCluster", "team-a", "m1"): _mc(status=previous),
            ("Secret", "team-a", "s"): _secret(_kubeconfig()),
        }
    )
    client = _Client()
    ctx = _ctx(cache, client)
    ctx = dataclasses.replace(ctx, clock=lambda: off_turn)

    await membercluster.reconcile(ctx, "team-a/m1")

    assert asked == [False]
    status = client.patches[0]["status"] if client.patches else {}
    assert "version" not in status  # kept as it was: a merge patch names only what changed
    assert "properties" not in status


async def test_a_registered_member_gets_one_status_write_then_none_while_nothing_changes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def probe(_target: MemberTarget, *, details: bool) -> registration.Probe:
        return registration.Probe(
            True, "v1.35.4" if details else None, "API server ready", 3 if details else None
        )

    monkeypatch.setattr(registration, "probe_pooled", probe)
    # As `fleetwave register` leaves it: ready and version, no node count, no condition.
    mc = _mc(status={"ready": True, "version": "v1.35.4", "connectionStatus": "Healthy"})
    cache = _Cache({("MemberCluster", "team-a", "m1"): mc, ("Secret", "team-a", "s"): _secret(_kubeconfig())})

    class _Stored(_Client):
        async def patch(self, resource: Any, name: str, body: Any, **_: Any) -> None:
            if "status" not in body:  # the registration labels
                self.labelled.append(body)
                mc["metadata"].setdefault("labels", {}).update(body["metadata"]["labels"])
            else:
                self.patches.append(body)
                for key, value in body["status"].items():  # the fields this controller writes: whole
                    mc["status"][key] = value
            mc["metadata"]["resourceVersion"] = str(int(mc["metadata"]["resourceVersion"]) + 1)

    client = _Stored()
    for probe_number in range(2 * membercluster.DETAILS_EVERY):  # every member's turn comes in there
        at = T0 + dt.timedelta(seconds=membercluster.PROBE_INTERVAL * probe_number)
        await membercluster.reconcile(
            dataclasses.replace(_ctx(cache, client), clock=lambda at=at: at), "team-a/m1"
        )

    (first,) = client.patches  # each write wakes every placement and the member's summaries
    (labelled,) = client.labelled  # the version label, once
    assert labelled == {"metadata": {"labels": {"projectsveltos.io/k8s-version": "v1.35.4"}}}
    assert first["status"]["properties"]["kubernetes-fleet.io/node-count"]["value"] == "3"
    assert first["status"]["conditions"][0]["reason"] == membercluster.REACHABLE
