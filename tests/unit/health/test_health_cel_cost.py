"""CEL rules have a cost limit: evaluation counts the syntax-tree nodes it visits (macro bodies once per
element) and a rule over its budget is a broken rule naming the limit, whatever `||`, `&&` or a macro
around it would otherwise swallow."""

from __future__ import annotations

import time

from health_objects import check, deployment

from fleetwave.health import cel
from fleetwave.health.checks import evaluate
from fleetwave.health.model import Limits
from fleetwave.health.reader import DictResourceReader

LIST = "[" + ",".join(str(i) for i in range(40)) + "]"
# 40^3 = 64,000 innermost evaluations: minutes in cel-python without a limit.
NESTED = f"{LIST}.all(a, {LIST}.all(b, {LIST}.all(c, a + b + c >= 0)))"
CONTEXT = cel.activation({"metadata": {"name": "web"}, "status": {"conditions": [{"type": "Ready"}] * 8}})


def test_nested_macros_stop_at_the_cost_limit_quickly() -> None:
    start = time.monotonic()
    outcome = cel.evaluate_rule(NESTED, CONTEXT, max_cost=20_000)
    elapsed = time.monotonic() - start
    assert outcome == cel.Outcome(False, broken="exceeded the CEL cost limit of 20000 evaluation steps")
    assert elapsed < 30  # the point is that it ends at all; a 20k-step budget is well under a second


def test_the_limit_cannot_be_swallowed_by_short_circuit_operators() -> None:
    for rule in (f"false || {NESTED}", f"{NESTED} || true", f"[1].exists(x, {NESTED})"):
        outcome = cel.evaluate_rule(rule, CONTEXT, max_cost=5_000)
        assert outcome.broken == "exceeded the CEL cost limit of 5000 evaluation steps", rule


def test_ordinary_rules_fit_well_within_the_default() -> None:
    for rule in ("self.metadata.name == 'web'", "self.status.conditions.exists(c, c.type == 'Ready')"):
        assert cel.evaluate_rule(rule, CONTEXT, max_cost=400) == cel.Outcome(True)
    assert Limits().cel_cost == cel.DEFAULT_MAX_COST


def test_the_budget_counts_every_node_so_a_tight_limit_fails_a_simple_rule() -> None:
    assert cel.evaluate_rule("self.metadata.name == 'web'", CONTEXT, max_cost=3).broken.startswith(
        "exceeded the CEL cost limit of 3"
    )


def test_a_check_over_its_cel_budget_fails_naming_the_limit() -> None:
    rule = {"name": "costly", "rule": f"self.spec.replicas > 0 && {NESTED}"}
    result = evaluate(
        check(evaluateCEL=[rule]), DictResourceReader([deployment("web")]), limits=Limits(cel_cost=10_000)
    )
    assert not result.ok
    assert result.message == (
        "health check 'probe': cannot judge Deployment apps/web: CEL rule 'costly' "
        "exceeded the CEL cost limit of 10000 evaluation steps"
    )
