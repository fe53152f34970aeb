"""CEL health rules: `self`/`resource` binding, OR of rules, broken rules, errors, docs form, caching."""

from __future__ import annotations

from typing import Any

import pytest
from health_objects import AVAILABLE_SCRIPT, check, deployment

from fleetwave.api.codec import parse_object
from fleetwave.api.sveltos import ClusterPromotion
from fleetwave.health import cel
from fleetwave.health.checks import evaluate
from fleetwave.health.model import State
from fleetwave.health.reader import DictResourceReader

# The expression of seed 000's postDelayHealthChecks, written against `self`.
JOB_DONE = (
    "self.status.succeeded >= 1 && "
    "self.status.conditions.filter(c, c.type == 'Complete' && c.status == 'True').size() == 1"
)


def _job(name: str = "validate", *, done: bool | None = True) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "default"},
    }
    if done is not None:
        condition = {"type": "Complete" if done else "Failed", "status": "True"}
        obj["status"] = {"succeeded": 1 if done else 0, "conditions": [condition]}
    return obj


def _rules(*rules: tuple[str, str], obj: dict[str, Any] | None = None) -> Any:
    c = check(group="batch", kind="Job", evaluateCEL=[{"name": n, "rule": r} for n, r in rules])
    return evaluate(c, DictResourceReader([obj if obj is not None else _job()]))


def test_rule_on_self_passes_for_a_completed_job() -> None:
    result = _rules(("done", JOB_DONE))
    assert result.ok
    assert result.resources[0].message == "CEL rule 'done' holds"


def test_object_is_bound_as_resource_too() -> None:
    assert _rules(("kind", "resource.kind == 'Job' && resource == self")).ok


def test_false_rule_fails_with_the_rule_named() -> None:
    result = _rules(("done", JOB_DONE), obj=_job(done=False))
    assert not result.ok
    assert result.message == (
        "health check 'probe': Job default/validate is Degraded: no CEL rule holds ('done' is false)"
    )


def test_missing_field_counts_as_false_and_says_why() -> None:
    result = _rules(("done", JOB_DONE), obj=_job(done=None))
    assert not result.ok
    assert result.resources[0].state is State.DEGRADED
    assert "'done': no such member in mapping: 'status'" in result.message


def test_rules_are_ored_like_upstream() -> None:
    assert _rules(("never", "false"), ("done", JOB_DONE)).ok
    assert not _rules(("never", "false"), ("also-never", "1 == 2")).ok


@pytest.mark.parametrize(
    ("rule", "reason"),
    [
        ("self.metadata.name", "CEL rule 'bad' returned string, not bool"),
        ("size(self.status.conditions)", "CEL rule 'bad' returned int, not bool"),
        ("self.status.conditions", "CEL rule 'bad' returned list, not bool"),
        ("self.status.(", "CEL rule 'bad' does not compile: syntax error at line 1, column"),
    ],
)
def test_broken_rule_fails_the_check_even_if_another_rule_holds(rule: str, reason: str) -> None:
    result = _rules(("done", JOB_DONE), ("bad", rule))
    assert not result.ok
    assert result.resources[0].state is State.ERROR
    assert result.message.startswith("health check 'probe': cannot judge Job default/validate: " + reason)


def test_lua_and_cel_must_both_pass() -> None:
    reader = DictResourceReader([deployment("web", available=3)])

    def both(rule: str) -> Any:
        return check(script=AVAILABLE_SCRIPT, evaluateCEL=[{"name": "r", "rule": rule}])

    assert evaluate(both("self.spec.replicas == 3"), reader).ok
    assert not evaluate(both("self.spec.replicas == 4"), reader).ok
    lua_says_no = both("true")
    result = evaluate(lua_says_no, DictResourceReader([deployment("web", available=1)]))
    assert not result.ok
    assert "available replicas not matching" in result.message


def test_compiled_once_per_rule_text() -> None:
    text = "self.kind == 'cache-probe'"
    assert cel.compile_rule(text) is cel.compile_rule(text)
    assert cel.compile_rule("self.(") == cel.compile_rule("self.(")


def test_docs_form_check_from_a_promotion_manifest() -> None:
    # Seed 000's validation-job example (the `//` comment line removed: it is not YAML).
    doc = {
        "apiVersion": "config.projectsveltos.io/v1beta1",
        "kind": "ClusterPromotion",
        "metadata": {"name": "core-app-rollout"},
        "spec": {
            "profileSpec": {"syncMode": "Continuous"},
            "stages": [
                {
                    "name": "staging",
                    "clusterSelector": {"matchLabels": {"env": "staging"}},
                    "trigger": {
                        "auto": {
                            "delay": "5m",
                            "postDelayHealthChecks": [
                                {
                                    "type": "Job",
                                    "group": "batch",
                                    "version": "v1",
                                    "name": "validation-job-stage-staging",
                                    "namespace": "default",
                                    "evaluateCEL": [{"name": "success", "expression": JOB_DONE}],
                                }
                            ],
                        }
                    },
                }
            ],
        },
    }
    promotion = parse_object(doc)
    assert isinstance(promotion, ClusterPromotion)
    trigger = promotion.spec.stages[0].trigger
    assert trigger is not None
    assert trigger.auto is not None
    (health,) = trigger.auto.post_delay_health_checks or ()
    target = _job("validation-job-stage-staging")
    reader = DictResourceReader([_job("other-job", done=False), target])
    result = evaluate(health, reader)
    assert result.ok, result.message
    assert [v.name for v in result.resources] == ["validation-job-stage-staging"]
    assert not evaluate(health, DictResourceReader([_job("other-job")])).ok
