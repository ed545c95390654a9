"""testenv.reactions: steps against their prerequisites, from audit events."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from testenv.audit import AuditEvent, ObjectRef
from testenv.reactions import Pass, Reaction, by_timer, passes, peering_steps, reactions

T0 = datetime(2026, 11, 22, 12, 0, 0, tzinfo=UTC)


def event(
    at: float, resource: str, name: str, agent: str, verb: str = "patch", code: int = 200, took: float = 0.0
) -> AuditEvent:
    res, _, sub = resource.partition("/")
    when = T0 + timedelta(seconds=at)
    done = when + timedelta(seconds=took)
    return AuditEvent("id", when, done, verb, "user", agent, ObjectRef(res, sub or None, "ns", name), code)


def test_a_step_is_timed_from_the_last_prerequisite_write_before_it() -> None:
    steps = peering_steps("c", "p")
    manager = "liqo-controller-manager/v1"
    events = {
        "consumer": [
            event(1.0, "configurations/status", "p", manager),
            event(1.7, "gatewayclients", "p", "liqo-peering-operator/0.1.0"),  # the step
            event(1.9, "gatewayclients", "p", "liqo-peering-operator/0.1.0"),  # a later apply: not the step
        ],
        "provider": [
            event(0.5, "configurations/status", "c", manager),
            event(1.2, "deployments/status", "gw-c", "kube-controller-manager/v1"),  # the server's Pod: no prerequisite
            event(1.5, "gatewayservers/status", "c", manager),
            event(1.6, "gatewayservers/status", "c", manager, code=409),  # refused: no
            event(9.0, "gatewayservers/status", "c", manager),  # after it: ignored
        ],
    }
    (reaction,) = reactions(events, steps)
    assert reaction.step.startswith("GatewayClient") and round(reaction.seconds, 3) == 0.2


def test_a_step_waits_for_all_its_prerequisites() -> None:
    steps = peering_steps("c", "p")[:1]
    manager = "liqo-controller-manager/v1"
    events = {
        "consumer": [event(1.7, "gatewayclients", "p", "liqo-peering-operator/0.1.0")],
        "provider": [
            event(0.5, "configurations/status", "c", manager),
            event(1.2, "deployments/status", "gw-c", "kube-controller-manager/v1"),
            event(1.5, "gatewayservers/status", "c", manager),
        ],
    }
    assert reactions(events, steps) == []  # the consumer's Configuration was never accepted


def test_a_step_seen_before_its_prerequisites_audit_line_completed_reacted_at_once() -> None:
    # The write is stored, and watched, before its line's completion stamp: the step may come in between.
    events = {
        "consumer": [],
        "provider": [
            event(1.0, "tenants/status", "c", "liqo-controller-manager/v1", took=0.3),
        ],
    }
    events["consumer"].append(event(1.2, "identities", "controlplane-p", "liqo-peering-operator/0.1.0"))
    (reaction,) = reactions(events, peering_steps("c", "p")[3:4])
    assert reaction.step.startswith("Identity") and reaction.seconds == 0


def test_a_step_whose_prerequisite_was_never_written_by_others_is_left_out() -> None:
    steps = peering_steps("c", "p")
    events = {
        "consumer": [event(1.0, "identities/status", "controlplane-p", "liqo-peering-operator/0.1.0")],
        "provider": [],
    }
    events["consumer"].append(event(2.0, "resourceslices", "p", "liqo-peering-operator/0.1.0"))
    assert reactions(events, steps) == []


def log_line(at: float, obj: str, woken_by: list[str]) -> str:
    stamp = (T0 + timedelta(seconds=at)).isoformat().replace("+00:00", "Z")
    return json.dumps({"event": "pass", "level": "debug", "timestamp": stamp, "object": obj, "woken_by": woken_by})


def test_the_passes_of_one_object_are_read_from_the_debug_log() -> None:
    lines = [
        log_line(1.0, "LiqoPeering ns/a", []),
        log_line(2.0, "LiqoPeering ns/b", ["GatewayServer"]),  # another object
        '{"event": "pass put off", "object": "LiqoPeering ns/a"}',  # another line
        "not json, the pass of LiqoPeering ns/a",
        log_line(3.0, "LiqoPeering ns/a", ["Tenant ns/c"]),
    ]
    assert passes(lines, "LiqoPeering ns/a") == [
        Pass(T0 + timedelta(seconds=1), ()),
        Pass(T0 + timedelta(seconds=3), ("Tenant ns/c",)),
    ]


def test_a_stage_run_again_within_a_pass_counts_as_woken_by_what_woke_it() -> None:
    """A stage that waits runs again when its peering is woken while the pass's networking still runs: the
    step it makes then follows that wake-up, not the pass's start."""
    stamp = (T0 + timedelta(seconds=1.2)).isoformat().replace("+00:00", "Z")
    again = {"event": "stage again", "level": "debug", "timestamp": stamp, "peering": "ns/a"}
    lines = [
        log_line(1.0, "LiqoPeering ns/a", []),
        json.dumps({**again, "stage": "authentication", "woken_by": ["Secret p/liqo-nonce"]}),
        json.dumps({**again, "peering": "ns/b", "woken_by": ["Secret p/liqo-nonce"]}),  # another peering
    ]
    assert passes(lines, "LiqoPeering ns/a") == [
        Pass(T0 + timedelta(seconds=1), ()),
        Pass(T0 + timedelta(seconds=1.2), ("Secret p/liqo-nonce",)),
    ]


def test_a_step_made_by_a_pass_the_timer_began_is_a_lost_wake_up() -> None:
    def at(seconds: float) -> datetime:
        return T0 + timedelta(seconds=seconds)

    object_passes = [Pass(at(1), ()), Pass(at(5), ("Configuration",)), Pass(at(70), ())]
    first = Reaction("first", at(0.5), at(1.5))  # by the first pass, which nothing wakes
    woken = Reaction("woken", at(4.9), at(5.2))
    late = Reaction("late", at(6), at(70.3))
    before = Reaction("before", at(0), at(0.5))
    assert by_timer([first, woken], object_passes) == []
    (found,) = by_timer([late], object_passes)
    assert found.startswith("late: written by a pass the timer began")
    assert by_timer([before], object_passes) == ["before: no pass logged before the write"]
