"""The error boundary: whatever a stage or a pass raises, the status says so (Ready=False, InternalError, the
stage's condition, a message naming the exception, scrubbed), with a Warning Event and the errors metric, and
no stage thread outlives its pass."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from typing import Any, cast

import pytest
import structlog.testing
from prometheus_client import CollectorRegistry

from liqo_peering.api.model import LiqoPeeringSpec
from liqo_peering.clients.events import EventRecorder
from liqo_peering.engine import service as service_module
from liqo_peering.engine.direction import PeeringRun
from liqo_peering.engine.discovery import KubeconfigPolicy
from liqo_peering.engine.kinds import Peerings, PeeringSets
from liqo_peering.engine.peeringset import SetService
from liqo_peering.engine.runner import ObjectKey, Runner, Wakeups
from liqo_peering.engine.service import PeeringService
from liqo_peering.engine.watches import WatchHub
from liqo_peering.errors import ApiError, InternalError
from liqo_peering.liqo import resources as r
from liqo_peering.liqo.context import ClusterInfo, PeeringContext
from liqo_peering.metrics import Metrics
from liqo_peering.stages import StageResult
from unit.fakes import FakeClusterClient, Hub

NOW = datetime(2026, 1, 1, tzinfo=UTC)
NS, NAME = "team-a", "to-provider"
TOKEN = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJvcGVyYXRvciJ9.c2lnbmF0dXJl"  # a JWT: redact scrubs it
CTX = PeeringContext(
    NS,
    NAME,
    ClusterInfo("consumer-id", ("10.100.0.0/16",), "10.110.0.0/16"),
    ClusterInfo("provider-id", ("10.200.0.0/16",), "10.210.0.0/16"),
    consumer_tenant_ns="liqo-tenant-provider-id",
    provider_tenant_ns="liqo-tenant-consumer-id",
)


class Events:
    def __init__(self) -> None:
        self.sent: list[tuple[str, str, str]] = []

    def emit(self, body: dict[str, Any], type_: str, reason: str, message: str) -> None:
        self.sent.append((type_, reason, message))


class Credentials:
    observation = None


def ready(stage: str) -> Any:
    return lambda *_: StageResult.ready(stage, "ok")


def boom(*_: Any) -> StageResult:
    raise RuntimeError(f"boom with token {TOKEN}")


def service(monkeypatch: pytest.MonkeyPatch, **stages: Any) -> tuple[PeeringService, FakeClusterClient, Events]:
    """A service whose discovery and stages are replaced (``stages``: by module name, ready unless given)."""
    local, provider, events = FakeClusterClient("consumer"), FakeClusterClient("provider"), Events()
    local.add(
        r.LIQOPEERING,
        {
            "metadata": {"name": NAME, "namespace": NS, "generation": 1, "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"remoteKubeconfigSecretRef": {"name": "provider-kubeconfig"}},
        },
    )
    svc = PeeringService(
        local,
        cast(EventRecorder, events),
        Metrics(CollectorRegistry()),
        KubeconfigPolicy(),
        now=lambda: NOW,
        protect_secrets=False,
    )
    monkeypatch.setattr(svc, "_discovery_client", lambda body, spec: provider)
    monkeypatch.setattr(svc, "_remote_client", lambda body, spec, *_: (provider, Credentials()))
    monkeypatch.setattr(svc, "_discover", lambda *_: CTX)
    monkeypatch.setattr(svc, "_tenancy", lambda found, remote: found)
    monkeypatch.setattr(service_module.networking, "reconcile", stages.get("networking", ready("networking")))
    monkeypatch.setattr(
        service_module.authentication, "reconcile", stages.get("authentication", ready("authentication"))
    )
    monkeypatch.setattr(service_module.offloading, "reconcile", stages.get("offloading", ready("offloading")))
    return svc, local, events


def conditions(local: FakeClusterClient) -> dict[str, dict[str, Any]]:
    status = local.obj(r.LIQOPEERING, NAME, NS)["status"]
    return {c["type"]: c for c in status["conditions"]}


def errors_counted(svc: PeeringService, reason: str) -> float:
    return svc.metrics.registry.get_sample_value("liqo_peering_reconcile_errors_total", {"reason": reason}) or 0.0


@pytest.mark.parametrize(
    ("stage", "condition"),
    [("networking", "NetworkReady"), ("authentication", "AuthenticationReady"), ("offloading", "OffloadingReady")],
)
def test_a_stage_raising_anything_is_an_internal_error_of_that_stage(
    monkeypatch: pytest.MonkeyPatch, stage: str, condition: str
) -> None:
    """Any stage, on the pass's own thread (networking, offloading) or in a thread of its own (authentication)."""
    svc, local, events = service(monkeypatch, **{stage: boom})
    outcome = svc.reconcile(NS, NAME)
    conds = conditions(local)
    assert (conds["Ready"]["status"], conds["Ready"]["reason"]) == ("False", "InternalError")
    assert (conds[condition]["status"], conds[condition]["reason"]) == ("False", "InternalError")
    for message in (conds["Ready"]["message"], conds[condition]["message"]):
        assert "RuntimeError" in message and "boom" in message and TOKEN not in message
    assert ("Warning", "InternalError") in [(t, reason) for t, reason, _ in events.sent]
    assert all(TOKEN not in message for _, _, message in events.sent)
    assert errors_counted(svc, "InternalError") == 1
    assert outcome.transient_error  # retried with backoff


