"""CEL health rules (cel-python): compile once per rule text, evaluate against one object.

The object is bound as both `resource` (upstream libsveltos) and `self` (Sveltos docs), the check's
metric values as `metrics` (ADR 0079). Outcomes are three-way (ADR 0040): a bool; a *broken rule*
(does not compile, or yields a non-bool, or exceeds its cost limit) which fails the check outright;
or an *evaluation error* (typically a field that is not there yet), which counts as false, as
upstream does.

Cost: cel-python has no cost model, so evaluation counts the syntax-tree nodes it visits (macro bodies
once per element, nested macros multiply) and stops at `max_cost` (ADR 0041). `matches()` runs RE2
(linear time); what a single builtin costs over a large value (a string doubled by `map` twenty
times, then compared in a nested `all`) is bounded by the worker's CPU-time limit (ADR 0097).
"""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import celpy
from celpy import celtypes
from celpy.adapter import json_to_cel
from celpy.celparser import CELParseError
from celpy.evaluation import Activation, CELEvalError, Evaluator
from lark import Tree

_compile_lock = threading.Lock()  # celpy's Lark parser is a process-wide singleton
# A rule's length bounds literal sizes and compile time; the cost limit bounds evaluation.
MAX_RULE_CHARS = 4096
DEFAULT_MAX_COST = 100_000  # syntax-tree nodes visited by one evaluation of one rule


class CostExceeded(Exception):
    """Raised inside the evaluator when a rule has used its budget; not a CEL value, so `||`, `&&`
    and the macros (which bottle up CELEvalError) cannot swallow it."""


@dataclass(slots=True)
class _Meter:
    remaining: int


class _MeteredEvaluator(Evaluator):
    """celpy's tree-walking evaluator, charging one unit per node visited, macro bodies included
    (they run in sub-evaluators, which share the meter)."""

    def __init__(self, ast: Tree[Any], activation: Activation, meter: _Meter) -> None:
        super().__init__(ast=ast, activation=activation)
        self.meter = meter

    def sub_evaluator(self, ast: Tree[Any]) -> Evaluator:
        return _MeteredEvaluator(ast, self.activation, self.meter)

    def _visit_tree(self, tree: Tree[Any]) -> Any:  # every visit (visit, visit_children) comes here
        self.meter.remaining -= 1
        if self.meter.remaining < 0:
            raise CostExceeded
        return super()._visit_tree(tree)


@dataclass(frozen=True, slots=True)
class Outcome:
    value: bool
    # Set when the rule is broken: compile error or non-bool result.
    broken: str = ""
    # Set when evaluation raised (counts as false).
    error: str = ""


@functools.cache
def _environment() -> celpy.Environment:
    return celpy.Environment()


@functools.lru_cache(maxsize=1024)
def compile_rule(text: str) -> celpy.Runner | str:
    """The runner for `text`, or the compile error message. Cached per rule text."""
    if len(text) > MAX_RULE_CHARS:
        return f"does not compile: longer than {MAX_RULE_CHARS} characters"
    with _compile_lock:
        env = _environment()
        try:
            return env.program(env.compile(text))
        except CELParseError as e:
            return f"does not compile: syntax error at line {e.line}, column {e.column}"
        except Exception as e:  # celpy raises assorted types for semantic errors
            return f"does not compile: {_first_line(str(e))}"


def activation(obj: dict[str, Any] | None, metrics: Mapping[str, float] | None = None) -> dict[str, Any]:
    """Convert once per object; the same activation serves every rule. `resource`/`self` are null
    for a metrics-only check; `metrics` (query name -> double) is always there, empty without queries."""
    value = json_to_cel(obj)
    return {"resource": value, "self": value, "metrics": json_to_cel(dict(metrics or {}))}


def evaluate_rule(text: str, context: dict[str, Any], *, max_cost: int = DEFAULT_MAX_COST) -> Outcome:
    runner = compile_rule(text)
    if isinstance(runner, str):
        return Outcome(False, broken=runner)
    try:
        result = _MeteredEvaluator(runner.ast, runner.new_activation(), _Meter(max_cost)).evaluate(context)
    except CostExceeded:
        return Outcome(False, broken=f"exceeded the CEL cost limit of {max_cost} evaluation steps")
    except RecursionError:  # deep nesting within MAX_RULE_CHARS
        return Outcome(False, broken="exceeded the CEL cost limit: nesting too deep")
    except CELEvalError as e:
        return Outcome(False, error=_eval_message(e))
    except Exception as e:  # cel-python lets some Python errors through (e.g. from conversions)
        return Outcome(False, error=f"{type(e).__name__}: {e}")
    if isinstance(result, CELEvalError):  # celpy may return errors instead of raising
        return Outcome(False, error=_eval_message(result))
    if not isinstance(result, celtypes.BoolType):
        return Outcome(False, broken=f"returned {_type_name(result)}, not bool")
    return Outcome(bool(result))


# celpy reports `a && b` over two errors as an overload failure that embeds the inner errors' reprs.
_INNER = re.compile(r"""CELEvalError\(\*\((?P<q>["'])(?P<msg>.*?)(?P=q),""")


def _eval_message(e: CELEvalError) -> str:
    inner = _INNER.search(" ".join(str(a) for a in e.args[2:] if a))
    if inner:
        return inner["msg"].replace("\\'", "'")
    return str(e.args[0]) if e.args else str(e)


def _type_name(value: Any) -> str:
    name = type(value).__name__
    return {"StringType": "string", "IntType": "int", "UintType": "uint", "DoubleType": "double"}.get(
        name, name.removesuffix("Type").lower()
    )


def _first_line(text: str) -> str:
    return next((line for line in text.splitlines() if line.strip()), text)
