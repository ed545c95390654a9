"""The error boundary: whatever a stage or a pass raises, the status says so (Ready=False, InternalError, the
stage's condition, a message naming the exception, scrubbed), with a Warning Event and the errors metric, and
no stage thread outlives its pass."""

from __future__ import annotations

import asyncio
import threading
from datetime import UTC, datetime
from typing import Any, cast

import pytest
import structlog.testing
from prometheus_client import CollectorRegistry

from liqo_peering.api.model import LiqoPeeringSpec
from liqo_peering.clients.events import EventRecorder
from liqo_peering.engine import stagerunner
from liqo_peering.engine.direction import PeeringRun
from liqo_peering.engine.discovery import KubeconfigPolicy
from liqo_peering.engine.kinds import Peerings, PeeringSets
from liqo_peering.engine.passmarkers import PassMarkers
from liqo_peering.engine.peeringset import SetService
from liqo_peering.engine.reconcile import Reconciler
from liqo_peering.engine.runner import ObjectKey, Runner
from liqo_peering.engine.stagerunner import run_stages, side_by_side
from liqo_peering.engine.unpeering import Unpeerer
from liqo_peering.engine.wakeups import Wakeups
from liqo_peering.engine.watches import WatchHub
from liqo_peering.errors import ApiError, ClusterUnreachable
from liqo_peering.health import TrackedPool
from liqo_peering.liqo import naming
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