def test_a_pass_raising_outside_the_stages_is_an_internal_error(monkeypatch: pytest.MonkeyPatch) -> None:
    svc, local, events = service(monkeypatch)
    monkeypatch.setattr(svc, "_discover", boom)
    svc.reconcile(NS, NAME)
    ready_cond = conditions(local)["Ready"]
    assert (ready_cond["status"], ready_cond["reason"]) == ("False", "InternalError")
    assert "RuntimeError" in ready_cond["message"] and TOKEN not in ready_cond["message"]
    assert ("Warning", "InternalError") in [(t, reason) for t, reason, _ in events.sent]


def test_stage_threads_are_joined_even_when_the_stage_on_the_passs_thread_raises() -> None:
    """``_concurrently`` with a guard that lets the main stage's exception through: the authentication thread
    has finished by the time the exception leaves, so no thread of a pass outlives it (nor its lock)."""
    order: list[str] = []
    started, release = threading.Event(), threading.Event()

    def authentication() -> StageResult:
        started.set()
        release.wait(10)
        order.append("authentication done")
        return StageResult.ready("authentication", "ok")

    def networking() -> StageResult:
        started.wait(10)
        release.set()
        raise KeyboardInterrupt  # not an Exception: no guard catches it

    def passthrough(stage: str, fn: Any) -> StageResult:
        return cast(StageResult, fn())

    with pytest.raises(KeyboardInterrupt):
        PeeringService._concurrently(passthrough, {"authentication": authentication}, main=("networking", networking))
    assert order == ["authentication done"]
    assert not [t for t in threading.enumerate() if t.name.startswith("stage-")]


def test_run_stages_reports_a_raising_authentication_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """It used to end the thread: the stage was missing and the status said it had not started."""
    svc, _, _ = service(monkeypatch, authentication=boom)
    spec = LiqoPeeringSpec.model_validate({"remoteKubeconfigSecretRef": {"name": "k"}})
    results = svc._run_stages(PeeringRun(spec, svc.local, FakeClusterClient("provider"), CTX))
    assert (results["authentication"].state, results["authentication"].reason) == ("error", "InternalError")
    assert "offloading" not in results


# == the runner's boundary: what escapes a pass ============================================================


KEY = ObjectKey("LiqoPeering", NS, NAME)


def count_discoveries(monkeypatch: pytest.MonkeyPatch, svc: PeeringService) -> list[str]:
    """Discovery stubbed to find CTX; the list grows by one entry per discovery."""
    discoveries: list[str] = []

    def discover(*_: Any) -> PeeringContext:
        discoveries.append("discover")
        return CTX

    monkeypatch.setattr(svc, "_discover", discover)
    return discoveries


