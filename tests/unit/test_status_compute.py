"""Unit tests for liqo_peering.status.compute: a LiqoPeering's status and Events from one reconcile."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from liqo_peering.api.model import LiqoPeeringStatus
from liqo_peering.errors import ApiError, PeeringError
from liqo_peering.stages import STAGES, StageResult
from liqo_peering.status.compute import (
    STAGE_MAX_LENGTH,
    TRANSIENT_RETRY_SECONDS,
    EventSpec,
    Observation,
    compute,
    is_ready,
    parse_time,
    requeue_after,
    teardown_blocked,
)
from liqo_peering.status.conditions import format_time, get_condition
from liqo_peering.status.foreigncluster import mirror_foreign_cluster

T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
HEALTHY_CONDITIONS = {
    "networking": [
        {"type": "NetworkConnectionStatus", "status": "Established", "message": "connected"},
        {"type": "NetworkGatewayClientStatus", "status": "Ready"},
    ],
    "authentication": [{"type": "AuthIdentityControlPlaneStatus", "status": "Established"}],
    "offloading": [{"type": "OffloadingVirtualNodeStatus", "status": "Ready"}],
}


def fc(*, disabled: tuple[str, ...] = (), overrides: dict[str, list[dict[str, Any]]] | None = None) -> dict[str, Any]:
    """A ForeignCluster object for the provider, every module healthy unless told otherwise."""
    conditions = {**HEALTHY_CONDITIONS, **(overrides or {})}
    modules = {
        name: {"enabled": name not in disabled, "conditions": [] if name in disabled else conditions[name]}
        for name in STAGES
    }
    return {
        "apiVersion": "core.liqo.io/v1beta1",
        "kind": "ForeignCluster",
        "metadata": {"name": "provider-id"},
        "status": {"role": "Provider", "apiServerUrl": "https://provider:6443", "modules": modules},
    }


def all_ready() -> dict[str, StageResult]:
    return {stage: StageResult.ready(stage, f"{stage} established") for stage in STAGES}


def observe(
    *,
    at: timedelta = timedelta(0),
    generation: int = 1,
    stages: dict[str, StageResult] | None = None,
    fc_obj: dict[str, Any] | None = None,
    **kw: Any,
) -> Observation:
    return Observation(
        generation=generation,
        now=T0 + at,
        timeout_seconds=300,
        stages=all_ready() if stages is None else stages,
        mirror=mirror_foreign_cluster(fc() if fc_obj is None else fc_obj),
        local_cluster_id="consumer-id",
        remote_cluster_id="provider-id",
        **kw,
    )


def cond(status: dict[str, Any], type_: str) -> dict[str, Any]:
    found = get_condition(status["conditions"], type_)
    assert found is not None, f"no {type_} condition"
    return found


def brief(status: dict[str, Any], type_: str) -> tuple[str, str]:
    c = cond(status, type_)
    return c["status"], c["reason"]


def reasons(events: list[EventSpec]) -> list[tuple[str, str]]:
    return [(e.type, e.reason) for e in events]


def progressing(stage: str = "networking") -> dict[str, StageResult]:
    stages = {s: r for s, r in all_ready().items() if STAGES.index(s) < STAGES.index(stage)}
    stages[stage] = StageResult.waiting(stage, "WaitingForGatewayServer", "waiting for the gateway server")
    return stages


# -- ready -----------------------------------------------------------------------------------


def test_all_stages_ready_and_modules_healthy_is_ready() -> None:
    status, events = compute(None, observe())
    assert status["peerStatus"] == "ready"
    assert status["observedGeneration"] == 1
    assert brief(status, "Ready") == ("True", "PeeringEstablished")
    assert cond(status, "Reconciling")["status"] == "False"
    assert cond(status, "Stalled")["status"] == "False"
    for type_ in ("NetworkReady", "AuthenticationReady", "OffloadingReady"):
        assert brief(status, type_) == ("True", "Established")
    assert status["readyAt"] == format_time(T0)
    assert status["startedAt"] == format_time(T0)
    assert status["stage"] == "ready"
    assert (status["localClusterID"], status["remoteClusterID"]) == ("consumer-id", "provider-id")
    assert status["foreignCluster"]["modules"]["networking"]["health"] == "Healthy"
    assert ("Normal", "PeeringReady") in reasons(events)
    assert {("Normal", "NetworkReady"), ("Normal", "AuthenticationReady"), ("Normal", "OffloadingReady")} <= set(
        reasons(events)
    )
    assert all(e.type == "Normal" for e in events)


def test_every_condition_carries_the_generation_and_time() -> None:
    status, _ = compute(None, observe(generation=7))
    types = [c["type"] for c in status["conditions"]]
    assert sorted(types) == sorted(
        ["NetworkReady", "AuthenticationReady", "OffloadingReady", "Ready", "Reconciling", "Stalled"]
    )
    for c in status["conditions"]:
        assert c["observedGeneration"] == 7
        assert c["lastTransitionTime"] == "2026-03-01T12:00:00Z"


@pytest.mark.parametrize(
    "obs",
    [
        observe(),
        observe(stages=progressing("authentication")),
        observe(created_anything=False, stages={}),
        observe(error_reason="ProviderUnreachable", error_message="cannot reach the provider"),
        observe(stages={}, fc_obj={"metadata": {"name": "provider-id"}}),  # a ForeignCluster without status
    ],
)
def test_computed_status_fits_the_crd_model(obs: Observation) -> None:
    """What compute writes must be accepted by the CRD (generated from LiqoPeeringStatus)."""
    status, _ = compute(None, obs)
    parsed = LiqoPeeringStatus.model_validate(status)
    assert parsed.peer_status == status["peerStatus"]


def test_stage_ready_while_liqos_aggregate_lags_is_ready_and_says_so() -> None:
    """Ready follows the stages' own signals (Connection, Identity, virtual Node); Liqo's ForeignCluster
    refreshes on its own schedule, and the condition message says when it has not caught up."""
    lagging = fc(
        overrides={"networking": [{"type": "NetworkConnectionStatus", "status": "Pending", "message": "slow"}]}
    )
    status, events = compute(None, observe(fc_obj=lagging))
    assert status["peerStatus"] == "ready"
    assert brief(status, "NetworkReady") == ("True", "Established")
    assert "has not caught up yet" in cond(status, "NetworkReady")["message"]
    assert "slow" in cond(status, "NetworkReady")["message"]
    assert "caught up" not in cond(status, "AuthenticationReady")["message"]
    assert ("Normal", "PeeringReady") in reasons(events)
    assert status["foreignCluster"]["modules"]["networking"]["health"] == "Unhealthy"  # the mirror stays verbatim


def test_stage_ready_without_foreign_cluster_is_ready_and_says_liqo_lags() -> None:
    obs = replace(observe(), mirror=mirror_foreign_cluster(None))
    status, _ = compute(None, obs)
    assert status["peerStatus"] == "ready"
    assert brief(status, "NetworkReady") == ("True", "Established")
    assert "has not caught up yet" in cond(status, "NetworkReady")["message"]


# -- establishing ----------------------------------------------------------------------------


def test_progressing_stage_is_establishing() -> None:
    status, events = compute(None, observe(stages=progressing("networking")))
    assert status["peerStatus"] == "establishing"
    assert brief(status, "NetworkReady") == ("False", "WaitingForGatewayServer")
    assert brief(status, "AuthenticationReady") == ("Unknown", "NotStarted")
    assert brief(status, "OffloadingReady") == ("Unknown", "NotStarted")
    assert brief(status, "Ready") == ("False", "WaitingForGatewayServer")
    assert brief(status, "Reconciling") == ("True", "Progressing")
    assert cond(status, "Reconciling")["message"] == "waiting for the gateway server"
    assert cond(status, "Stalled")["status"] == "False"
    assert status["stage"] == "networking: waiting"  # the message is in the conditions
    assert status["readyAt"] is None
    assert reasons(events) == [("Normal", "Establishing")]


def test_ready_reason_comes_from_the_first_stage_not_ready() -> None:
    status, events = compute(None, observe(stages=progressing("offloading")))
    assert brief(status, "NetworkReady") == ("True", "Established")
    assert brief(status, "AuthenticationReady") == ("True", "Established")
    assert brief(status, "OffloadingReady") == ("False", "WaitingForGatewayServer")
    assert brief(status, "Ready") == ("False", "WaitingForGatewayServer")
    assert ("Normal", "NetworkReady") in reasons(events)


def test_networking_disabled_counts_as_ready() -> None:
    stages = {**all_ready(), "networking": StageResult.disabled("networking", "networking is disabled")}
    status, events = compute(None, observe(stages=stages, fc_obj=fc(disabled=("networking",))))
    assert brief(status, "NetworkReady") == ("True", "Disabled")
    assert cond(status, "NetworkReady")["message"] == "networking is disabled"
    assert brief(status, "Ready") == ("True", "PeeringEstablished")
    assert status["peerStatus"] == "ready"
    assert ("Normal", "NetworkReady") not in reasons(events)  # nothing happened worth telling


# -- error -----------------------------------------------------------------------------------


def test_error_stalls_with_its_reason() -> None:
    obs = observe(
        stages=progressing("networking"),
        error_reason="ProviderUnreachable",
        error_message="cannot reach the provider cluster at https://p:6443",
    )
    status, events = compute(None, obs)
    assert status["peerStatus"] == "error"
    assert brief(status, "Stalled") == ("True", "ProviderUnreachable")
    assert cond(status, "Stalled")["message"] == "cannot reach the provider cluster at https://p:6443"
    assert brief(status, "Ready") == ("False", "ProviderUnreachable")
    assert cond(status, "Reconciling")["status"] == "False"
    assert events == [
        EventSpec("Warning", "ProviderUnreachable", "cannot reach the provider cluster at https://p:6443")
    ]


def test_error_wins_over_ready_stages() -> None:
    status, events = compute(None, observe(error_reason="Forbidden", error_message="no rights"))
    assert status["peerStatus"] == "error"
    assert cond(status, "Ready")["status"] == "False"
    assert status["readyAt"] is None
    assert ("Normal", "PeeringReady") not in reasons(events)


def test_repeated_error_is_quiet_but_a_new_error_is_reported() -> None:
    first, _ = compute(None, observe(error_reason="ProviderUnreachable", error_message="a"))
    again, events = compute(first, observe(at=timedelta(seconds=10), error_reason="ProviderUnreachable"))
    assert events == []
    other, events = compute(
        again, observe(at=timedelta(seconds=20), error_reason="ProviderForbidden", error_message="b")
    )
    assert reasons(events) == [("Warning", "ProviderForbidden")]
    assert brief(other, "Stalled") == ("True", "ProviderForbidden")


def test_recovering_from_error_clears_stalled() -> None:
    failed, _ = compute(None, observe(error_reason="ProviderUnreachable", error_message="a"))
    status, events = compute(failed, observe(at=timedelta(seconds=30)))
    assert status["peerStatus"] == "ready"
    assert brief(status, "Stalled") == ("False", "NotStalled")
    assert ("Normal", "PeeringReady") in reasons(events)


# -- the Stage column ------------------------------------------------------------------------

LONG = "LiqoPeering team-a/provider: " + "the provider cluster at https://p:6443 answered 500: etcd timeout; " * 30
ERROR_REASONS = [
    "SecretNotFound", "SecretKeyMissing", "KubeconfigInvalid", "KubeconfigUnsafe", "InvalidSpec",
    "ProviderUnreachable", "ConsumerUnreachable", "ProviderForbidden", "ConsumerForbidden", "ProviderUnauthorized",
    "Unauthorized", "QuotaExceeded", "AdmissionDenied", "NamespaceTerminating", "LiqoNotInstalled",
    "LiqoNotReady", "DuplicatePeering", "ResourceSliceDenied", "GatewayUnreachable", "ApiError", "ReconcileError",
]  # fmt: skip


def failing(stage: str) -> dict[str, StageResult]:
    stages = {s: r for s, r in all_ready().items() if STAGES.index(s) < STAGES.index(stage)}
    stages[stage] = StageResult.failed(stage, ApiError(LONG, status=500), LONG)
    return stages


@pytest.mark.parametrize("reason", ERROR_REASONS)
@pytest.mark.parametrize(
    ("stages", "expected"),
    [
        ({}, "discovery: error"),  # before the stages: the Secret, the kubeconfig, Liqo on either side
        (failing("networking"), "networking: error"),
        (failing("authentication"), "authentication: error"),
        (failing("offloading"), "offloading: error"),
        (progressing("authentication"), "reconcile: error"),  # after the stages, none failing
        (all_ready(), "reconcile: error"),
    ],
    ids=["discovery", "networking", "authentication", "offloading", "after-waiting", "after-ready"],
)
def test_every_error_keeps_the_stage_column_short(reason: str, stages: dict[str, StageResult], expected: str) -> None:
    status, _ = compute(None, observe(stages=stages, error_reason=reason, error_message=LONG))
    assert status["stage"] == expected and len(status["stage"]) <= STAGE_MAX_LENGTH
    # the whole message is still there for kubectl describe
    assert cond(status, "Ready")["message"] == LONG and cond(status, "Stalled")["message"] == LONG


@pytest.mark.parametrize(
    ("stages", "expected"),
    [
        ({}, "networking: not started"),
        (progressing("networking"), "networking: waiting"),
        (progressing("authentication"), "authentication: waiting"),
        (progressing("offloading"), "offloading: waiting"),
        ({"networking": StageResult.waiting("networking", "W", LONG)}, "networking: waiting"),  # in-band
        (all_ready(), "ready"),
    ],
)
def test_establishing_stage_column(stages: dict[str, StageResult], expected: str) -> None:
    status, _ = compute(None, observe(stages=stages))
    assert status["stage"] == expected and len(status["stage"]) <= STAGE_MAX_LENGTH


results = st.builds(
    StageResult,
    stage=st.just(""),
    state=st.sampled_from(["disabled", "progressing", "ready", "error"]),
    reason=st.sampled_from(["Waiting", "ApiError", "Established", "Disabled"]),
    message=st.text(max_size=300),
)


@settings(max_examples=150)
@given(
    st.dictionaries(st.sampled_from(STAGES), results),
    st.none() | st.sampled_from(ERROR_REASONS),
    st.text(max_size=500),
    st.integers(0, 1000),
)
def test_the_stage_column_is_always_a_step_and_a_state(
    stages: dict[str, StageResult], reason: str | None, message: str, seconds: int
) -> None:
    stages = {name: replace(result, stage=name) for name, result in stages.items()}
    obs = observe(at=timedelta(seconds=seconds), stages=stages, error_reason=reason, error_message=message)
    start, _ = compute(None, observe(stages=stages))
    status, _ = compute(start, obs)
    steps = (*STAGES, "discovery", "reconcile")
    assert status["stage"] == "ready" or (
        status["stage"].split(": ")[0] in steps
        and status["stage"].split(": ")[1] in ("waiting", "not started", "error")
    )
    assert len(status["stage"]) <= STAGE_MAX_LENGTH


def test_timeout_and_blocked_unpeering_keep_the_stage_column_short() -> None:
    start, _ = compute(None, observe(stages=progressing("offloading")))
    late, _ = compute(start, observe(at=timedelta(seconds=301), stages=progressing("offloading")))
    assert late["peerStatus"] == "timeout" and late["stage"] == "offloading: waiting"
    blocked = teardown_blocked(late, "ProviderUnreachable", f"cannot unpeer: {LONG}", 1, T0)
    assert blocked["stage"] == "unpeering: error" and len(blocked["stage"]) <= STAGE_MAX_LENGTH
    assert cond(blocked, "Stalled")["message"] == f"cannot unpeer: {LONG}"


# -- timeout ---------------------------------------------------------------------------------


def test_timeout_then_ready() -> None:
    start, _ = compute(None, observe(stages=progressing()))
    assert start["startedAt"] == format_time(T0)

    before, events = compute(start, observe(at=timedelta(seconds=299), stages=progressing()))
    assert before["peerStatus"] == "establishing"
    assert events == []

    late, events = compute(before, observe(at=timedelta(seconds=301), stages=progressing()))
    assert late["peerStatus"] == "timeout"
    assert late["startedAt"] == format_time(T0)  # the clock is not restarted by a pass
    assert brief(late, "Stalled") == ("True", "Timeout")
    assert "300s" in cond(late, "Stalled")["message"]
    assert "waiting for the gateway server" in cond(late, "Stalled")["message"]
    assert cond(late, "Reconciling")["status"] == "False"
    assert brief(late, "Ready") == ("False", "WaitingForGatewayServer")
    assert [(e.type, e.reason) for e in events] == [("Warning", "Timeout")]

    still, events = compute(late, observe(at=timedelta(seconds=400), stages=progressing()))
    assert still["peerStatus"] == "timeout"
    assert events == []

    ready, events = compute(still, observe(at=timedelta(seconds=500)))
    assert ready["peerStatus"] == "ready"
    assert brief(ready, "Stalled") == ("False", "NotStalled")
    assert cond(ready, "Ready")["status"] == "True"
    assert ready["readyAt"] == format_time(T0 + timedelta(seconds=500))
    assert ("Normal", "PeeringReady") in reasons(events)


def test_generation_change_restarts_the_clock() -> None:
    start, _ = compute(None, observe(stages=progressing()))
    late, _ = compute(start, observe(at=timedelta(seconds=600), stages=progressing()))
    assert late["peerStatus"] == "timeout"

    now = timedelta(seconds=601)
    changed, _ = compute(late, observe(at=now, generation=2, stages=progressing()))
    assert changed["startedAt"] == format_time(T0 + now)
    assert changed["observedGeneration"] == 2
    assert changed["peerStatus"] == "establishing"
    assert brief(changed, "Stalled") == ("False", "NotStalled")
    assert cond(changed, "Reconciling")["status"] == "True"
    assert all(c["observedGeneration"] == 2 for c in changed["conditions"])


def test_degraded_ready_peering_restarts_the_clock() -> None:
    ready, _ = compute(None, observe())
    degraded, events = compute(ready, observe(at=timedelta(hours=2), stages=progressing("offloading")))
    assert degraded["peerStatus"] == "establishing"  # not timeout: the clock restarts on degradation
    assert degraded["startedAt"] == format_time(T0 + timedelta(hours=2))
    assert degraded["readyAt"] == format_time(T0)  # when it FIRST became ready
    assert ("Normal", "Establishing") in reasons(events)


# -- transitions only ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kind",
    ["ready", "establishing", "error", "no_peers"],
)
def test_unchanged_second_pass_emits_no_events(kind: str) -> None:
    def obs(at: timedelta) -> Observation:
        if kind == "ready":
            return observe(at=at)
        if kind == "establishing":
            return observe(at=at, stages=progressing())
        if kind == "error":
            return observe(at=at, error_reason="ProviderUnreachable", error_message="x")
        return observe(at=at, stages={}, created_anything=False)

    first, _ = compute(None, obs(timedelta(0)))
    second, events = compute(first, obs(timedelta(seconds=30)))
    assert events == []
    assert second == first


def test_last_transition_time_is_kept_while_status_is_unchanged() -> None:
    first, _ = compute(None, observe(stages=progressing()))
    second, _ = compute(first, observe(at=timedelta(seconds=60), stages=progressing()))
    for type_ in ("Ready", "Reconciling", "Stalled", "NetworkReady"):
        assert cond(second, type_)["lastTransitionTime"] == format_time(T0), type_
    flipped, _ = compute(second, observe(at=timedelta(seconds=120)))
    assert cond(flipped, "Ready")["lastTransitionTime"] == format_time(T0 + timedelta(seconds=120))
    assert cond(flipped, "Reconciling")["lastTransitionTime"] == format_time(T0 + timedelta(seconds=120))
    assert cond(flipped, "Stalled")["lastTransitionTime"] == format_time(T0)  # False before and after


def test_compute_does_not_mutate_the_previous_status() -> None:
    first, _ = compute(None, observe(stages=progressing()))
    snapshot = repr(first)
    compute(first, observe(at=timedelta(seconds=400), generation=2))
    assert repr(first) == snapshot


# -- before anything exists ------------------------------------------------------------------


def test_nothing_created_yet_is_no_peers() -> None:
    obs = Observation(generation=1, now=T0, timeout_seconds=300, created_anything=False)
    status, events = compute(None, obs)
    assert status["peerStatus"] == "no_peers"
    assert brief(status, "Ready") == ("False", "NotStarted")
    for type_ in ("NetworkReady", "AuthenticationReady", "OffloadingReady"):
        assert brief(status, type_) == ("Unknown", "NotStarted")
    assert cond(status, "Stalled")["status"] == "False"
    assert events == []
    assert "foreignCluster" not in status
    assert status["localClusterID"] is None and status["remoteClusterID"] is None


def test_cluster_ids_are_kept_from_the_previous_status() -> None:
    first, _ = compute(None, observe(stages=progressing()))
    obs = Observation(generation=1, now=T0, timeout_seconds=300, error_reason="KubeconfigInvalid", error_message="x")
    status, _ = compute(first, obs)
    assert (status["localClusterID"], status["remoteClusterID"]) == ("consumer-id", "provider-id")


# -- helpers ---------------------------------------------------------------------------------


def test_parse_time() -> None:
    assert parse_time("2026-03-01T12:00:00Z") == T0
    assert parse_time(None) is None
    assert parse_time("") is None


def test_is_ready() -> None:
    ready, _ = compute(None, observe())
    waiting, _ = compute(None, observe(stages=progressing()))
    assert is_ready(ready) is True
    assert is_ready(waiting) is False
    assert is_ready(None) is False
    assert is_ready({}) is False


def test_offloading_without_virtual_node_claims_no_lag_from_liqo() -> None:
    """Liqo reports offloading conditions only for virtual nodes: none are asked for, none will come,
    so the message does not speak of Liqo lagging."""
    no_vnode = fc(overrides={"offloading": []})
    status, _ = compute(None, observe(fc_obj=no_vnode))
    assert "caught up" in cond(status, "OffloadingReady")["message"]  # checked against Liqo
    unchecked = frozenset({"networking", "authentication"})
    status, events = compute(None, observe(fc_obj=no_vnode, liqo_checked=unchecked))
    assert brief(status, "OffloadingReady") == ("True", "Established")
    assert "caught up" not in cond(status, "OffloadingReady")["message"]
    assert status["peerStatus"] == "ready"
    assert ("Normal", "PeeringReady") in reasons(events)


def test_requeue_after() -> None:
    status, _ = compute(None, observe(stages=progressing("networking")))
    obs = observe(stages=progressing("networking"))
    assert requeue_after(status, obs, transient_error=True) == TRANSIENT_RETRY_SECONDS
    left = requeue_after(status, obs, transient_error=False)
    assert left is not None and 0.5 <= left <= obs.timeout_seconds
    ready, _ = compute(None, observe())
    assert requeue_after(ready, observe(), transient_error=False) is None


def test_teardown_blocked_is_stalled_and_not_ready() -> None:
    ready, _ = compute(None, observe())
    patch = teardown_blocked(ready, "ProviderUnreachable", "cannot unpeer: down", 3, T0)
    assert patch["peerStatus"] == "error" and patch["stage"] == "unpeering: error"
    assert brief(patch, "Stalled") == ("True", "ProviderUnreachable")
    assert brief(patch, "Ready") == ("False", "ProviderUnreachable")
    assert cond(patch, "Ready")["observedGeneration"] == 3


# -- a normal wait reported as an error class -----------------------------------------------------


def waiting_errors() -> list[type[PeeringError]]:
    def every(cls: type[PeeringError]) -> list[type[PeeringError]]:
        return [cls, *(c for sub in cls.__subclasses__() for c in every(sub))]

    return sorted({c for c in every(PeeringError) if c.waiting}, key=lambda c: c.reason)


def test_the_waits_are_liqo_starting_a_certificate_and_a_namespace_going() -> None:
    assert [c.reason for c in waiting_errors()] == ["CertificateNotIssued", "LiqoNotReady", "NamespaceTerminating"]
    assert all(c.transient for c in waiting_errors())  # a wait is retried by itself


@pytest.mark.parametrize("error", waiting_errors(), ids=lambda c: c.reason)
def test_a_normal_wait_is_establishing_without_a_warning(error: type[PeeringError]) -> None:
    exc = error.__new__(error)  # the stage's error as raised; only its class matters here
    PeeringError.__init__(exc, "Liqo is starting")
    stages = {"networking": StageResult.failed("networking", exc, "Liqo is starting")}
    status, events = compute(None, observe(stages=stages, error_reason=error.reason, error_waiting=True))
    assert status["peerStatus"] == "establishing"
    assert status["stage"] == "networking: waiting"
    assert brief(status, "Ready") == ("False", error.reason)
    assert brief(status, "Stalled") == ("False", "NotStalled")
    assert brief(status, "Reconciling") == ("True", "Progressing")
    assert [e for e in events if e.type != "Normal"] == []
    # Before any stage (discovery found Liqo not ready): still a wait.
    status, events = compute(None, observe(stages={}, error_reason=error.reason, error_waiting=True))
    assert (status["peerStatus"], status["stage"]) == ("establishing", "discovery: waiting")
    # A wait that outlasts spec.timeout is a timeout, said once.
    later, events = compute(status, observe(at=timedelta(seconds=301), stages={}, error_reason=error.reason,
                                            error_waiting=True))  # fmt: skip
    assert later["peerStatus"] == "timeout" and ("Warning", "Timeout") in reasons(events)
    assert brief(later, "Stalled") == ("True", "Timeout")
