"""Structural defaulting as the API server does it, for tests that compare the CRD with the model."""

from __future__ import annotations

import copy
from typing import Any


def apply_defaults(schema: dict[str, Any], obj: Any) -> Any:
    """Fill missing fields from the schema's defaults, then descend (into the defaults and list items too)."""
    if isinstance(obj, list) and isinstance(schema.get("items"), dict):
        return [apply_defaults(schema["items"], item) for item in obj]
    if not isinstance(obj, dict) or "properties" not in schema:
        return obj
    out = dict(obj)
    for name, sub in schema["properties"].items():
        if name not in out and "default" in sub:
            out[name] = copy.deepcopy(sub["default"])
        if name in out:
            out[name] = apply_defaults(sub, out[name])
    return out


def creation_rules(schema: dict[str, Any]) -> list[dict[str, Any]]:
    """The CEL rules of one schema node that the API server checks on create: transition rules (those that read
    oldSelf) are checked only on an update, against the stored object."""
    return [rule for rule in schema.get("x-kubernetes-validations", []) if "oldSelf" not in rule["rule"]]