def test_a_pass_raising_is_reported_and_the_next_one_discovers_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """A ready peering whose pass raises (here the ForeignCluster fast path) says so at once: Ready=False
    InternalError, not Ready=True with a current observedGeneration; the next pass starts from discovery."""
    svc, local, events = service(monkeypatch)
    discoveries = count_discoveries(monkeypatch, svc)
    run = Runner([Peerings(svc, 60.0)], cast(WatchHub, Hub()), Wakeups())
    assert not run.one_pass(KEY).transient_error
    assert conditions(local)["Ready"]["status"] == "True"

    def crash(*_: Any) -> None:
        raise RuntimeError(f"boom with token {TOKEN}")

    monkeypatch.setattr(svc, "refresh_mirror", crash)
    outcome = run.one_pass(KEY, frozenset({"ForeignCluster"}))
    assert outcome.transient_error and not outcome.gone
    conds = conditions(local)
    assert (conds["Ready"]["status"], conds["Ready"]["reason"]) == ("False", "InternalError")
    assert "RuntimeError" in conds["Ready"]["message"] and TOKEN not in conds["Ready"]["message"]
    assert conds["NetworkReady"]["status"] == "True"  # what the failed pass did not look at stays
    assert local.obj(r.LIQOPEERING, NAME, NS)["status"]["peerStatus"] == "error"
    assert ("Warning", "InternalError") in [(t, reason) for t, reason, _ in events.sent]
    assert errors_counted(svc, "InternalError") == 1

    # The same wake-up again: no fast path, no reused discovery (the failed pass left nothing to reuse).
    run.one_pass(KEY, frozenset({"ForeignCluster"}))
    assert discoveries == ["discover", "discover"]
    assert conditions(local)["Ready"]["status"] == "True"


def test_a_status_write_that_raises_is_reported_by_the_next_write(monkeypatch: pytest.MonkeyPatch) -> None:
    svc, local, _ = service(monkeypatch)
    real = local.merge_patch
    failing = [True]

    def merge_patch(*args: Any, **kwargs: Any) -> Any:
        if failing and kwargs.get("subresource") == "status":
            failing.clear()
            raise ValueError("the status write failed")
        return real(*args, **kwargs)

    monkeypatch.setattr(local, "merge_patch", merge_patch)
    run = Runner([Peerings(svc, 60.0)], cast(WatchHub, Hub()), Wakeups())
    run.one_pass(KEY)
    ready_cond = conditions(local)["Ready"]
    assert (ready_cond["reason"], "ValueError" in ready_cond["message"]) == ("InternalError", True)
    run.one_pass(KEY)
    assert conditions(local)["Ready"]["status"] == "True"


@pytest.mark.parametrize(
    ("raised", "traceback"),
    [(ApiError("conflict", status=409, side="consumer"), False), (ValueError("a bug"), True)],
)
def test_a_failed_pass_logs_a_traceback_for_the_unexpected_only(
    monkeypatch: pytest.MonkeyPatch, raised: Exception, traceback: bool
) -> None:
    """A typed error is data, reported in the status; only an untyped one (a bug) logs its traceback."""
    svc, _, _ = service(monkeypatch)

    def failing(*_: Any) -> None:
        raise raised

    monkeypatch.setattr(svc, "reconcile", failing)
    run = Runner([Peerings(svc, 60.0)], cast(WatchHub, Hub()), Wakeups())
    with structlog.testing.capture_logs() as logs:
        run.one_pass(KEY)
    (failed,) = [entry for entry in logs if entry["event"] == "pass failed; reporting it"]
    assert (failed.get("exc_info") is not None) is traceback


def test_the_operators_own_cluster_unavailable_is_put_off_not_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    svc, local, events = service(monkeypatch)

    def down(*_: Any) -> None:
        raise ApiError("etcd is restarting", status=503, side="consumer")

    monkeypatch.setattr(svc, "reconcile", down)
    run = Runner([Peerings(svc, 60.0)], cast(WatchHub, Hub()), Wakeups())
    with pytest.raises(ApiError):
        run.one_pass(KEY)
    assert "status" not in local.obj(r.LIQOPEERING, NAME, NS) and events.sent == []


