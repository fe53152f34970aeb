"""Evaluate Sveltos ValidateHealth checks (validateHealths, postDelayHealthChecks) against a cluster.

Selection: group/version/kind, namespace, labelFilters and the fleetwave `resourceName` extension.
Per resource the Lua script (if any) must pass AND at least one CEL rule (if any) must hold. Every
problem (no match, unknown kind, script error, limit, broken rule, reader failure) is a failed
`HealthResult` naming the check, the resource and the reason; nothing raises (ADR 0040).

Metric queries (ADR 0079) run first, once per check: their values are Lua's `metrics` table and
CEL's `metrics` map on every resource, and a query that gives no value fails the check. A check
without `kind` but with queries is metrics-only: its script and rules run once, with `obj` nil and
`resource`/`self` null.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from fleetwave.api.sveltos import ValidateHealth
from fleetwave.health import cel, metrics, selectors
from fleetwave.health.lua import LuaSandbox
from fleetwave.health.model import DEFAULT_LIMITS, HealthResult, Limits, ResourceVerdict, State
from fleetwave.health.reader import KindNotServed, ResourceReader

__all__ = ["DEFAULT_LIMITS", "HealthResult", "Limits", "ResourceVerdict", "State", "evaluate", "evaluate_all"]


def evaluate(
    check: ValidateHealth,
    reader: ResourceReader,
    *,
    limits: Limits = DEFAULT_LIMITS,
    run_queries: metrics.RunQueries = metrics.run_queries,
) -> HealthResult:
    """`run_queries`: how metric queries reach Prometheus (tests give a fixed answer)."""
    try:
        return _evaluate(check, reader, limits, run_queries)
    except Exception as e:  # the contract: a broken check or reader fails the check, never the caller
        return _fail(check, f"internal error: {type(e).__name__}: {e}")


def evaluate_all(
    checks: Iterable[ValidateHealth], reader: ResourceReader, *, limits: Limits = DEFAULT_LIMITS
) -> tuple[HealthResult, ...]:
    return tuple(evaluate(c, reader, limits=limits) for c in checks)


def api_version(check: ValidateHealth) -> str:
    return f"{check.group}/{check.version}" if check.group else check.version or ""


def _evaluate(
    check: ValidateHealth, reader: ResourceReader, limits: Limits, run_queries: metrics.RunQueries
) -> HealthResult:
    problem = _unsupported(check)
    if problem:
        return _fail(check, problem)
    measured = metrics.read(check, reader, limits, run=run_queries)
    if measured.problem:
        return _fail(check, measured.problem)
    if not check.kind:
        return _judge_metrics_only(check, reader, measured.values, limits)
    try:
        objects = _select(check, reader)
    except KindNotServed as e:
        return _fail(check, str(e))
    except Exception as e:
        return _fail(check, f"cannot list {_describe(check)}: {type(e).__name__}: {e}")
    if not objects:
        return _fail(check, f"no resource matched: {_describe(check)}")
    sandbox = LuaSandbox(limits) if check.script else None
    verdicts = tuple(_judge(check, obj, reader, sandbox, limits, measured.values) for obj in objects)
    return _summarise(check, verdicts)


def _unsupported(check: ValidateHealth) -> str:
    if check.job_check is not None:
        return "jobCheck is not supported by fleetwave's evaluator"
    if not check.kind and not check.metric_queries:
        return "the check selects no resources: kind is empty (and it has no metricQueries)"
    if not check.kind:
        return ""  # metrics-only
    if not check.version:
        return f"the check selects kind {check.kind} but sets no version"
    return ""


def _select(check: ValidateHealth, reader: ResourceReader) -> list[dict[str, Any]]:
    assert check.kind is not None  # guarded by _unsupported
    label_selector = selectors.from_label_filters(check.label_filters)
    found = reader.list(
        api_version(check), check.kind, namespace=check.namespace or None, label_selector=label_selector
    )
    if check.resource_name:
        found = [o for o in found if (o.get("metadata") or {}).get("name") == check.resource_name]
    return sorted(found, key=lambda o: (_meta(o, "namespace"), _meta(o, "name")))


def _judge_metrics_only(
    check: ValidateHealth, reader: ResourceReader, values: dict[str, float], limits: Limits
) -> HealthResult:
    """Upstream's metrics-only check: the script and rules run once, over the metric values alone."""
    state, message = _judge_user_code(check, None, reader, limits, values)
    if state is not State.HEALTHY:
        return _fail(check, f"metric health check failed: {message or state.value}")
    shown = ", ".join(f"{name}={value:g}" for name, value in values.items())
    return HealthResult(True, f"health check {check.name!r}: metrics healthy ({shown})", (), check.name)


