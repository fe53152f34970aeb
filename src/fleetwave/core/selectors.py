"""Label-selector matching (matchLabels + matchExpressions In/NotIn/Exists/DoesNotExist).

Kubernetes semantics: every term must hold; NotIn and DoesNotExist also match an absent label.
"""

from __future__ import annotations

from collections.abc import Mapping

from fleetwave.core import model as m


def requirement_matches(req: m.Requirement, labels: Mapping[str, str]) -> bool:
    value = labels.get(req.key)
    match req.operator:
        case m.Operator.IN:
            return value is not None and value in req.value_set
        case m.Operator.NOT_IN:
            return value is None or value not in req.value_set
        case m.Operator.EXISTS:
            return value is not None
        case m.Operator.DOES_NOT_EXIST:
            return value is None


def matches(selector: m.Selection | None, labels: Mapping[str, str]) -> bool:
    """None matches nothing; an empty selector matches everything; `AnyOf` what any of its
    selectors matches."""
    if selector is None:
        return False
    if isinstance(selector, m.AnyOf):
        return any(matches(s, labels) for s in selector.selectors)
    if any(labels.get(k) != v for k, v in selector.match_labels):
        return False
    return all(requirement_matches(r, labels) for r in selector.match_expressions)
