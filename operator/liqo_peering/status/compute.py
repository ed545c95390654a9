"""Compute a LiqoPeering's status from one reconcile's observations (pure).

Inputs: the previous status, the stage results, any error, the ForeignCluster mirror and the clock.
Output: the new status and the Events worth emitting (transitions only, so retries stay quiet).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from liqo_peering.errors import InternalError
from liqo_peering.stages import REVERSE_STAGE_CONDITIONS, REVERSE_STAGES, STAGE_CONDITIONS, STAGES, StageResult
from liqo_peering.status import certificates as certs
from liqo_peering.status import credentials as creds
from liqo_peering.status.conditions import (
    format_time,
    get_condition,
    make_condition,
    parse_time,
    remove_condition,
    set_condition,
)
from liqo_peering.status.foreigncluster import module_condition

# Conditions about the Liqo versions of the two clusters (liqo/versions.py decides them): present, with
# status True, while they hold; gone when they no longer do.
VERSION_CONDITIONS = ("LiqoVersionSkew", "LiqoVersionUntested")
# The skew reason that lets a peering Ready before its sides diverged carry on through later passes.
SKEW_WHILE_READY = "AppearedWhileReady"


@dataclass(frozen=True)
class VersionNotice:
    type: str  # one of VERSION_CONDITIONS
    reason: str
    message: str
    warn: bool = True  # a Warning Event when it appears or its reason changes


@dataclass(frozen=True)
class Observation:
    generation: int
    now: datetime
    timeout_seconds: float
    stages: dict[str, StageResult] = field(default_factory=dict)
    error_reason: str | None = None
    error_message: str | None = None
    # The error is a normal wait (PeeringError.waiting): establishing, not failed, until the timeout.
    error_waiting: bool = False
    mirror: dict[str, Any] | None = None
    local_cluster_id: str | None = None
    remote_cluster_id: str | None = None
    created_anything: bool = True
    # Stages whose Liqo module the ForeignCluster reports on (its lag is noted in the condition).
    # Offloading without a virtual node has nothing for Liqo to report (its conditions are about
    # virtual nodes).
    liqo_checked: frozenset[str] = frozenset(STAGES)
    # With spec.credentials.mint: the minted credential (None without it).
    credentials: creds.CredentialsObservation | None = None
    # spec.bidirectional: the reverse direction's stages count. When false, a reverse stage's result says
    # it is still being removed (shown), or that it is gone ("disabled": its condition goes); no result
    # leaves its condition as it was (the pass did not get that far).
    bidirectional: bool = False
    # Which Liqo and Kubernetes each cluster runs (status.versions); None: not discovered in this pass.
    versions: dict[str, Any] | None = None
    # The version conditions; None: not judged in this pass (they stay as they were).
    version_notices: tuple[VersionNotice, ...] | None = None
    # What `liqoctl info peer` shows, from Liqo's objects (status/detail.py): the status fields it names, None
    # for a field to remove; None as a whole: not read in this pass (the fields stay as they were).
    detail: dict[str, Any] | None = None
    # False: the pass failed before it saw the clusters (the runner reports it): the stages' conditions, the
    # credentials and Liqo's view stay as the last pass that saw them left them.
    seen: bool = True


# status.stage is the Stage column of `kubectl get lp -o wide`: "<step>: <state>" or "ready", never a
# message (those go to the conditions and Events, which `kubectl describe` shows).
STAGE_MAX_LENGTH = 40
# The step before the three stages: the spec, the Secret and its kubeconfig, both clusters' Liqo.
DISCOVERY = "discovery"
# An error after the stages ran (reading Liqo's ForeignCluster), none of them failing.
RECONCILE = "reconcile"
UNPEERING = "unpeering"


@dataclass(frozen=True)
class EventSpec:
    type: str  # Normal | Warning
    reason: str
    message: str


def _stage_condition(
    stage: str, result: StageResult | None, mirror: dict[str, Any] | None, liqo_checked: bool = True
) -> tuple[str, str, str]:
    """(status, reason, message) for NetworkReady / AuthenticationReady / OffloadingReady."""
    if result is None:
        return "Unknown", "NotStarted", f"the {stage} stage has not started: an earlier step must complete first"
    if result.state == "disabled":
        return "True", "Disabled", result.message
    if result.state == "error":
        return "False", result.reason, result.message
    if result.state == "progressing":
        return "False", result.reason, result.message
    if not liqo_checked:
        return "True", "Established", result.message
    # Established from Liqo's earliest signals, read at their source. Liqo's ForeignCluster aggregates
    # the same objects but refreshes only when its controller wakes: say so while it lags behind.
    status, _reason, message = module_condition(mirror or {}, stage, expected=True)
    if status == "True":
        return "True", "Established", f"{result.message}; {message}"
    return "True", "Established", f"{result.message} (Liqo's ForeignCluster has not caught up yet: {message})"


def short_stage(obs: Observation, stage_states: dict[str, tuple[str, str, str]], ready: bool) -> str:
    """The Stage column: which step the peering is at and a one-word state."""
    if ready:
        return "ready"
    if obs.error_reason is not None:
        step = next((s for s in stage_states if s in obs.stages and obs.stages[s].state == "error"), None)
        where = step or (RECONCILE if obs.stages or not obs.seen else DISCOVERY)
        return f"{where}: {'waiting' if obs.error_waiting else 'error'}"
    stage = next(s for s in stage_states if stage_states[s][0] != "True")
    result = obs.stages.get(stage)
    return f"{stage}: {'not started' if result is None else 'error' if result.state == 'error' else 'waiting'}"


def compute(previous: dict[str, Any] | None, obs: Observation) -> tuple[dict[str, Any], list[EventSpec]]:
    prev = previous or {}
    gen = obs.generation
    conditions: list[dict[str, Any]] = list(prev.get("conditions") or [])
    events: list[EventSpec] = []

    stage_states: dict[str, tuple[str, str, str]] = {}

    def show(stage: str, ctype: str, state: str, reason: str, message: str) -> None:
        nonlocal conditions
        stage_states[stage] = (state, reason, message)
        old = get_condition(conditions, ctype)
        if state == "True" and (old is None or old.get("status") != "True") and reason != "Disabled":
            events.append(EventSpec("Normal", ctype, message))
        conditions = set_condition(conditions, make_condition(ctype, state, reason, message, gen, obs.now))

    for stage in STAGES:
        if not obs.seen and (old := get_condition(conditions, STAGE_CONDITIONS[stage])) is not None:
            stage_states[stage] = (str(old.get("status")), str(old.get("reason")), str(old.get("message")))
            continue
        state = _stage_condition(stage, obs.stages.get(stage), obs.mirror, stage in obs.liqo_checked)
        show(stage, STAGE_CONDITIONS[stage], *state)
    for stage in REVERSE_STAGES:
        result, ctype = obs.stages.get(stage), REVERSE_STAGE_CONDITIONS[stage]
        if obs.bidirectional or (result is not None and result.state != "disabled"):
            # Liqo's ForeignCluster here describes the forward direction: the reverse one is not checked there.
            show(stage, ctype, *_stage_condition(stage, result, None, liqo_checked=False))
        elif result is not None:
            conditions = remove_condition(conditions, ctype)  # the reverse direction is gone
        elif (old := get_condition(conditions, ctype)) is not None:
            # Not looked at in this pass (an earlier step failed): it stays as the last pass left it.
            stage_states[stage] = (str(old.get("status")), str(old.get("reason")), str(old.get("message")))

    certificates = prev.get("certificates")
    if obs.seen:
        conditions = _credentials_condition(prev, conditions, obs, events)
        certificates = certs.entries(certificates, obs.stages) or None
        conditions = _certificates_condition(conditions, certificates or [], obs, events)
    conditions = _version_conditions(conditions, obs, events)

    ready = obs.error_reason is None and all(s[0] == "True" for s in stage_states.values())
    # The timeout clock restarts when the spec changes and when a ready peering degrades.
    started = parse_time(prev.get("startedAt"))
    if started is None or prev.get("observedGeneration") != gen or (prev.get("peerStatus") == "ready" and not ready):
        started = obs.now
    timed_out = obs.now - started > timedelta(seconds=obs.timeout_seconds)
    if obs.error_reason is not None and not obs.error_waiting:
        peer_status, ready_reason, ready_msg = "error", obs.error_reason, obs.error_message or ""
    elif obs.error_reason is not None:
        peer_status = "timeout" if timed_out else "establishing"
        ready_reason, ready_msg = obs.error_reason, obs.error_message or ""
    elif ready:
        peer_status, ready_reason, ready_msg = "ready", "PeeringEstablished", "every enabled stage is established"
    else:
        first = next(s for s in stage_states.values() if s[0] != "True")
        peer_status = "timeout" if timed_out else ("establishing" if obs.created_anything else "no_peers")
        ready_reason, ready_msg = first[1], first[2]

    stalled = peer_status in ("error", "timeout")
    if peer_status == "timeout":
        stall_reason = "Timeout"
        stall_msg = (
            f"not ready after {obs.timeout_seconds:g}s: {ready_msg}. Reconciling continues; raise spec.timeout"
            f" if the clusters are just slow"
        )
    elif stalled:
        stall_reason, stall_msg = ready_reason, ready_msg
    else:
        stall_reason, stall_msg = "NotStalled", ""
    conditions = set_condition(conditions, make_condition("Ready", ready, ready_reason, ready_msg, gen, obs.now))
    conditions = set_condition(
        conditions,
        make_condition(
            "Reconciling",
            not ready and not stalled,
            "Established" if ready else ("Stalled" if stalled else "Progressing"),
            "" if ready or stalled else ready_msg,
            gen,
            obs.now,
        ),
    )
    conditions = set_condition(conditions, make_condition("Stalled", stalled, stall_reason, stall_msg, gen, obs.now))

    old_status = prev.get("peerStatus")
    if peer_status != old_status or (stalled and prev_reason(prev) != stall_reason):
        if peer_status == "ready":
            events.append(EventSpec("Normal", "PeeringReady", "the peering is ready"))
        elif peer_status == "timeout":
            events.append(EventSpec("Warning", "Timeout", stall_msg))
        elif peer_status == "error":
            events.append(EventSpec("Warning", ready_reason, ready_msg))
        elif peer_status == "establishing" and old_status in (None, "no_peers", "ready"):
            events.append(EventSpec("Normal", "Establishing", ready_msg))

    ready_at = prev.get("readyAt")
    if ready and not ready_at:
        ready_at = format_time(obs.now)
    status: dict[str, Any] = {
        "peerStatus": peer_status,
        "observedGeneration": gen,
        "conditions": conditions,
        "startedAt": format_time(started),
        "readyAt": ready_at,
        "stage": short_stage(obs, stage_states, ready),
        "localClusterID": obs.local_cluster_id or prev.get("localClusterID"),
        "remoteClusterID": obs.remote_cluster_id or prev.get("remoteClusterID"),
    }
    if obs.mirror is not None:
        status["foreignCluster"] = obs.mirror
    minted = creds.status_block(obs.credentials) if obs.credentials is not None else None
    if obs.credentials is not None and minted is None:
        minted = prev.get("credentials")  # minting failed this pass: what was minted before still holds
    if obs.seen and (minted is not None or prev.get("credentials") is not None):
        status["credentials"] = minted  # None removes it (a merge patch)
    if certificates is not None or prev.get("certificates") is not None:
        status["certificates"] = certificates  # None removes it (a merge patch)
    if obs.versions is not None:
        status["versions"] = obs.versions
    if obs.detail is not None:
        # A field to remove is written as None only while the status still has it: at rest, nothing changes.
        status.update({k: v for k, v in obs.detail.items() if v is not None or prev.get(k) is not None})
    return status, events


def _version_conditions(
    conditions: list[dict[str, Any]], obs: Observation, events: list[EventSpec]
) -> list[dict[str, Any]]:
    """LiqoVersionSkew and LiqoVersionUntested as judged in this pass; a Warning Event when one appears or its
    reason changes (so a peering at rest stays quiet)."""
    if obs.version_notices is None:
        return conditions
    wanted = {notice.type: notice for notice in obs.version_notices}
    for ctype in VERSION_CONDITIONS:
        notice = wanted.get(ctype)
        if notice is None:
            conditions = remove_condition(conditions, ctype)
            continue
        old = get_condition(conditions, ctype)
        if notice.warn and (old is None or old.get("reason") != notice.reason):
            events.append(EventSpec("Warning", ctype, notice.message))
        conditions = set_condition(
            conditions, make_condition(ctype, True, notice.reason, notice.message, obs.generation, obs.now)
        )
    return conditions


def skew_tolerated(status: dict[str, Any] | None) -> bool:
    """Whether a version skew found now finds the peering established: Ready, or already carrying on."""
    skew = get_condition((status or {}).get("conditions"), VERSION_CONDITIONS[0])
    return is_ready(status) or (skew is not None and skew.get("reason") == SKEW_WHILE_READY)


def _credentials_condition(
    prev: dict[str, Any], conditions: list[dict[str, Any]], obs: Observation, events: list[EventSpec]
) -> list[dict[str, Any]]:
    """CredentialsMinted with spec.credentials.mint (dropped without it); an Event when a credential is
    minted or renewed, and when its renewal is blocked."""
    if obs.credentials is None:
        return [c for c in conditions if c.get("type") != creds.CONDITION]
    ok, reason, message = creds.condition(obs.credentials, obs.now)
    old = get_condition(conditions, creds.CONDITION)
    old_user = (prev.get("credentials") or {}).get("user")
    if ok and reason == "Minted" and obs.credentials.user != old_user:
        events.append(EventSpec("Normal", creds.CONDITION, message))
    elif reason == "RenewalBlocked" and (old is None or old.get("reason") != reason):
        events.append(EventSpec("Warning", reason, message))
    return set_condition(conditions, make_condition(creds.CONDITION, ok, reason, message, obs.generation, obs.now))


def _certificates_condition(
    conditions: list[dict[str, Any]], certificates: list[dict[str, Any]], obs: Observation, events: list[EventSpec]
) -> list[dict[str, Any]]:
    """CertificatesValid while the peering has identity certificates; a Warning Event when it turns False or
    its reason changes."""
    judged = certs.condition(certificates, obs.now)
    if judged is None:
        return remove_condition(conditions, certs.CONDITION)
    ok, reason, message = judged
    old = get_condition(conditions, certs.CONDITION)
    if not ok and (old is None or old.get("reason") != reason):
        events.append(EventSpec("Warning", reason, message))
    return set_condition(conditions, make_condition(certs.CONDITION, ok, reason, message, obs.generation, obs.now))


def has_reverse(status: dict[str, Any] | None) -> bool:
    """Whether the status still shows a reverse direction: it was bidirectional, and what it made may remain."""
    types = set(REVERSE_STAGE_CONDITIONS.values())
    return any(c.get("type") in types for c in (status or {}).get("conditions") or [])


def prev_reason(prev: dict[str, Any]) -> str | None:
    stalled = get_condition(prev.get("conditions"), "Stalled")
    return str(stalled.get("reason")) if stalled else None


def is_ready(status: dict[str, Any] | None) -> bool:
    cond = get_condition((status or {}).get("conditions"), "Ready")
    return bool(cond and cond.get("status") == "True")


# Transient errors (an unreachable cluster, Liqo not ready yet) are retried this soon; the runner backs off.
TRANSIENT_RETRY_SECONDS = 5.0
# An unexpected failure (InternalError) most likely does not repeat: the first retry comes sooner.
INTERNAL_RETRY_SECONDS = 1.0


def requeue_after(status: dict[str, Any], obs: Observation, transient_error: bool) -> float | None:
    """When to look again without any event: soon after a transient error, exactly at the timeout, when the
    minted certificate is due for renewal, and when an identity's certificate is late for renewal or expires."""
    if transient_error:
        return INTERNAL_RETRY_SECONDS if obs.error_reason == InternalError.reason else TRANSIENT_RETRY_SECONDS
    due: list[float] = []
    if status["peerStatus"] == "establishing":
        started = parse_time(status["startedAt"])
        if started is not None:
            due.append(max(obs.timeout_seconds - (obs.now - started).total_seconds(), 0.5))
    renew = obs.credentials.renew_at if obs.credentials is not None else None
    if renew is not None and renew > obs.now:  # past it, renewal waits for the bootstrap Secret's event
        due.append(max((renew - obs.now).total_seconds(), 0.5))
    change = certs.next_change(status.get("certificates") or [], obs.now)
    if change is not None:
        due.append(max((change - obs.now).total_seconds(), 0.5))
    return min(due) if due else None


def teardown_blocked(
    previous: dict[str, Any] | None, reason: str, message: str, generation: int, now: datetime
) -> dict[str, Any]:
    """The status patch while deletion cannot finish (e.g. the provider is unreachable)."""
    conds = list((previous or {}).get("conditions") or [])
    conds = set_condition(conds, make_condition("Stalled", True, reason, message, generation, now))
    conds = set_condition(conds, make_condition("Ready", False, reason, message, generation, now))
    return {"conditions": conds, "peerStatus": "error", "stage": f"{UNPEERING}: error"}