def service(monkeypatch: pytest.MonkeyPatch, **stages: Any) -> tuple[Reconciler, FakeClusterClient, Events]:
    """A service whose discovery and stages are replaced (``stages``: by module name, ready unless given)."""
    local, provider, events = FakeClusterClient("consumer"), FakeClusterClient("provider"), Events()
    local.add(
        r.LIQOPEERING,
        {
            "metadata": {"name": NAME, "namespace": NS, "generation": 1, "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"remoteKubeconfigSecretRef": {"name": "provider-kubeconfig"}},
        },
    )
    svc = Reconciler(
        local,
        cast(EventRecorder, events),
        Metrics(CollectorRegistry()),
        KubeconfigPolicy(),
        now=lambda: NOW,
        protect_secrets=False,
    )
    monkeypatch.setattr(svc, "_discovery_client", lambda body, spec: (provider, None))
    monkeypatch.setattr(svc, "_remote_client", lambda body, spec, *_: (provider, Credentials()))
    monkeypatch.setattr(svc, "_discover", lambda *_: CTX)
    monkeypatch.setattr(svc, "_tenancy", lambda found, remote: found)
    monkeypatch.setattr(stagerunner.networking, "reconcile", stages.get("networking", ready("networking")))
    monkeypatch.setattr(stagerunner.authentication, "reconcile", stages.get("authentication", ready("authentication")))
    monkeypatch.setattr(stagerunner.offloading, "reconcile", stages.get("offloading", ready("offloading")))
    return svc, local, events


def conditions(local: FakeClusterClient) -> dict[str, dict[str, Any]]:
    status = local.obj(r.LIQOPEERING, NAME, NS)["status"]
    return {c["type"]: c for c in status["conditions"]}


def errors_counted(svc: Reconciler, reason: str) -> float:
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


def test_stage_jobs_have_ended_even_when_the_stage_on_the_passs_thread_raises() -> None:
    """``side_by_side`` with a guard that lets the main stage's exception through: the authentication job (in
    the pool of sub-calls) has finished by the time the exception leaves, so no job of a pass outlives it (nor
    its lock)."""
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

    pool = TrackedPool(2, "calls")
    try:
        with pytest.raises(KeyboardInterrupt):
            side_by_side(pool, passthrough, {"authentication": authentication}, main=("networking", networking))
        assert order == ["authentication done"]
    finally:
        pool.shutdown()


def test_run_stages_reports_a_raising_authentication_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """It used to end the thread: the stage was missing and the status said it had not started."""
    svc, _, _ = service(monkeypatch, authentication=boom)
    spec = LiqoPeeringSpec.model_validate({"remoteKubeconfigSecretRef": {"name": "k"}})
    results = run_stages(PeeringRun(spec, svc.local, FakeClusterClient("provider"), CTX), None)
    assert (results["authentication"].state, results["authentication"].reason) == ("error", "InternalError")
    assert "offloading" not in results


# == the runner's boundary: what escapes a pass ============================================================


KEY = ObjectKey("LiqoPeering", NS, NAME)


def peering_runner(svc: Reconciler, events: Events, markers: PassMarkers | None = None) -> Runner:
    """A runner of LiqoPeerings with ``svc`` as their reconcile pass and a real unpeering pass."""
    unpeerer = Unpeerer(svc.local, cast(EventRecorder, events), svc.metrics, KubeconfigPolicy(), now=lambda: NOW)
    return Runner([Peerings(svc, unpeerer, 60.0)], cast(WatchHub, Hub()), Wakeups(), markers)


def count_discoveries(monkeypatch: pytest.MonkeyPatch, svc: Reconciler) -> list[str]:
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
    run = peering_runner(svc, events)
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
    svc, local, events = service(monkeypatch)
    real = local.merge_patch
    failing = [True]

    def merge_patch(*args: Any, **kwargs: Any) -> Any:
        if failing and kwargs.get("subresource") == "status":
            failing.clear()
            raise ValueError("the status write failed")
        return real(*args, **kwargs)

    monkeypatch.setattr(local, "merge_patch", merge_patch)
    run = peering_runner(svc, events)
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
    svc, _, events = service(monkeypatch)

    def failing(*_: Any) -> None:
        raise raised

    monkeypatch.setattr(svc, "reconcile", failing)
    run = peering_runner(svc, events)
    with structlog.testing.capture_logs() as logs:
        run.one_pass(KEY)
    (failed,) = [entry for entry in logs if entry["event"] == "pass failed; reporting it"]
    assert (failed.get("exc_info") is not None) is traceback


def test_the_operators_own_cluster_unavailable_is_put_off_not_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    svc, local, events = service(monkeypatch)

    def down(*_: Any) -> None:
        raise ApiError("etcd is restarting", status=503, side="consumer")

    monkeypatch.setattr(svc, "reconcile", down)
    run = peering_runner(svc, events)
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


# == unpeering: the same boundary ========================================================================


def deleted(local: FakeClusterClient, peered: bool = True) -> dict[str, Any]:
    """The LiqoPeering being deleted, as the delete handler gets it (``peered``: its status names both clusters)."""
    body = local.obj(r.LIQOPEERING, NAME, NS)
    body["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:01Z"
    body["metadata"]["finalizers"] = [naming.OPERATOR_FINALIZER]  # kept until the delete handler is done
    body["status"] = {"localClusterID": "consumer-id", "remoteClusterID": "provider-id"} if peered else {}
    return body


def series_of(svc: Reconciler) -> list[Any]:
    """The metrics' samples of the peering."""
    return [x for m in svc.metrics.registry.collect() for x in m.samples if x.labels.get("name") == NAME]


def unpeering_of(run: Runner) -> Unpeerer:
    return cast(Peerings, run.kinds["LiqoPeering"]).unpeerer


@pytest.mark.parametrize(
    ("raised", "reason", "traceback"),
    [
        (RuntimeError(f"boom with token {TOKEN}"), "InternalError", True),
        (ClusterUnreachable("provider", "https://198.18.0.2:6443", "connection refused"), "ProviderUnreachable", False),
    ],
)
def test_an_unpeering_failure_is_reported_by_the_runners_boundary_like_a_reconcile_failure(
    monkeypatch: pytest.MonkeyPatch, raised: Exception, reason: str, traceback: bool
) -> None:
    """Whatever an unpeering pass raises, the runner reports it through the kind: the status says why deletion
    does not finish and how to force it, scrubbed; a traceback is logged for the unexpected only; the delete
    handler gets the message to retry with, and the peering's state stays for the next pass."""
    svc, local, events = service(monkeypatch)
    run = peering_runner(svc, events)

    def failing(*_: Any) -> None:
        raise raised

    monkeypatch.setattr(unpeering_of(run), "_unpeer", failing)
    with structlog.testing.capture_logs() as logs:
        outcome = asyncio.run(run.unpeer(KEY, deleted(local)))
    assert outcome.failure is not None and outcome.remaining == ()
    conds = conditions(local)
    for condition in (conds["Ready"], conds["Stalled"]):
        assert condition["reason"] == reason
        assert condition["message"] == outcome.failure
    assert conds["Ready"]["status"] == "False" and conds["Stalled"]["status"] == "True"
    assert outcome.failure.startswith("cannot unpeer: ") and f'{naming.FORCE_DELETE}="true"' in outcome.failure
    assert TOKEN not in outcome.failure
    assert local.obj(r.LIQOPEERING, NAME, NS)["status"]["peerStatus"] == "error"
    (failed,) = [entry for entry in logs if entry["event"] == "teardown failed; reporting it"]
    assert (failed.get("exc_info") is not None) is traceback
    assert KEY in run._locks  # not forgotten: kopf calls again
    assert not [e for e in events.sent if e[1] == "Unpeered"]


def test_the_operators_own_cluster_unavailable_during_unpeering_is_raised_not_reported(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    svc, local, events = service(monkeypatch)
    run = peering_runner(svc, events)

    def down(*_: Any) -> None:
        raise ApiError("etcd is restarting", status=503, side="consumer")

    monkeypatch.setattr(unpeering_of(run), "_unpeer", down)
    body = deleted(local)
    with pytest.raises(ApiError):
        run.teardown(KEY, body)
    assert "conditions" not in local.obj(r.LIQOPEERING, NAME, NS)["status"] and events.sent == []


def test_an_unpeering_that_ends_says_so_and_forgets_the_peering(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing was made for a peering never peered: one pass ends it, with the Unpeered Event, its metrics
    forgotten, and nothing of it kept."""
    svc, local, events = service(monkeypatch)
    run = peering_runner(svc, events)
    run.one_pass(KEY)
    assert series_of(svc)
    body = deleted(local, peered=False)
    outcome = asyncio.run(run.unpeer(KEY, body))
    assert (outcome.remaining, outcome.failure) == ((), None)
    assert ("Normal", "Unpeered") in [(t, reason) for t, reason, _ in events.sent]
    assert series_of(svc) == []
    assert run._locks == {} and unpeering_of(run)._found == {}


def test_after_a_stage_raised_the_next_pass_discovers_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """Even when only Liqo's ForeignCluster changed: no fast path onto the failed pass, no reused discovery."""
    svc, local, events = service(monkeypatch, offloading=boom)
    discoveries = count_discoveries(monkeypatch, svc)
    run = peering_runner(svc, events)
    run.one_pass(KEY)
    assert conditions(local)["OffloadingReady"]["reason"] == "InternalError"
    monkeypatch.setattr(stagerunner.offloading, "reconcile", ready("offloading"))
    run.one_pass(KEY, frozenset({"ForeignCluster"}))
    assert discoveries == ["discover", "discover"]
    assert conditions(local)["Ready"]["status"] == "True"


def test_an_internal_error_is_retried_sooner_than_other_transient_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    svc, _, _ = service(monkeypatch, networking=boom)
    assert svc.reconcile(NS, NAME).requeue_after == 1.0  # then backed off as any other (Peerings.delay)
