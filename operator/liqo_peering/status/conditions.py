"""metav1.Condition helpers over plain dicts (what kopf patches into ``status.conditions``).

Shape: ``{type, status: "True"|"False"|"Unknown", observedGeneration, lastTransitionTime, reason,
message}`` with the validation rules of k8s.io/apimachinery ``metav1.Condition``: CamelCase reason
matching ``^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$`` (at most 1024 characters), message at most
32768 characters, ``lastTransitionTime`` RFC 3339 in UTC with a ``Z`` suffix and second precision
(how metav1.Time serialises).

The functions never mutate their arguments.
"""

from __future__ import annotations

import copy
import re
from datetime import UTC, datetime
from typing import Any, Literal

ConditionStatus = Literal["True", "False", "Unknown"]

REASON_PATTERN = re.compile(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")
REASON_MAX_LENGTH = 1024
MESSAGE_MAX_LENGTH = 32768
# metav1.Condition type: an optional DNS-subdomain prefix, then a qualified name (max 316 chars).
TYPE_PATTERN = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
)
TYPE_MAX_LENGTH = 316

_TRUNCATION_MARK = "…(truncated)"


def parse_time(value: str | None) -> datetime | None:
    """The time ``format_time`` wrote (any RFC 3339), or None for none."""
    if not value:
        return None
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def format_time(when: datetime) -> str:
    """RFC 3339 UTC with ``Z``, second precision. A naive datetime is taken as UTC."""
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.astimezone(UTC).replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")


def is_valid_reason(reason: str) -> bool:
    return len(reason) <= REASON_MAX_LENGTH and REASON_PATTERN.fullmatch(reason) is not None


def to_condition_status(status: bool | str | None) -> ConditionStatus:
    """``True`` -> "True", ``False`` -> "False", ``None`` -> "Unknown"; the three strings pass through."""
    if status is True:
        return "True"
    if status is False:
        return "False"
    if status is None:
        return "Unknown"
    if status == "True":
        return "True"
    if status == "False":
        return "False"
    if status == "Unknown":
        return "Unknown"
    raise ValueError(f"condition status must be a bool, None or True/False/Unknown, got {status!r}")


def make_condition(
    type: str,
    status: bool | str | None,
    reason: str,
    message: str,
    observed_generation: int,
    now: datetime | None = None,
) -> dict[str, Any]:
    """Build a validated metav1.Condition dict; ``now`` defaults to the current UTC time."""
    if not isinstance(type, str) or len(type) > TYPE_MAX_LENGTH or not TYPE_PATTERN.fullmatch(type):
        raise ValueError(f"invalid condition type {type!r}: must be a CamelCase qualified name")
    if not isinstance(reason, str) or not is_valid_reason(reason):
        raise ValueError(f"invalid condition reason {reason!r}: must match {REASON_PATTERN.pattern} (CamelCase)")
    if isinstance(observed_generation, bool) or not isinstance(observed_generation, int):
        raise ValueError("observed_generation must be an int")
    if observed_generation < 0:
        raise ValueError("observed_generation must be >= 0")
    message = message or ""
    if len(message) > MESSAGE_MAX_LENGTH:
        message = message[: MESSAGE_MAX_LENGTH - len(_TRUNCATION_MARK)] + _TRUNCATION_MARK
    return {
        "type": type,
        "status": to_condition_status(status),
        "observedGeneration": observed_generation,
        "lastTransitionTime": format_time(now if now is not None else datetime.now(UTC)),
        "reason": reason,
        "message": message,
    }


def get_condition(conditions: list[dict[str, Any]] | None, type: str) -> dict[str, Any] | None:
    """The condition of ``type``, or None."""
    for condition in conditions or ():
        if isinstance(condition, dict) and condition.get("type") == type:
            return condition
    return None


def set_condition(conditions: list[dict[str, Any]] | None, new: dict[str, Any]) -> list[dict[str, Any]]:
    """Return a new list with ``new`` replacing the condition of the same type (in place) or appended.

    Like apimachinery's ``meta.SetStatusCondition``: when the status is unchanged the existing
    ``lastTransitionTime`` is kept, so it records when the status last flipped, not when we last wrote.
    Duplicate entries of the same type are collapsed into the first one.
    """
    new = copy.deepcopy(new)
    result: list[dict[str, Any]] = []
    placed = False
    for condition in conditions or ():
        if isinstance(condition, dict) and condition.get("type") == new.get("type"):
            if placed:
                continue  # drop duplicates
            if condition.get("status") == new.get("status") and condition.get("lastTransitionTime"):
                new["lastTransitionTime"] = condition["lastTransitionTime"]
            result.append(new)
            placed = True
        else:
            result.append(copy.deepcopy(condition))
    if not placed:
        result.append(new)
    return result


def remove_condition(conditions: list[dict[str, Any]] | None, type: str) -> list[dict[str, Any]]:
    """Return a new list without the conditions of ``type`` (apimachinery's ``meta.RemoveStatusCondition``)."""
    return [copy.deepcopy(c) for c in conditions or () if not (isinstance(c, dict) and c.get("type") == type)]
