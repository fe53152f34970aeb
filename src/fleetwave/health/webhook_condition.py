"""A webhook gate's successCondition (ADR 0080): CEL over `status` (int) and `body` (the parsed JSON
answer, null when none), with the cost limit of every CEL rule. Runs in the sandbox worker (ADR 0041):
the rule is user code and the body comes from afar.

The message never quotes the body nor the evaluation error (which may quote it): a server may echo
the request's headers back, and those may come from a Secret.
"""

from __future__ import annotations

from typing import Any

from celpy.adapter import json_to_cel

from fleetwave.health import cel


def judge(rule: str, status: int, body: Any) -> tuple[bool, str]:
    outcome = cel.evaluate_rule(rule, {"status": json_to_cel(status), "body": json_to_cel(body)})
    if outcome.broken:
        return False, f"successCondition {outcome.broken}"
    if outcome.error:
        return False, f"answered HTTP {status} but successCondition could not be evaluated over it"
    if not outcome.value:
        return False, f"answered HTTP {status} but successCondition is false"
    return True, f"answered HTTP {status} and successCondition holds"
