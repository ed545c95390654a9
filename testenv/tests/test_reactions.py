"""testenv.reactions: steps against their prerequisites, from audit events."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from testenv.audit import AuditEvent, ObjectRef
from testenv.reactions import peering_steps, reactions

T0 = datetime(2026, 11, 22, 12, 0, 0, tzinfo=UTC)


def event(at: float, resource: str, name: str, agent: str, verb: str = "patch", code: int = 200) -> AuditEvent:
    res, _, sub = resource.partition("/")
    when = T0 + timedelta(seconds=at)
    return AuditEvent("id", when, when, verb, "user", agent, ObjectRef(res, sub or None, "ns", name), code)


def test_a_step_is_timed_from_the_last_prerequisite_write_before_it() -> None:
    steps = peering_steps("c", "p")
    events = {
        "consumer": [event(1.0, "configurations/status", "p", "liqo-controller-manager/v1")],
        "provider": [
            event(1.5, "configurations/status", "c", "liqo-controller-manager/v1"),
            event(1.6, "configurations/status", "c", "liqo-controller-manager/v1", code=409),  # refused: no
            event(1.7, "gatewayservers", "c", "liqo-peering-operator/0.1.0"),  # the step
            event(1.9, "gatewayservers", "c", "liqo-peering-operator/0.1.0"),  # a later apply: not the step
            event(9.0, "configurations/status", "c", "liqo-controller-manager/v1"),  # after it: ignored
        ],
    }
    (reaction,) = reactions(events, steps)
    assert reaction.step.startswith("GatewayServer") and round(reaction.seconds, 3) == 0.2


def test_a_step_whose_prerequisite_was_never_written_by_others_is_left_out() -> None:
    steps = peering_steps("c", "p")
    events = {
        "consumer": [event(1.0, "identities/status", "controlplane-p", "liqo-peering-operator/0.1.0")],
        "provider": [],
    }
    events["consumer"].append(event(2.0, "resourceslices", "p", "liqo-peering-operator/0.1.0"))
    assert reactions(events, steps) == []
