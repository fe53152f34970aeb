"""One measurement of an analysis gate (ADR 0081): a Prometheus instant query through the guarded
client (ADR 0079), then the gate's successCondition, CEL over `result` (a double). Runs in the
sandbox worker (ADR 0041): the rule is user code and the answer comes from afar.

Any failure is a failed measurement with its reason, never a success: a refused or unreachable
source, an HTTP or Prometheus error, an answer that is not one number, NaN, a condition that is
broken, cannot be evaluated or is false.
"""

from __future__ import annotations

import time

from celpy import celtypes

from fleetwave.health import cel
from fleetwave.health.model import Limits
from fleetwave.promapi import client, guards
from fleetwave.promapi.results import QueryFailed


def measure(url: str, path: str, query: str, rule: str, limits: Limits) -> tuple[bool, str]:
    try:
        target = guards.endpoint(url, path)
    except guards.Refused as e:
        return False, f"query failed: {e}"
    deadline = time.monotonic() + limits.metric_check_seconds
    try:
        with client.Session(
            target,
            authorization=None,
            deadline=deadline,
            query_seconds=limits.metric_query_seconds,
            max_bytes=limits.metric_response_bytes,
        ) as session:
            value = session.query(query)
    except QueryFailed as e:
        return False, f"query failed: {e}"
    outcome = cel.evaluate_rule(rule, {"result": celtypes.DoubleType(value)})
    if outcome.broken:
        return False, f"result {value:g}: successCondition {outcome.broken}"
    if outcome.error:
        return False, f"result {value:g}: successCondition could not be evaluated: {outcome.error[:200]}"
    if not outcome.value:
        return False, f"result {value:g}: successCondition is false"
    return True, f"result {value:g}: successCondition holds"