def _judge_user_code(
    check: ValidateHealth,
    obj: dict[str, Any] | None,
    reader: ResourceReader,
    limits: Limits,
    values: dict[str, float],
    sandbox: LuaSandbox | None = None,
) -> tuple[State, str]:
    state, message = State.HEALTHY, "exists" if obj is not None else ""
    if check.script:
        state, message = (sandbox or LuaSandbox(limits)).evaluate(
            check.script,
            obj,
            lambda av, kind, ns, name: reader.get(av, kind, namespace=ns, name=name),
            values,
        )
    if state is State.HEALTHY and check.evaluate_cel:
        state, message = _judge_cel(check, obj, limits, values)
    return state, message


def _judge(
    check: ValidateHealth,
    obj: dict[str, Any],
    reader: ResourceReader,
    sandbox: LuaSandbox | None,
    limits: Limits,
    values: dict[str, float],
) -> ResourceVerdict:
    state, message = _judge_user_code(check, obj, reader, limits, values, sandbox)
    return ResourceVerdict(
        api_version=str(obj.get("apiVersion") or api_version(check)),
        kind=str(obj.get("kind") or check.kind),
        namespace=_meta(obj, "namespace"),
        name=_meta(obj, "name"),
        state=state,
        message=message,
    )


def _judge_cel(
    check: ValidateHealth, obj: dict[str, Any] | None, limits: Limits, values: dict[str, float]
) -> tuple[State, str]:
    context = cel.activation(obj, values)
    outcomes = [
        (rule.name, cel.evaluate_rule(rule.rule, context, max_cost=limits.cel_cost))
        for rule in check.evaluate_cel or ()
    ]
    for name, o in outcomes:
        if o.broken:
            return State.ERROR, f"CEL rule {name!r} {o.broken}"
    holding = [name for name, o in outcomes if o.value]
    if holding:
        return State.HEALTHY, f"CEL rule {holding[0]!r} holds"
    reasons = [f"{name!r}: {o.error}" if o.error else f"{name!r} is false" for name, o in outcomes]
    return State.DEGRADED, "no CEL rule holds (" + "; ".join(reasons) + ")"


def _summarise(check: ValidateHealth, verdicts: tuple[ResourceVerdict, ...]) -> HealthResult:
    bad = [v for v in verdicts if not v.ok]
    if not bad:
        noun = verdicts[0].kind if len(verdicts) == 1 else f"{verdicts[0].kind} resources"
        text = f"health check {check.name!r}: {len(verdicts)} {noun} healthy"
        return HealthResult(True, text, verdicts, check.name)
    first = bad[0]
    if first.state is State.ERROR:
        text = f"cannot judge {first.ref}: {first.message}"
    else:
        text = f"{first.ref} is {first.state.value}" + (f": {first.message}" if first.message else "")
    more = f" (and {len(bad) - 1} more not healthy)" if len(bad) > 1 else ""
    return HealthResult(False, f"health check {check.name!r}: {text}{more}", verdicts, check.name)


def _fail(check: ValidateHealth, reason: str) -> HealthResult:
    return HealthResult(False, f"health check {check.name!r}: {reason}", (), check.name)


def _describe(check: ValidateHealth) -> str:
    parts = [f"{check.kind} {api_version(check)}"]
    parts.append(f"in namespace {check.namespace}" if check.namespace else "in all namespaces")
    if check.label_filters:
        parts.append(f"with labels {selectors.from_label_filters(check.label_filters)}")
    if check.resource_name:
        parts.append(f"named {check.resource_name}")
    return " ".join(parts)


def _meta(obj: dict[str, Any], field: str) -> str:
    meta = obj.get("metadata")
    return str(meta.get(field) or "") if isinstance(meta, dict) else ""