# == LiqoPeeringSets ======================================================================================

SET_KEY = ObjectKey("LiqoPeeringSet", NS, "edge")


def set_service() -> tuple[SetService, FakeClusterClient, Events]:
    local, events = FakeClusterClient("consumer"), Events()
    local.add(
        r.LIQOPEERINGSET,
        {
            "metadata": {"name": "edge", "namespace": NS, "uid": "set-uid", "generation": 1},
            "spec": {"selector": {"matchLabels": {"fleet": "edge"}}, "template": {}},
        },
    )
    return SetService(local, cast(EventRecorder, events), now=lambda: NOW), local, events


def set_conditions(local: FakeClusterClient) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in local.obj(r.LIQOPEERINGSET, "edge", NS)["status"]["conditions"]}


@pytest.mark.parametrize("where", ["in the pass", "reading the set"])
def test_a_set_pass_raising_is_reported_in_the_sets_status(monkeypatch: pytest.MonkeyPatch, where: str) -> None:
    svc, local, events = set_service()
    run = Runner([PeeringSets(svc, 60.0)], cast(WatchHub, Hub()), Wakeups())
    run.one_pass(SET_KEY)
    assert set_conditions(local)["Ready"]["status"] == "True"
    real_get, real_find = local.get, local.find
    once = [True]

    def get(res: r.Resource, *args: Any) -> Any:
        if where == "reading the set" and once and res == r.LIQOPEERINGSET:
            once.clear()
            raise RuntimeError(f"boom with token {TOKEN}")
        return real_get(res, *args)

    def find(res: r.Resource, *args: Any, **kwargs: Any) -> Any:
        if where == "in the pass" and once:
            once.clear()
            raise RuntimeError(f"boom with token {TOKEN}")
        return real_find(res, *args, **kwargs)

    monkeypatch.setattr(local, "get", get)
    monkeypatch.setattr(local, "find", find)
    assert run.one_pass(SET_KEY).transient_error
    ready_cond = set_conditions(local)["Ready"]
    assert (ready_cond["status"], ready_cond["reason"]) == ("False", "InternalError")
    assert "RuntimeError" in ready_cond["message"] and TOKEN not in ready_cond["message"]
    assert ("Warning", "InternalError") in [(t, reason) for t, reason, _ in events.sent]
    run.one_pass(SET_KEY)
    assert set_conditions(local)["Ready"]["status"] == "True"


def test_a_teardown_raising_anything_is_an_internal_error_the_delete_handler_reports(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    svc, local, _ = service(monkeypatch)
    monkeypatch.setattr(svc, "teardown", boom)
    run = Runner([Peerings(svc, 60.0)], cast(WatchHub, Hub()), Wakeups())
    with pytest.raises(InternalError) as raised:
        run.teardown(KEY, local.obj(r.LIQOPEERING, NAME, NS))
    assert isinstance(raised.value.failed, RuntimeError) and raised.value.where == "the teardown"


def test_after_a_stage_raised_the_next_pass_discovers_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """Even when only Liqo's ForeignCluster changed: no fast path onto the failed pass, no reused discovery."""
    svc, local, _ = service(monkeypatch, offloading=boom)
    discoveries = count_discoveries(monkeypatch, svc)
    run = Runner([Peerings(svc, 60.0)], cast(WatchHub, Hub()), Wakeups())
    run.one_pass(KEY)
    assert conditions(local)["OffloadingReady"]["reason"] == "InternalError"
    monkeypatch.setattr(service_module.offloading, "reconcile", ready("offloading"))
    run.one_pass(KEY, frozenset({"ForeignCluster"}))
    assert discoveries == ["discover", "discover"]
    assert conditions(local)["Ready"]["status"] == "True"


def test_an_internal_error_is_retried_sooner_than_other_transient_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    svc, _, _ = service(monkeypatch, networking=boom)
    assert svc.reconcile(NS, NAME).requeue_after == 1.0  # then backed off as any other (Peerings.delay)
