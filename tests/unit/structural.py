"""Structural schemas as the API server reads them (defaulting, every node), for tests that compare the CRD with
the model."""

from __future__ import annotations

import copy
from collections.abc import Iterator
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


def walk(schema: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every schema node with its path (properties by name, map values as `.*`, list items as `[]`)."""
    yield path, schema
    for name, sub in (schema.get("properties") or {}).items():
        yield from walk(sub, f"{path}.{name}")
    if isinstance(schema.get("additionalProperties"), dict):
        yield from walk(schema["additionalProperties"], f"{path}.*")
    if isinstance(schema.get("items"), dict):
        yield from walk(schema["items"], f"{path}[]")
