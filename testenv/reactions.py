"""How fast the operator reacts: each step of a peering against the prerequisite it waits for, from the
API servers' audit logs (testenv.audit), with no instrumentation of the operator.

A step is the operator's first write of an object (the GatewayServer, the Tenant, ...). Its prerequisites
are the writes by others (Liqo, or what stands in for it) that the step waits for: a status, a filled
Secret. The reaction is the time from the last such write that completed before the step to the step's
request. Used by the e2e check ("each step follows its prerequisite within 2 s") and by `make bench`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
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
    return [
        Step(
            "GatewayServer after both Configurations are accepted",
            Target(p, "gatewayservers", consumer_id),
            (Target(c, "configurations/status", provider_id), Target(p, "configurations/status", consumer_id)),
        ),
        Step(
            "GatewayClient after the server's endpoint and Deployment",
            Target(c, "gatewayclients", provider_id),
            (Target(p, "gatewayservers/status", consumer_id), Target(p, "deployments/status", f"gw-{consumer_id}")),
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
            before = [
                e.completed
                for e in events.get(target.side, ())
                if _is(e, target) and not e.user_agent.startswith(operator_agent) and e.completed <= wrote
            ]
            if not before:
                break
            done.append(max(before))
        else:
            found.append(Reaction(step.name, max(done), wrote))
    return found
