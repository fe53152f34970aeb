"""Pull mode's decisions without a cluster (ADR 0106): where a member's work lives, which report the
hub reads, when an agent counts as connected, what an agent refuses, and what of a report becomes a
summary's status. The real agent and hub are exercised in tests/integration/test_pull_mode*.py."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
import typer.main

from fleetwave.api import pullmode
from fleetwave.cli import agent as agent_cli
from fleetwave.controllers.agent import work_checks
from fleetwave.controllers.fleet import membercluster, members, pull
from fleetwave.controllers.fleet.boundary import Boundary
from fleetwave.controllers.kubefleet import apply_rules, executor_pull
from fleetwave.controllers.shared.context import Context
from fleetwave.controllers.shared.reports import Reports
from fleetwave.controllers.sveltos import summary_pull
from fleetwave.delivery.manifests import ApplyPolicy
from fleetwave.kube import kinds
from fleetwave.mgmt import agent_install, pull_registration, registration

T0 = dt.datetime(2026, 11, 28, 12, 0, tzinfo=dt.UTC)
MEMBER = "fleetwave-system/edge-1"


def test_a_members_hub_namespace_is_kubefleets_name_and_stays_a_valid_distinct_name() -> None:
    assert pullmode.hub_namespace(MEMBER) == "fleet-member-edge-1"
    assert pullmode.hub_namespace("team-a/edge-1") == "fleet-member-team-a-edge-1"
    long_a, long_b = pullmode.hub_namespace("a/" + "x" * 60), pullmode.hub_namespace("b/" + "x" * 60)
    assert max(len(long_a), len(long_b)) <= 63
    assert long_a != long_b
    assert pullmode.member_of_label(pullmode.member_label("team-a/edge.1")) == "team-a/edge.1"


def test_pull_mode_is_sveltos_field_or_fleetwaves_annotation_for_kubefleet_members() -> None:
    sveltos = {"metadata": {"name": "m", "namespace": "ns"}, "spec": {"pullMode": True}}
    kubefleet = {"metadata": {"name": "m", "annotations": {pullmode.PULL_ANNOTATION: "true"}}, "spec": {}}
    push = {"metadata": {"name": "m", "namespace": "ns"}, "spec": {"pullMode": False}}
    assert members.from_object(sveltos).pull
    assert members.from_object(kubefleet).pull
    assert not members.from_object(push).pull
    assert members.unhonoured(sveltos) == ""  # honoured now, no longer refused


def _work(revision: str, observed: str | None, spec_revision: str | None = None) -> pull.Put:
    current: dict[str, Any] = {"spec": {"revision": spec_revision or revision}}
    if observed is not None:
        current["status"] = {
            "observedRevision": observed,
            "outcome": {"x": 1},
            "agent": "a",
            "reportedAt": "t",
        }
    return pull.Put("fleet-member-edge-1", "w", revision, current)


def test_only_a_report_about_the_revision_the_hub_wants_now_is_read() -> None:
    assert pull.report(_work("r2", "r2")) == pull.Report({"x": 1}, False, "a", "t")
    assert pull.report(_work("r2", "r1")) is None  # a stale agent's report about the older revision
    assert pull.report(_work("r2", "r1", spec_revision="r1")) is None  # the cache shows the old spec
    assert pull.report(_work("r2", None)) is None


def _lease(renewed: Any, holder: str | None = "agent-1", duration: int = 40) -> dict[str, Any]:
    return {"spec": {"holderIdentity": holder, "renewTime": renewed, "leaseDurationSeconds": duration}}


def test_an_agent_is_connected_while_its_lease_is_renewed_within_its_duration() -> None:
    assert pull.alive(_lease(T0 - dt.timedelta(seconds=30)), T0)
    assert pull.alive(_lease("2026-11-28T11:59:30.123456Z"), T0)  # the cache's text form
    assert not pull.alive(_lease(T0 - dt.timedelta(seconds=50)), T0)  # 40 s + 5 s grace passed
    assert not pull.alive(_lease(T0, holder=None), T0)  # released
    assert not pull.alive(_lease("not a time"), T0)
    assert not pull.alive(None, T0)
    left = pull.seconds_left(_lease(T0 - dt.timedelta(seconds=30)), T0)
    assert left == pytest.approx(15.0)


def test_the_waiting_message_names_the_member_and_its_last_report() -> None:
    work = _work("r2", "r1")
    gone = pull.waiting_message(MEMBER, work, _lease(T0 - dt.timedelta(minutes=5)), T0)
    assert gone == f"cluster {MEMBER}: its agent is not connected (its last report was at t); waiting for it"
    busy = pull.waiting_message(MEMBER, work, _lease(T0), T0)
    assert busy.startswith(f"cluster {MEMBER}: waiting for its agent to carry out revision r2")


def _raw_work(**spec: Any) -> dict[str, Any]:
    body = {
        "cluster": MEMBER,
        "owner": "placement/p",
        "placement": {"objects": []},
        "withdraw": False,
        **spec,
    }
    body["revision"] = spec.get("revision") or pull.revision_of(dict(body))
    return {"metadata": {"namespace": "fleet-member-edge-1", "name": "w"}, "spec": body}


def test_an_agent_refuses_work_that_is_not_its_members_or_was_edited_behind_the_hub() -> None:
    mine = {"namespace": "fleet-member-edge-1", "cluster": MEMBER}
    assert work_checks.refusal(_raw_work(), **mine) == ""
    assert "this agent delivers to fleetwave-system/edge-1 only" in work_checks.refusal(
        _raw_work(cluster="fleetwave-system/edge-2"), **mine
    )
    elsewhere = {**_raw_work(), "metadata": {"namespace": "fleet-member-edge-2", "name": "w"}}
    assert "not this member's" in work_checks.refusal(elsewhere, **mine)
    tampered = _raw_work()
    tampered["spec"]["placement"] = {"objects": [{"kind": "ClusterRoleBinding"}]}
    assert "spec.revision does not match" in work_checks.refusal(tampered, **mine)
    both = _raw_work(summary={"content": {}})
    assert "exactly one of" in work_checks.refusal(both, **mine)


def test_an_allow_list_of_kinds_refuses_any_other_object_the_work_would_apply() -> None:
    deploy = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}}
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": "x"},
    }
    local = {"deploymentType": "Local", "objects": [binding]}  # the hub's own: never the agent's
    raw = _raw_work(placement=None, summary={"content": {"policies": [{"objects": [deploy]}, local]}})
    assert work_checks.kinds_refused(raw, None) == ""
    assert work_checks.kinds_refused(raw, frozenset({"Deployment"})) == ""
    assert work_checks.kinds_refused(raw, frozenset({"apps/Deployment"})) == ""
    refused = work_checks.kinds_refused(raw, frozenset({"ConfigMap"}))
    assert refused == "apps/Deployment web: this member's agent does not apply that kind (--allow-kind)"
    outcome = work_checks.refused_outcome(refused, "2026-11-28T12:00:00Z")
    assert outcome["conditions"][0]["reason"] == "WorkRefused"
    assert outcome["applied"] == {"ok": False, "message": f"refused by the member's agent: {refused}"}


@pytest.mark.parametrize(
    "rules",
    [
        apply_rules.DEFAULT,
        apply_rules.ApplyRules(ApplyPolicy(True, True, "IfNoDiff", False), report_diff=True),
    ],
)
def test_an_apply_strategy_reaches_the_agent_as_it_was(rules: apply_rules.ApplyRules) -> None:
    assert executor_pull.rules_of(executor_pull.rules_body(rules)) == rules


def _summary() -> dict[str, Any]:
    return {
        "metadata": {
            "name": "web-edge-1",
            "namespace": "fleetwave-system",
            "generation": 3,
            "labels": {"projectsveltos.io/cluster-profile-name": "web"},
            "annotations": {"fleetwave.io/content-hash": "h1", "kubectl.kubernetes.io/last-applied": "{...}"},
        },
        "spec": {"clusterNamespace": "fleetwave-system", "clusterName": "edge-1", "clusterProfileSpec": {}},
        "status": {"observedContentHash": "h0", "templateInputsHash": "t0"},
    }


def test_the_work_carries_the_summary_without_its_status_or_foreign_annotations() -> None:
    body = summary_pull.work_body(_summary(), {"policies": []})
    handed = body["summary"]
    assert "status" not in handed
    assert handed["metadata"]["annotations"] == {"fleetwave.io/content-hash": "h1"}
    assert (handed["metadata"]["generation"], handed["content"]) == (3, {"policies": []})
    assert summary_pull.cluster_of(_summary()) == MEMBER


def test_a_reports_status_keys_alone_become_the_summarys_status_with_the_hubs_template_inputs() -> None:
    condition = {"type": "Ready", "status": "True", "reason": "Healthy"}
    report = pull.Report(
        {"observedContentHash": "h1", "conditions": [condition], "spec": {"evil": True}, "x": 1},
        False,
        "a",
        "t",
    )
    status = summary_pull.status_from(report, {}, "t1")
    assert (status["observedContentHash"], status["conditions"]) == ("h1", [condition])
    assert status["templateInputsHash"] == "t1"
    assert set(status) == {*summary_pull.STATUS_KEYS, "templateInputsHash"}


def test_a_wake_waits_for_the_next_change_of_its_work_and_fires_once() -> None:
    reports, calls = Reports(), []
    reports.wait("ns/w", "k", lambda: calls.append(1))
    reports.wait("ns/w", "k", lambda: calls.append(2))  # the same waiter: once
    obj = type("O", (), {"metadata": type("M", (), {"namespace": "ns", "name": "w"})()})()
    reports.on_change("MODIFIED", obj)
    reports.on_change("MODIFIED", obj)
    assert calls == [2]
    reports.wait("ns/w", "k", lambda: calls.append(3))
    reports.forget("ns/w")  # the work is gone
    reports.on_change("DELETED", obj)
    assert calls == [2]
    assert len(reports) == 0


def test_pull_members_hub_namespaces_are_never_a_content_source() -> None:
    boundary = Boundary(controller_namespace="fleetwave-system")
    assert "belong to pull members' agents" in boundary.namespace_problem("fleet-member-edge-1")
    assert boundary.namespace_problem("apps") == ""


class _Cache:
    def __init__(self, lease: dict[str, Any] | None) -> None:
        self.informers = {"Lease": object()}
        self.lease = lease

    def get(self, kind: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        assert (kind, namespace, name) == ("Lease", "fleet-member-edge-1", pullmode.LEASE_NAME)
        return self.lease


def _ctx(cache: Any) -> Context:
    """A reconcile context over `cache` alone, at T0 (nothing else is reached in these tests)."""
    return Context(
        client=None,  # type: ignore[arg-type]
        cache=cache,
        recorder=None,  # type: ignore[arg-type]
        helm=None,  # type: ignore[arg-type]
        health=None,  # type: ignore[arg-type]
        namespace="fleetwave-system",
        clock=lambda: T0,
    )


def _verdict(lease: dict[str, Any] | None) -> membercluster.Verdict:
    ctx = _ctx(_Cache(lease))
    member = members.from_object(
        {"metadata": {"name": "edge-1", "namespace": "fleetwave-system"}, "spec": {"pullMode": True}}
    )
    return membercluster._agent_verdict(ctx, member)


def test_a_pull_members_readiness_and_facts_come_from_its_agents_lease_alone() -> None:
    lease = _lease(T0 - dt.timedelta(seconds=10))
    lease["metadata"] = {
        "annotations": {pullmode.VERSION_ANNOTATION: "v1.35.4", pullmode.NODES_ANNOTATION: "3"}
    }
    ready = _verdict(lease)
    assert (ready.ready, ready.reason, ready.version, ready.nodes) == (True, "AgentConnected", "v1.35.4", 3)
    gone = _verdict(_lease(T0 - dt.timedelta(minutes=10)))
    assert (gone.ready, gone.reason) == (False, "AgentDisconnected")
    assert "the cluster runs what it has" in gone.message
    assert _verdict(None).message.startswith("agent not connected (never connected)")


def test_the_agents_hub_rights_are_its_namespace_alone_and_never_secrets() -> None:
    rules = pull_registration.agent_rules()
    resources = {r for rule in rules for r in rule["resources"]}
    assert resources == {"memberworks", "memberworks/status", "leases", "events"}
    writes = {r for rule in rules for r in rule["resources"] if set(rule["verbs"]) - {"get", "list", "watch"}}
    assert "memberworks" not in writes  # the work is the hub's: the agent writes its status alone
    lease_updates = next(r for r in rules if "update" in r["verbs"] and r["resources"] == ["leases"])
    assert lease_updates["resourceNames"] == [pullmode.LEASE_NAME]


def test_the_agent_charts_arguments_are_what_agent_run_accepts() -> None:
    run = typer.main.get_command(agent_cli.app)  # its one command, `run`
    args = agent_install.agent_args("edge-1", "fleetwave-system")
    assert args[:2] == ["agent", "run"]
    parsed = run.make_context("run", list(args[2:]))
    assert (parsed.params["cluster"], parsed.params["bind_address"]) == ("edge-1", "0.0.0.0")


def test_register_pull_writes_the_upstream_shapes_of_a_pull_member() -> None:
    sveltos = registration.UpstreamMember(
        kinds.KindInfo(kinds.GVK("lib.projectsveltos.io/v1beta1", "SveltosCluster"), "sveltosclusters", True),
        {
            "apiVersion": "lib.projectsveltos.io/v1beta1",
            "kind": "SveltosCluster",
            "metadata": {"name": "e"},
            "spec": {},
        },
    )
    fleet = registration.UpstreamMember(
        kinds.KindInfo(
            kinds.GVK("cluster.kubernetes-fleet.io/v1beta1", "MemberCluster"), "memberclusters", False
        ),
        {
            "apiVersion": "cluster.kubernetes-fleet.io/v1beta1",
            "kind": "MemberCluster",
            "metadata": {"name": "e"},
        },
    )
    assert pull_registration._pull_view(sveltos)["spec"] == {"pullMode": True}  # no kubeconfig named
    viewed = pull_registration._pull_view(fleet)
    assert viewed["metadata"]["annotations"] == {pullmode.PULL_ANNOTATION: "true"}
    assert members.from_object(viewed).pull


class _WorkCache:
    """A cache holding one MemberWork: what the hub last handed over for the summary."""

    def __init__(self, work: dict[str, Any] | None) -> None:
        self.informers = {"MemberWork": object()}
        self.work = work

    def get(self, kind: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        assert kind == "MemberWork"
        return self.work


def _handed(summary: dict[str, Any], report: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "cluster": MEMBER,
        "owner": "o",
        **summary_pull.work_body(summary, {"policies": []}),
    }
    spec["revision"] = pull.revision_of(spec)
    return {"spec": spec, "status": {"observedRevision": spec["revision"], "outcome": report}}


async def _pass(summary: dict[str, Any], work: dict[str, Any] | None) -> tuple[Any, list[str]]:
    read: list[str] = []

    async def content_of(_ctx: Any, _raw: Any, _wanted: str) -> Any:
        read.append("content")
        raise RuntimeError("stop here: the long way")

    ctx = _ctx(_WorkCache(work))
    try:
        result = await summary_pull.reconcile(
            ctx, "fleetwave-system/web-edge-1", None, summary, "h1", content_of
        )
    except RuntimeError:
        result = None
    return result, read


async def test_an_unchanged_summary_whose_status_says_its_report_reads_no_content() -> None:
    summary = {**_summary(), "status": {}}
    condition = {"type": "Ready", "status": "True", "reason": "Provisioned"}
    report = {"observedContentHash": "h1", "conditions": [condition]}
    summary["status"] = {
        k: v
        for k, v in summary_pull.status_from(pull.Report(report, False, "a", "t"), {}, "").items()
        if v is not None
    }
    result, read = await _pass(summary, _handed(summary, report))
    assert (result.requeue_after, read) == (summary_pull.PULL_POLL_SECONDS, [])
    # Each of these takes the long way (reads and renders the content, puts the work):
    edited = {**summary, "metadata": {**summary["metadata"], "generation": 4}}
    assert (await _pass(edited, _handed(summary, report)))[1] == ["content"]
    newer = {**report, "observedContentHash": "h2"}
    assert (await _pass(summary, _handed(summary, newer)))[1] == ["content"]
    assert (await _pass(summary, None))[1] == ["content"]


def test_only_a_new_report_wakes_the_waiters_not_the_hubs_own_writes_of_the_work() -> None:
    reports, calls = Reports(), []

    def work(status: dict[str, Any] | None) -> Any:
        meta = type("M", (), {"namespace": "ns", "name": "w"})()
        return type("O", (), {"metadata": meta, "status": status})()

    reports.on_change("ADDED", work(None))
    reports.wait("ns/w", "k", lambda: calls.append("woken"))
    reports.on_change("MODIFIED", work(None))  # the hub wrote a new spec: no report yet
    assert calls == []
    reports.on_change("MODIFIED", work({"observedRevision": "r2"}))  # the agent reported
    assert calls == ["woken"]


async def test_a_tenants_summary_is_never_handed_to_a_pull_members_agent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The agent would deliver with its own rights, not the tenant's (ADR 0111): nothing is read or
    handed over, and the summary says why."""
    written: list[tuple[dict[str, Any], str]] = []

    async def write(_ctx: Any, _key: str, _obj: Any, _raw: Any, status: Any, failed: str) -> Any:
        written.append((dict(status), failed))
        return None

    monkeypatch.setattr(summary_pull, "_write", write)
    summary = _summary()
    summary["metadata"]["labels"] |= {
        "projectsveltos.io/serviceaccount-name": "eng",
        "projectsveltos.io/serviceaccount-namespace": "eng",
    }
    _, read = await _pass(summary, None)
    assert read == []
    ((status, failed),) = written
    assert failed == f"Resources: {summary_pull.TENANT_REFUSED}"
    assert status["featureSummaries"][0]["status"] == "Failed"
