"""A LiqoPeeringSet's status from one pass's observations (pure): counts, one line per LiqoPeering, kstatus
conditions (Ready when every LiqoPeering is ready, Stalled when one failed, else Reconciling, which includes
waiting for a provider to become available), and the Events worth emitting (what the pass wrote, and
transitions)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from liqo_peering.api.peeringset import Source
from liqo_peering.fleet.children import Desired, Plan, Why, deleting
from liqo_peering.status.compute import EventSpec
from liqo_peering.status.conditions import format_time, get_condition, make_condition, set_condition

Obj = dict[str, Any]
MESSAGE_NAMES = 5  # failed LiqoPeerings named in the Stalled message
# Reasons the set gives a line of its own (otherwise the LiqoPeering's Ready reason).
WAITING, REMOVING, NAME_CONFLICT, PENDING = "Waiting", "Removing", "NameConflict", "Pending"


@dataclass(frozen=True)
class SetObservation:
    generation: int
    now: datetime
    desired: dict[str, Desired] = field(default_factory=dict)
    children: dict[str, Obj] = field(default_factory=dict)  # the live LiqoPeerings labelled with the set, by name
    plan: Plan = field(default_factory=Plan)
    done: dict[str, Why] = field(default_factory=dict)  # the writes this pass made, by LiqoPeering name
    conflicts: dict[str, str] = field(default_factory=dict)  # the plan's, and names taken found on create
    error_reason: str | None = None  # the set itself cannot be reconciled (InvalidSpec, ConsumerForbidden, ...)
    error_message: str | None = None
    error_transient: bool = True
    source: Source = "Secret"


def _ready_condition(child: Obj) -> Obj:
    return get_condition((child.get("status") or {}).get("conditions"), "Ready") or {}


def child_state(child: Obj) -> str:
    """ready, error or establishing, as the set counts a LiqoPeering."""
    status = child.get("status") or {}
    if status.get("observedGeneration") != (child.get("metadata") or {}).get("generation"):
        return "establishing"  # its spec changed and its own reconcile has not answered yet
    if status.get("peerStatus") == "ready" and _ready_condition(child).get("status") == "True":
        return "ready"
    return "error" if status.get("peerStatus") in ("error", "timeout") else "establishing"


def _line(name: str, member: Named, child: Obj | None, reason: str | None, previous: Obj | None) -> Obj:
    status = (child or {}).get("status") or {}
    line: Obj = {
        "name": name,
        "secret": member.secret,
        "cluster": member.cluster,
        "remoteClusterID": status.get("remoteClusterID"),
        "peerStatus": status.get("peerStatus"),
        "reason": reason or _ready_condition(child or {}).get("reason") or PENDING,
        "overwrittenAt": (previous or {}).get("overwrittenAt") if child is not None else None,
    }
    return {k: v for k, v in line.items() if v is not None}


def compute(previous: Obj | None, obs: SetObservation) -> tuple[Obj, list[EventSpec]]:
    prev = previous or {}
    prev_lines = {line.get("name"): line for line in prev.get("peerings") or []}
    lines: list[Obj] = []
    counts = {"ready": 0, "establishing": 0, "waiting": 0, "error": 0, "unavailable": 0}
    failed: list[str] = []
    unavailable: list[str] = []
    events: list[EventSpec] = []
    for name in sorted(set(obs.desired) | set(obs.plan.removing) | set(obs.conflicts)):
        want, child = obs.desired.get(name), obs.children.get(name)
        named = _member_of(want, child, obs.source)
        why = obs.done.get(name)
        if want is None:  # not desired any more: being removed, not counted
            lines.append(_line(name, named, child, REMOVING, prev_lines.get(name)))
            continue
        if name in obs.conflicts:
            state, line = "error", _line(name, named, None, NAME_CONFLICT, None)
            failed.append(f"{name}: {obs.conflicts[name]}")
        elif want.member.unavailable is not None and name in obs.plan.unavailable:
            state, line = "unavailable", _line(name, named, None, want.member.unavailable, None)
            unavailable.append(want.member.detail)
        elif name in obs.plan.waiting:
            state, line = "waiting", _line(name, named, child, WAITING, prev_lines.get(name))
        elif why is not None:
            state, line = (
                "establishing",
                _line(name, named, child if why != "Created" else None, why, prev_lines.get(name)),
            )
            if why == "Overwritten":
                line["overwrittenAt"] = format_time(obs.now)
        elif child is None or deleting(child):
            state, line = "establishing", _line(name, named, child, REMOVING if child else PENDING, None)
        else:
            state, line = child_state(child), _line(name, named, child, None, prev_lines.get(name))
            if state == "error":
                ready = _ready_condition(child)
                failed.append(f"{name}: {ready.get('reason', 'Error')} ({ready.get('message', '')})")
        counts[state] += 1
        lines.append(line)
    events += _write_events(obs)
    events += [
        EventSpec("Warning", NAME_CONFLICT, f"cannot have LiqoPeering {name}: {why}; rename or delete that one")
        for name, why in obs.conflicts.items()
        if (prev_lines.get(name) or {}).get("reason") != NAME_CONFLICT
    ]
    desired = len(obs.desired)
    conditions, more = _conditions(prev, obs, desired, counts, failed, unavailable, len(obs.plan.removing))
    status: Obj = {
        "observedGeneration": obs.generation,
        "conditions": conditions,
        "desired": desired,
        **counts,
        "peerings": lines,
    }
    return status, events + more


@dataclass(frozen=True)
class Named:
    """What a line names: the Secret it peers through, the Cluster or ClusterProfile it peers with."""

    secret: str | None
    cluster: str | None


def _member_of(want: Desired | None, child: Obj | None, source: Source) -> Named:
    if want is not None:
        return Named(want.secret, None if source == "Secret" else want.member.name)
    spec = (child or {}).get("spec") or {}
    secret = (spec.get("remoteKubeconfigSecretRef") or {}).get("name")
    profile = (spec.get("remoteClusterProfileRef") or {}).get("name")
    return Named(None if secret is None else str(secret), None if profile is None else str(profile))


def _named(member: Named) -> str:
    return f"Secret {member.secret}" if member.secret else f"ClusterProfile {member.cluster}"


def _write_events(obs: SetObservation) -> list[EventSpec]:
    out = []
    for name, why in sorted(obs.done.items()):
        member = _member_of(obs.desired.get(name), obs.children.get(name), obs.source)
        what = f"{obs.source} {member.cluster}" if member.cluster and obs.source != "Secret" else _named(member)
        if why == "Created":
            out.append(EventSpec("Normal", "Created", f"created LiqoPeering {name} for {what}"))
        elif why == "Removed":
            out.append(EventSpec("Normal", "Deleted", f"deleted LiqoPeering {name}: {what} is no longer selected"))
        elif why == "TemplateChanged":
            out.append(EventSpec("Normal", "Updated", f"updated LiqoPeering {name} to the template"))
        elif why == "Adopted":
            out.append(EventSpec("Normal", "Adopted", f"adopted LiqoPeering {name} ({what})"))
        else:
            out.append(
                EventSpec(
                    "Warning",
                    "Overwritten",
                    f"LiqoPeering {name}'s spec had been edited: set back to the template; change the"
                    " LiqoPeeringSet's template instead",
                )
            )
    return out


def _conditions(
    prev: Obj,
    obs: SetObservation,
    desired: int,
    counts: dict[str, int],
    failed: list[str],
    unavailable: list[str],
    removing: int,
) -> tuple[list[Obj], list[EventSpec]]:
    gen, now = obs.generation, obs.now
    summary = (
        f"{counts['ready']} of {desired} LiqoPeerings ready, {counts['establishing']} establishing,"
        f" {counts['waiting']} waiting (maxConcurrent), {counts['error']} failed, {removing} being removed"
    )
    if unavailable:
        shown = "; ".join(unavailable[:MESSAGE_NAMES]) + ("; ..." if len(unavailable) > MESSAGE_NAMES else "")
        summary += f", {len(unavailable)} providers not available yet ({shown})"
    stalled_reason = ""
    if obs.error_reason is not None:
        ready, reason, message = False, obs.error_reason, obs.error_message or ""
        stalled_reason = "" if obs.error_transient else reason
    elif failed:
        ready, reason = False, "PeeringsFailed"
        named = "; ".join(failed[:MESSAGE_NAMES]) + ("; ..." if len(failed) > MESSAGE_NAMES else "")
        message = f"{len(failed)} of {desired} LiqoPeerings failed: {named}. {summary}"
        stalled_reason = reason
    elif counts["ready"] == desired and not removing:
        ready = True
        reason = "AllReady" if desired else "NoSecretsSelected" if obs.source == "Secret" else "NothingSelected"
        message = (
            summary if desired else f"no {obs.source} in this namespace matches the selector: nothing to peer with"
        )
    elif unavailable and counts["ready"] + counts["unavailable"] == desired and not removing:
        ready, reason, message = False, "ProvidersUnavailable", summary
    else:
        ready, reason, message = False, "Progressing", summary
    conditions = list(prev.get("conditions") or [])
    was = get_condition(conditions, "Ready") or {}
    was_stalled = get_condition(conditions, "Stalled") or {}
    conditions = set_condition(conditions, make_condition("Ready", ready, reason, message, gen, now))
    reconciling = not ready and not stalled_reason
    conditions = set_condition(
        conditions,
        make_condition(
            "Reconciling",
            reconciling,
            reason if reconciling else "Stalled" if stalled_reason else "AllReady",
            message if reconciling else "",
            gen,
            now,
        ),
    )
    conditions = set_condition(
        conditions,
        make_condition(
            "Stalled",
            bool(stalled_reason),
            stalled_reason or "NotStalled",
            message if stalled_reason else "",
            gen,
            now,
        ),
    )
    events = []
    if ready and was.get("status") != "True":
        events.append(EventSpec("Normal", "AllReady", message))
    if stalled_reason and (was_stalled.get("status") != "True" or was_stalled.get("reason") != stalled_reason):
        events.append(EventSpec("Warning", stalled_reason, message))
    elif obs.error_reason is not None and not stalled_reason and was.get("reason") != reason:
        events.append(EventSpec("Warning", reason, message))  # retried, but said once (an InternalError)
    return conditions, events
