"""Unit tests for liqo_peering.status.conditions (metav1.Condition over dicts)."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from liqo_peering.status.conditions import (
    MESSAGE_MAX_LENGTH,
    format_time,
    get_condition,
    is_valid_reason,
    make_condition,
    set_condition,
    to_condition_status,
)

T0 = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
T1 = T0 + timedelta(minutes=5)


def cond(
    type_: str, status: bool | None, reason: str = "SomeReason", *, at: datetime = T0, gen: int = 1
) -> dict[str, Any]:
    return make_condition(type_, status, reason, f"{type_} is {status}", gen, at)


# ----------------------------------------------------------------------------------------------
# make_condition
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (True, "True"),
        (False, "False"),
        (None, "Unknown"),
        ("True", "True"),
        ("False", "False"),
        ("Unknown", "Unknown"),
    ],
)
def test_status_mapping(status: bool | str | None, expected: str) -> None:
    c = make_condition("Ready", status, "Reconciled", "msg", 3, T0)
    assert c["status"] == expected
    assert to_condition_status(status) == expected


@pytest.mark.parametrize("bad", ["true", "yes", "", 1, 0, "Established"])
def test_invalid_status_rejected(bad: Any) -> None:
    with pytest.raises(ValueError):
        make_condition("Ready", bad, "Reconciled", "msg", 1, T0)


def test_full_shape() -> None:
    c = make_condition("Ready", True, "PeeringEstablished", "all stages done", 7, T0)
    assert c == {
        "type": "Ready",
        "status": "True",
        "observedGeneration": 7,
        "lastTransitionTime": "2026-01-02T03:04:05Z",
        "reason": "PeeringEstablished",
        "message": "all stages done",
    }


def test_now_defaults_to_current_utc_time() -> None:
    before = datetime.now(UTC).replace(microsecond=0)
    c = make_condition("Ready", True, "Ok", "", 1)
    after = datetime.now(UTC)
    stamp = datetime.strptime(c["lastTransitionTime"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    assert before <= stamp <= after


@pytest.mark.parametrize(
    ("when", "expected"),
    [
        (T0, "2026-01-02T03:04:05Z"),
        (datetime(2026, 1, 2, 3, 4, 5), "2026-01-02T03:04:05Z"),  # naive = UTC
        (datetime(2026, 1, 2, 5, 4, 5, tzinfo=timezone(timedelta(hours=2))), "2026-01-02T03:04:05Z"),
        (datetime(2026, 1, 1, 23, 30, tzinfo=timezone(timedelta(hours=-5))), "2026-01-02T04:30:00Z"),
    ],
)
def test_time_format_rfc3339_z(when: datetime, expected: str) -> None:
    assert format_time(when) == expected
    assert make_condition("Ready", True, "Ok", "", 1, when)["lastTransitionTime"] == expected


@pytest.mark.parametrize(
    "reason",
    ["Ok", "A", "ModuleHealthy", "Reason_With_Underscore", "Has,Comma", "Has:Colon", "Ends9", "x", "aB3"],
)
def test_valid_reasons(reason: str) -> None:
    assert is_valid_reason(reason)
    assert make_condition("Ready", True, reason, "", 1, T0)["reason"] == reason


@pytest.mark.parametrize(
    "reason",
    [
        "",
        "9Starts",
        "has space",
        "Ends,",
        "Ends:",
        "dash-ed",
        "dot.ted",
        "_Under",
        "Slash/",
        "A" * 1025,
        "Ünicode",
    ],
)
def test_invalid_reasons_rejected(reason: str) -> None:
    assert not is_valid_reason(reason)
    with pytest.raises(ValueError):
        make_condition("Ready", True, reason, "", 1, T0)


@pytest.mark.parametrize("type_", ["Ready", "Reconciling", "NetworkingReady", "peering.liqo-operator.io/Ready", "a.b"])
def test_valid_types(type_: str) -> None:
    assert make_condition(type_, True, "Ok", "", 1, T0)["type"] == type_


@pytest.mark.parametrize("type_", ["", "has space", "-Leading", "Trailing-", "UPPER.Domain/Ready", "A" * 317])
def test_invalid_types_rejected(type_: str) -> None:
    with pytest.raises(ValueError):
        make_condition(type_, True, "Ok", "", 1, T0)


@pytest.mark.parametrize("gen", [-1, True, "1", 1.0])
def test_invalid_observed_generation(gen: Any) -> None:
    with pytest.raises(ValueError):
        make_condition("Ready", True, "Ok", "", gen, T0)


def test_long_message_is_truncated_to_api_limit() -> None:
    c = make_condition("Ready", False, "Failed", "x" * (MESSAGE_MAX_LENGTH + 500), 1, T0)
    assert len(c["message"]) == MESSAGE_MAX_LENGTH
    assert c["message"].endswith("(truncated)")


def test_none_message_becomes_empty_string() -> None:
    assert make_condition("Ready", True, "Ok", None, 1, T0)["message"] == ""  # type: ignore[arg-type]


# ----------------------------------------------------------------------------------------------
# get_condition
# ----------------------------------------------------------------------------------------------


def test_get_condition() -> None:
    conditions = [cond("Ready", True), cond("Stalled", False)]
    assert get_condition(conditions, "Stalled") == conditions[1]
    assert get_condition(conditions, "Reconciling") is None
    assert get_condition([], "Ready") is None
    assert get_condition(None, "Ready") is None


# ----------------------------------------------------------------------------------------------
# set_condition
# ----------------------------------------------------------------------------------------------


def test_set_appends_new_type() -> None:
    out = set_condition([cond("Ready", True)], cond("Stalled", False))
    assert [c["type"] for c in out] == ["Ready", "Stalled"]


def test_set_on_empty_and_none() -> None:
    assert set_condition([], cond("Ready", True)) == [cond("Ready", True)]
    assert set_condition(None, cond("Ready", True)) == [cond("Ready", True)]


@pytest.mark.parametrize("status", [True, False, None])
def test_unchanged_status_keeps_transition_time_but_updates_the_rest(status: bool | None) -> None:
    old = cond("Ready", status, "OldReason", at=T0, gen=1)
    new = make_condition("Ready", status, "NewReason", "new message", 2, T1)
    out = set_condition([old], new)
    assert out[0]["lastTransitionTime"] == format_time(T0)
    assert out[0]["reason"] == "NewReason"
    assert out[0]["message"] == "new message"
    assert out[0]["observedGeneration"] == 2


@pytest.mark.parametrize(
    ("before", "after"),
    [(True, False), (False, True), (None, True), (True, None), (False, None), (None, False)],
)
def test_changed_status_takes_new_transition_time(before: bool | None, after: bool | None) -> None:
    out = set_condition([cond("Ready", before, at=T0)], cond("Ready", after, at=T1))
    assert out[0]["lastTransitionTime"] == format_time(T1)
    assert out[0]["status"] == to_condition_status(after)


def test_old_condition_without_transition_time_gets_the_new_one() -> None:
    old = cond("Ready", True)
    del old["lastTransitionTime"]
    out = set_condition([old], cond("Ready", True, at=T1))
    assert out[0]["lastTransitionTime"] == format_time(T1)


def test_replaces_in_place_preserving_order_and_others() -> None:
    conditions = [cond("Ready", False), cond("Reconciling", True), cond("Stalled", False)]
    out = set_condition(conditions, cond("Reconciling", False, "Done", at=T1))
    assert [c["type"] for c in out] == ["Ready", "Reconciling", "Stalled"]
    assert out[0] == conditions[0]
    assert out[2] == conditions[2]
    assert out[1]["status"] == "False"


def test_duplicates_are_collapsed() -> None:
    conditions = [cond("Ready", True), cond("Other", True), cond("Ready", False)]
    out = set_condition(conditions, cond("Ready", True, at=T1))
    assert [c["type"] for c in out] == ["Ready", "Other"]


def test_inputs_are_not_mutated() -> None:
    conditions = [cond("Ready", True, at=T0)]
    new = cond("Ready", True, "Other", at=T1)
    snapshot_conditions, snapshot_new = copy.deepcopy(conditions), copy.deepcopy(new)
    out = set_condition(conditions, new)
    assert conditions == snapshot_conditions
    assert new == snapshot_new
    out[0]["message"] = "changed"
    assert conditions[0]["message"] != "changed"


def test_repeated_reconciles_are_stable() -> None:
    conditions: list[dict[str, Any]] = []
    for minute in range(5):
        conditions = set_condition(conditions, cond("Ready", True, at=T0 + timedelta(minutes=minute)))
    assert conditions == [cond("Ready", True, at=T0)]
