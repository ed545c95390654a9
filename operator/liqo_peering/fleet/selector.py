"""metav1.LabelSelector matching, as apimachinery's LabelSelectorAsSelector reads it."""

from __future__ import annotations

from liqo_peering.api.peeringset import LabelSelector, LabelSelectorRequirement


def _holds(term: LabelSelectorRequirement, labels: dict[str, str]) -> bool:
    if term.operator == "In":
        return term.key in labels and labels[term.key] in term.values
    if term.operator == "NotIn":
        return term.key not in labels or labels[term.key] not in term.values
    if term.operator == "Exists":
        return term.key in labels
    return term.key not in labels  # DoesNotExist


def matches(selector: LabelSelector, labels: dict[str, str]) -> bool:
    """Every matchLabels pair and every matchExpressions term holds (the model refuses an empty selector)."""
    return all(labels.get(k) == v for k, v in selector.match_labels.items()) and all(
        _holds(term, labels) for term in selector.match_expressions
    )
