"""How fast the operator reacts: each step of a peering against the prerequisite it waits for, from the
API servers' audit logs (testenv.audit), with no instrumentation of the operator.

A step is the operator's first write of an object (the GatewayServer, the Tenant, ...). Its prerequisites
are the writes by others (Liqo, or what stands in for it) that the step waits for: a status, a filled
Secret. The reaction is the time from the last such write received before the step (its completion, or the
step's request if that came first) to the step's request, which `make bench` reports. The e2e checks ask
what woke the pass that made each step (`by_timer`, from the operator's debug log): a watch event, not the
resync timer that repairs a lost wake-up.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from testenv.audit import AuditEvent

OPERATOR_AGENT = "liqo-peering-operator"
NONCE_SECRET, SIGNED_NONCE_SECRET = "liqo-nonce", "liqo-signed-nonce"


@dataclass(frozen=True)
class Target:
    """A write to one object (or one of its subresources) on one side ("consumer" or "provider")."""

    side: str
    resource: str  # as audit.AuditEvent.resource spells it: "tenants", "tenants/status"
    name: str


@dataclass(frozen=True)
class Step:
    name: str
    write: Target  # the operator's first create/apply of this object
    after: tuple[Target, ...]  # written by others before it; the step waits for all of them


@dataclass(frozen=True)
class Reaction:
    step: str
    prerequisite_done: datetime
    operator_wrote: datetime

    @property
    def seconds(self) -> float:
        return (self.operator_wrote - self.prerequisite_done).total_seconds()


def peering_steps(consumer_id: str, provider_id: str) -> list[Step]:
    """The steps of one peering (consumer -> provider) and what each waits for, as the facts sheet and
    the operator's stages order them."""
    c, p = "consumer", "provider"
    # The GatewayServer is made with the Configurations, waiting for nothing: not a step.
    return [
        Step(
            "GatewayClient after the server's endpoint",
            Target(c, "gatewayclients", provider_id),
            (
                Target(c, "configurations/status", provider_id),
                Target(p, "configurations/status", consumer_id),
                Target(p, "gatewayservers/status", consumer_id),
            ),
        ),
        Step(
            "signed-nonce Secret after the nonce",
            Target(c, "secrets", SIGNED_NONCE_SECRET),
            (Target(p, "secrets", NONCE_SECRET),),
        ),
        Step(
            "Tenant after the signature",
            Target(p, "tenants", consumer_id),
            (Target(c, "secrets", SIGNED_NONCE_SECRET),),
        ),
        Step(
            "Identity after the Tenant's credentials",
            Target(c, "identities", f"controlplane-{provider_id}"),
            (Target(p, "tenants/status", consumer_id),),
        ),
        Step(
            "ResourceSlice after the Identity's kubeconfig",
            Target(c, "resourceslices", provider_id),
            (Target(c, "identities/status", f"controlplane-{provider_id}"),),
        ),
    ]


def _is(event: AuditEvent, target: Target) -> bool:
    return event.resource == target.resource and event.name == target.name and (event.code or 0) < 400


def reactions(
    events: Mapping[str, Sequence[AuditEvent]], steps: Sequence[Step], operator_agent: str = OPERATOR_AGENT
) -> list[Reaction]:
    """One Reaction per step that happened, from the write events of each side ({"consumer": [...], ...})."""
    found = []
    for step in steps:
        mine = [
            e
            for e in events.get(step.write.side, ())
            if _is(e, step.write) and e.user_agent.startswith(operator_agent) and e.verb in ("create", "patch")
        ]
        if not mine:
            continue
        wrote = min(e.received for e in mine)
        done: list[datetime] = []
        for target in step.after:
            # A write is stored before its audit line completes, so a watcher may act on it before that
            # stamp: a prerequisite received before the step counts, its end clamped at the step.
            before = [
                min(e.completed, wrote)
                for e in events.get(target.side, ())
                if _is(e, target) and not e.user_agent.startswith(operator_agent) and e.received < wrote
            ]
            if not before:
                break
            done.append(max(before))
        else:
            found.append(Reaction(step.name, max(done), wrote))
    return found


@dataclass(frozen=True)
class Pass:
    """One pass of one object, from the operator's debug log line "pass", or one run again of a stage within
    a pass, woken while the pass ran (the line "stage again")."""

    began: datetime
    woken_by: tuple[str, ...]  # empty: the resync timer, or the object's first pass


def passes(log_lines: Iterable[str], obj: str) -> list[Pass]:
    """The passes of `obj` ("LiqoPeering <namespace>/<name>") in a JSON log, in order, with the stages run again
    within them."""
    found = []
    peering = obj.removeprefix("LiqoPeering ")
    for line in log_lines:
        if ('"pass"' not in line and '"stage again"' not in line) or peering not in line:
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        event = entry.get("event")
        if (event == "pass" and entry.get("object") == obj) or (
            event == "stage again" and obj.startswith("LiqoPeering ") and entry.get("peering") == peering
        ):
            found.append(Pass(datetime.fromisoformat(entry["timestamp"]), tuple(entry.get("woken_by") or ())))
    return found


def by_timer(found: Sequence[Reaction], object_passes: Sequence[Pass]) -> list[str]:
    """The steps made by a pass that no event woke (after the object's first pass, which nothing wakes): a
    wake-up lost, repaired by the resync. Each with what the pass was."""
    late = []
    for reaction in found:
        before = [p for p in object_passes if p.began <= reaction.operator_wrote]
        if not before:
            late.append(f"{reaction.step}: no pass logged before the write")
        elif not before[-1].woken_by and before[-1] is not object_passes[0]:
            late.append(f"{reaction.step}: written by a pass the timer began at {before[-1].began.isoformat()}")
    return late
