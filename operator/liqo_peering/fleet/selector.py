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


def as_query(selector: LabelSelector) -> str:
    """The selector as a labelSelector query (apimachinery's syntax), in one spelling for equal selectors:
    the API server then sends only the Secrets it selects, and a Secret whose labels start or stop matching
    as ADDED or DELETED."""
    terms = [f"{key}={value}" for key, value in sorted(selector.match_labels.items())]
    for term in selector.match_expressions:
        values = ",".join(sorted(set(term.values)))
        terms.append(
            {
                "In": f"{term.key} in ({values})",
                "NotIn": f"{term.key} notin ({values})",
                "Exists": term.key,
                "DoesNotExist": f"!{term.key}",
            }[term.operator]
        )
    return ",".join(sorted(set(terms)))
