"""The runner with LiqoPeerings: one pass per peering at a time, the ForeignCluster fast path, backoff, and the
routes it gives the watch hub. The passes are a stand-in object: these tests are about the runner's own jobs."""

from __future__ import annotations

import asyncio
import threading
from typing import Any, cast

import pytest

from liqo_peering.api.model import LiqoPeeringSpec
from liqo_peering.engine import stagerunner
from liqo_peering.engine.direction import PeeringRun
from liqo_peering.engine.kinds import Peerings
from liqo_peering.engine.reconcile import Outcome, Reconciler
from liqo_peering.engine.runner import ObjectKey, Runner, TeardownOutcome
from liqo_peering.engine.stagerunner import run_stages
from liqo_peering.engine.statuswriter import STATUS_DUE
from liqo_peering.engine.unpeering import Teardown, Unpeerer
from liqo_peering.engine.wakeups import Wakeups
from liqo_peering.engine.watches import (
    HEALTH_CHANGED,
    KUBECONFIG,
    LIQO_IDENTITY,
    RELISTED,
    WatchHub,
    teardown_routes,
)
from liqo_peering.errors import (
    AdmissionDenied,
    AnswerTooSlow,
    ApiError,
    ClusterUnreachable,
    PeeringError,
    Request,
    ResourceSliceDenied,
    own_cluster_unavailable,
)
from liqo_peering.liqo import resources as r
from liqo_peering.liqo.context import ClusterInfo, PeeringContext
from liqo_peering.stages import StageResult
from unit.fakes import FakeClusterClient, Hub, Stopped


class Service:
    """Both passes of a LiqoPeering, recording calls; ``reconcile`` and ``unpeer`` can be replaced per test."""

    def __init__(self) -> None:
        self.local = FakeClusterClient("consumer")
        self.restart_liqo = False  # --restart-liqo-on-renewal, which the routes read
        self.calls: list[str] = []
        self.released: list[tuple[str, str]] = []
        self.mirror_result: Outcome | None = None

    def reconcile(self, namespace: str, name: str, known: Outcome | None = None, routed: Any = None) -> Outcome:
        self.calls.append(f"reconcile {name}" + (" reusing" if known is not None else ""))
        return Outcome(secret=(namespace, "kubeconfig"))

    def refresh_mirror(self, namespace: str, name: str, last: Outcome) -> Outcome | None:
        self.calls.append(f"mirror {name}")
        return self.mirror_result

    def unpeer(self, body: dict[str, Any]) -> Teardown:
        self.calls.append("teardown")
        return Teardown()

    def deleting(self, body: dict[str, Any]) -> None:
        pass

    def finished(self, body: dict[str, Any]) -> None:
        pass

    def forget(self, namespace: str, name: str) -> None:
        """Either pass forgetting the peering releases it."""
        if (namespace, name) not in self.released:
            self.released.append((namespace, name))


KEY = ObjectKey("LiqoPeering", "ns", "p")
FOREIGN_CLUSTER_ONLY = frozenset({"ForeignCluster"})
LIQO_ONLY = frozenset({"Connection"})  # one of Liqo's objects changed, nothing else


def runner(service: Service | None = None) -> tuple[Runner, Service, Hub]:
    svc, hub = service or Service(), Hub()
    kind = Peerings(cast(Reconciler, svc), cast(Unpeerer, svc), 60.0)
    return Runner([kind], cast(WatchHub, hub), Wakeups()), svc, hub


def peerings(run: Runner) -> Peerings:
    return cast(Peerings, run.kinds["LiqoPeering"])


def test_teardown_waits_for_the_running_reconcile_of_the_same_peering() -> None:
    run, svc, _ = runner()
    order: list[str] = []
    reconciling, release = threading.Event(), threading.Event()

    def slow_reconcile(namespace: str, name: str, known: Outcome | None = None, routed: Any = None) -> Outcome:
        reconciling.set()
        release.wait(10)
        order.append("reconcile applied")
        return Outcome()

    svc.reconcile = slow_reconcile  # type: ignore[method-assign]
    svc.unpeer = lambda body: order.append("teardown") or Teardown()  # type: ignore[method-assign,func-returns-value]
    worker = threading.Thread(target=run.one_pass, args=(KEY,))
    worker.start()
    assert reconciling.wait(10)
    unpeer = threading.Thread(target=run.teardown, args=(KEY, {"metadata": {"namespace": "ns", "name": "p"}}))
    unpeer.start()
    unpeer.join(0.3)
    assert unpeer.is_alive() and order == []  # blocked behind the reconcile, not skipped
    release.set()
    worker.join(10)
    unpeer.join(10)
    assert order == ["reconcile applied", "teardown"]


def test_other_peerings_are_not_blocked() -> None:
    run, svc, _ = runner()
    reconciling, release = threading.Event(), threading.Event()

    def slow_reconcile(namespace: str, name: str, known: Outcome | None = None, routed: Any = None) -> Outcome:
        reconciling.set()
        release.wait(10)
        return Outcome()

    svc.reconcile = slow_reconcile  # type: ignore[method-assign]
    svc.unpeer = lambda body: Teardown(("something",))  # type: ignore[method-assign]
    worker = threading.Thread(target=run.one_pass, args=(KEY,))
    worker.start()
    try:
        assert reconciling.wait(10)
        other = ObjectKey("LiqoPeering", "ns", "other")
        assert run.teardown(other, {"metadata": {"namespace": "ns", "name": "other"}}).remaining == ("something",)
    finally:
        release.set()
        worker.join(10)


def test_the_foreign_cluster_fast_path_uses_the_last_outcome_and_falls_back() -> None:
    run, svc, _ = runner()
    run.one_pass(KEY, FOREIGN_CLUSTER_ONLY)  # nothing observed yet: a full pass
    assert svc.calls == ["reconcile p"]
    run.one_pass(KEY, FOREIGN_CLUSTER_ONLY)  # the fast path says a reconcile is needed (None): it reuses discovery
    assert svc.calls[1:] == ["mirror p", "reconcile p reusing"]
    svc.mirror_result = Outcome(secret=("ns", "kubeconfig"))
    run.one_pass(KEY, FOREIGN_CLUSTER_ONLY)
    assert svc.calls[3:] == ["mirror p"]
    # A held status due (statuswriter.py), alone or with the ForeignCluster: the same fast path writes it.
    run.one_pass(KEY, frozenset({STATUS_DUE}))
    run.one_pass(KEY, FOREIGN_CLUSTER_ONLY | {STATUS_DUE})
    assert svc.calls[4:] == ["mirror p", "mirror p"]


def test_a_pass_woken_by_liqos_objects_only_reuses_the_last_discovery() -> None:
    run, svc, _ = runner()
    run.one_pass(KEY, LIQO_ONLY)  # nothing known yet
    run.one_pass(KEY, LIQO_ONLY)
    run.one_pass(KEY)
    assert svc.calls == ["reconcile p", "reconcile p reusing", "reconcile p"]


def test_the_kubeconfig_and_liqos_identity_leave_the_reuse_to_the_reconciler() -> None:
    """The Secret's change may be the operator's own finalizer, an identity informer's first list what the pass
    just read: the reconciler reuses the discovery only with the same kubeconfig and the same cluster-ID
    ConfigMaps. A spec change always discovers again."""
    run, svc, _ = runner()
    run.one_pass(KEY)
    run.one_pass(KEY, frozenset({KUBECONFIG}))
    run.one_pass(KEY, frozenset({LIQO_IDENTITY}))
    run.one_pass(KEY, frozenset({KUBECONFIG, "spec"}))
    assert svc.calls == ["reconcile p", "reconcile p reusing", "reconcile p reusing", "reconcile p"]


def test_each_pass_gives_the_hub_its_routes_and_teardown_forgets_everything() -> None:
    run, svc, hub = runner()
    run.one_pass(KEY)
    (route,) = hub.routes[KEY]  # no context yet: only the kubeconfig Secret
    assert (route.scope.res, route.scope.namespace, route.name) == (r.SECRET, "ns", "kubeconfig")
    assert route.wake_as == "kubeconfig"  # a rotated kubeconfig: the next pass's provider client is another
    run.teardown(KEY, {"metadata": {"namespace": "ns", "name": "p"}})
    assert KEY not in hub.routes and svc.released == [("ns", "p")]
    assert peerings(run)._last == {} and run._locks == {}


def test_a_pass_gives_the_hub_its_routes_before_its_stages_write() -> None:
    svc, hub = Service(), Hub()
    kind = Peerings(cast(Reconciler, svc), cast(Unpeerer, svc), 60.0, hub=cast(WatchHub, hub))
    run = Runner([kind], cast(WatchHub, hub), Wakeups())
    routed_mid_pass: list[Any] = []

    def reconcile(namespace: str, name: str, known: Outcome | None = None, routed: Any = None) -> Outcome:
        outcome = Outcome(secret=(namespace, "kubeconfig"))
        routed(outcome)  # where the reconciler calls it: its context known, nothing written yet
        routed_mid_pass.extend(hub.routes.get(KEY, []))
        return outcome

    svc.reconcile = reconcile  # type: ignore[method-assign]
    run.one_pass(KEY)
    assert routed_mid_pass and routed_mid_pass == hub.routes[KEY]  # the runner's after the pass: the same


def test_a_gone_peering_gets_no_routes() -> None:
    run, svc, hub = runner()
    svc.reconcile = lambda namespace, name, known=None, routed=None: Outcome(gone=True)  # type: ignore[method-assign]
    assert run.one_pass(KEY).gone and hub.routes == {}


def test_delay_backs_off_on_transient_errors_up_to_the_resync_interval() -> None:
    run, _, _ = runner()
    kind = peerings(run)
    assert kind.delay(Outcome(), 0) == 60.0
    assert kind.delay(Outcome(requeue_after=5.0), 0) == 5.0
    assert [kind.delay(Outcome(requeue_after=5.0), n) for n in (1, 2, 3, 4, 5)] == [5.0, 10.0, 20.0, 40.0, 60.0]


def test_a_provider_back_up_starts_the_backoff_over() -> None:
    """Passes failing while the provider is down stretch the wait between them; its return (the health
    probe's wake) starts the backoff over, so that a first pass failing after it (an API server just back
    answers 429 while its caches fill) is retried after the shortest delay, not the longest the outage built.
    Any other wake keeps the backoff."""
    run, svc, _ = runner()
    svc.reconcile = lambda namespace, name, known=None, routed=None: Outcome(requeue_after=5.0, transient_error=True)  # type: ignore[method-assign]
    waits: list[float] = []

    async def scenario() -> None:
        stopped = Stopped()
        loop = asyncio.create_task(run.run(KEY, stopped))

        async def next_wait(count: int) -> None:
            for _ in range(1000):
                if len(waits) >= count or loop.done():
                    break
                await asyncio.sleep(0.01)
            assert len(waits) >= count, (waits, loop.done() and loop.exception())

        kind = peerings(run)
        real_delay = kind.delay
        kind.delay = lambda outcome, failures: waits.append(real_delay(outcome, failures)) or 3600.0  # type: ignore[method-assign,func-returns-value]
        for count, woken_by in enumerate((RELISTED, RELISTED, RELISTED, HEALTH_CHANGED, RELISTED), start=1):
            await next_wait(count)
            run.wakeups.wake(KEY, woken_by)
        await next_wait(6)
        stopped.event.set()
        run.wakeups.wake(KEY, "spec")
        await asyncio.wait_for(loop, 10)

    asyncio.run(scenario())
    assert waits == [5.0, 10.0, 20.0, 40.0, 5.0, 10.0]


def test_routes_follow_the_peering_context() -> None:
    run, svc, _ = runner()
    consumer, provider = ClusterInfo("c-id", ("10.0.0.0/16",), "10.1.0.0/16"), ClusterInfo("p-id", (), "")
    ctx = PeeringContext("ns", "p", consumer, provider, consumer_tenant_ns="liqo-tenant-p-id", provider_tenant_ns="t")
    remote = FakeClusterClient("provider")
    routes = peerings(run).routes(KEY, Outcome(secret=("ns", "kubeconfig"), remote=remote, ctx=ctx))
    local_kinds = {x.scope.res.kind for x in routes if x.client is svc.local}
    remote_kinds = {x.scope.res.kind for x in routes if x.client is remote}
    assert {"Connection", "ResourceSlice", "ForeignCluster", "Node", "Pod", "Secret"} <= local_kinds
    assert remote_kinds == {
        "Secret",
        "Configuration",
        "GatewayServer",
        "Connection",
        "Tenant",
        "Health",
        "ConfigMap",
    }  # no Deployment: the provider holds the server here, whose Deployment no pass reads
    # Consumer informers are cluster-wide (shared by every peering); a provider's cover its tenant namespace.
    # Liqo's cluster-ID ConfigMap is watched in Liqo's namespace on both sides (its version label).
    own = (r.SECRET, r.CONFIGMAP)
    assert all(x.scope.namespace is None for x in routes if x.client is svc.local and x.scope.res not in own)
    assert all(
        x.scope.namespace == "t" for x in routes if x.client is remote and x.scope.res not in (r.HEALTH, r.CONFIGMAP)
    )
    identity = [x for x in routes if x.scope.res == r.CONFIGMAP]
    assert {(x.client.side, x.scope.namespace, x.wake_as) for x in identity} == {
        ("consumer", "liqo", LIQO_IDENTITY),
        ("provider", "liqo", LIQO_IDENTITY),
    }
    # Before discovery, the provider's health alone: its return wakes a peering that could not reach it.
    early = peerings(run).routes(KEY, Outcome(secret=("ns", "kubeconfig"), remote=remote, ctx=None))
    assert [x.scope.res.kind for x in early if x.client is remote] == ["Health"]
    assert [x.wake_as for x in early if x.client is remote] == [HEALTH_CHANGED]  # it starts the backoff over
    # Stopped before its context (such as refused for its Liqo versions): an upgrade of Liqo wakes it too.
    refused = peerings(run).routes(
        KEY, Outcome(secret=("ns", "kubeconfig"), remote=remote, ctx=None, liqo_namespaces=("a", "b"))
    )
    assert {(x.client.side, x.scope.res.kind, x.scope.namespace, x.wake_as) for x in refused if x.wake_as} >= {
        ("consumer", "ConfigMap", "a", LIQO_IDENTITY),
        ("provider", "ConfigMap", "b", LIQO_IDENTITY),
    }
    pods = next(x for x in routes if x.scope.res == r.POD)
    assert pods.matches({"metadata": {"namespace": "liqo-tenant-p-id"}})
    assert not pods.matches({"metadata": {"namespace": "liqo-tenant-other"}})
    node = next(x for x in routes if x.scope.res == r.NODE)
    assert node.matches({"metadata": {"name": "p-id", "labels": {"liqo.io/remote-cluster-id": "p-id"}}})
    assert not node.matches({"metadata": {"name": "x", "labels": {"liqo.io/remote-cluster-id": "other"}}})


def test_a_permanent_stage_error_is_not_retried_as_transient(monkeypatch: pytest.MonkeyPatch) -> None:
    """ResourceSliceDenied waits for a change (a new spec); it used to be rebuilt as a transient error."""

    def denied(_: PeeringRun) -> StageResult:
        raise ResourceSliceDenied("the provider Denied ResourceSlice t1/p-id")

    monkeypatch.setattr(stagerunner.offloading, "reconcile", denied)
    monkeypatch.setattr(
        stagerunner.authentication, "reconcile", lambda run, *_: StageResult.ready("authentication", "ok")
    )
    consumer, provider = ClusterInfo("c-id", ("10.0.0.0/16",), "10.1.0.0/16"), ClusterInfo("p-id", (), "")
    ctx = PeeringContext("ns", "p", consumer, provider, consumer_tenant_ns="t1", provider_tenant_ns="t2")
    spec = LiqoPeeringSpec.model_validate(
        {"remoteKubeconfigSecretRef": {"name": "k"}, "networking": {"enabled": False}}
    )
    results = run_stages(PeeringRun(spec, FakeClusterClient("consumer"), FakeClusterClient("provider"), ctx), None)
    assert (results["offloading"].state, results["offloading"].reason) == ("error", "ResourceSliceDenied")
    assert results["offloading"].transient is False


@pytest.mark.parametrize(
    ("error", "outage"),
    [
        (ApiError("etcd is restarting", status=503, side="consumer"), True),
        (ClusterUnreachable("consumer", "https://198.18.0.1:6443", "connection refused"), True),
        # Overloaded: no whole answer within the request's deadline.
        (
            AnswerTooSlow(
                "consumer",
                Request("https://198.18.0.1:6443", "list", resource="secrets"),
                "no whole answer in time",
                "15 s",
            ),
            True,
        ),
        (
            AnswerTooSlow(
                "provider",
                Request("https://198.18.0.1:6443", "list", resource="secrets"),
                "no whole answer in time",
                "8 s",
            ),
            False,
        ),
        (ApiError("etcd is restarting", status=503, side="provider"), False),
        (ClusterUnreachable("provider", "https://198.18.0.2:6443", "connection refused"), False),
        (ApiError("conflict", status=409, side="consumer"), False),
        # A webhook may deny with any code, 5xx too: that is a policy, not the API server failing.
        (AdmissionDenied(status=500, side="consumer", admission='admission webhook "w"'), False),
    ],
)
def test_the_operators_own_cluster_failing_is_raised_not_reported(
    monkeypatch: pytest.MonkeyPatch, error: PeeringError, outage: bool
) -> None:
    """The consumer's API server down or failing is nothing the peering did: the pass is put off, and no
    stage reports it (the status would flap on a restart of the operator's own cluster)."""

    def failing(_: PeeringRun, *__: Any) -> StageResult:
        raise error

    monkeypatch.setattr(stagerunner.networking, "reconcile", failing)
    monkeypatch.setattr(stagerunner.authentication, "reconcile", failing)
    consumer, provider = ClusterInfo("c-id", ("10.0.0.0/16",), "10.1.0.0/16"), ClusterInfo("p-id", (), "")
    ctx = PeeringContext("ns", "p", consumer, provider, consumer_tenant_ns="t1", provider_tenant_ns="t2")
    spec = LiqoPeeringSpec.model_validate({"remoteKubeconfigSecretRef": {"name": "k"}})
    run = PeeringRun(spec, FakeClusterClient("consumer"), FakeClusterClient("provider"), ctx)
    if outage:
        with pytest.raises(type(error)):
            run_stages(run, None)
    else:
        results = run_stages(run, None)
        assert results["networking"].state == "error" and "offloading" not in results
    assert own_cluster_unavailable(error) is outage


# -- unpeering: each teardown pass as soon as what the last one waits for changes ----------------------------
BODY = {"metadata": {"namespace": "ns", "name": "p"}}


def unpeering_runner(results: list[list[str]], watched: bool) -> tuple[Runner, Service, Hub]:
    """A runner whose teardown passes leave ``results`` in turn, then the last one again; ``watched``: each
    pass found the tenant namespaces, so it has objects to watch (its routes)."""
    run, svc, hub = runner()
    ctx = PeeringContext(
        "ns", "p", ClusterInfo("consumer-id", (), ""), ClusterInfo("provider-id", (), ""), "tenant-c", "tenant-p"
    )
    routes = tuple(teardown_routes(svc.local, FakeClusterClient("provider"), ctx)) if watched else ()

    def unpeer(body: dict[str, Any]) -> Teardown:
        svc.calls.append("teardown")
        left = results[min(svc.calls.count("teardown"), len(results)) - 1]
        return Teardown(tuple(left), routes if left else ())

    svc.unpeer = unpeer  # type: ignore[method-assign]
    return run, svc, hub


def test_an_unpeering_pass_follows_the_event_it_waits_for(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("liqo_peering.engine.runner.UNPEER_SAFETY_NET", 3600.0)  # only an event can wake it
    run, svc, hub = unpeering_runner([["ResourceSlice t/p"], ["VirtualNode t/p"], []], watched=True)

    async def scenario() -> TeardownOutcome:
        unpeering = asyncio.ensure_future(run.unpeer(KEY, BODY))
        for _ in range(2):
            while not hub.routes.get(KEY) or run.wakeups.pending(KEY):
                await asyncio.sleep(0.01)
            passes = svc.calls.count("teardown")
            run.wakeups(KEY, "ResourceSlice")  # the informer saw the deletion (from its thread)
            while svc.calls.count("teardown") == passes:
                await asyncio.sleep(0.01)
        return await asyncio.wait_for(unpeering, 30)

    assert asyncio.run(scenario()).remaining == ()
    assert svc.calls == ["teardown"] * 3
    assert KEY not in hub.routes and svc.released == [("ns", "p")]  # done: everything of it forgotten


def test_unpeering_watches_what_each_phase_deletes_on_both_clusters() -> None:
    run, _, hub = unpeering_runner([["ResourceSlice t/p"]], watched=True)
    assert asyncio.run(run.unpeer(KEY, BODY, window=0.0)).remaining == ("ResourceSlice t/p",)  # then kopf again
    assert not hub.routes.get(KEY)  # the window ended before any wait: nothing watched yet
    run, _, hub = unpeering_runner([["ResourceSlice t/p"], ["Tenant t/c"]], watched=True)
    assert asyncio.run(run.unpeer(KEY, BODY, window=1.0)).remaining == ("Tenant t/c",)
    kinds = {(route.client.side, route.scope.res.kind) for route in hub.routes[KEY]}
    assert {("consumer", "ResourceSlice"), ("consumer", "VirtualNode"), ("consumer", "Identity")} <= kinds
    assert {("provider", "Tenant"), ("provider", "Configuration"), ("provider", "GatewayServer")} <= kinds
    assert all(route.namespace in ("tenant-c", "tenant-p") for route in hub.routes[KEY])


def test_an_unpeering_with_nothing_to_watch_passes_again_after_a_short_poll() -> None:
    run, svc, hub = unpeering_runner([["Tenant t/c"], ["Tenant t/c"], []], watched=False)
    assert asyncio.run(asyncio.wait_for(run.unpeer(KEY, BODY), 30)).remaining == ()
    assert svc.calls == ["teardown"] * 3 and not hub.routes.get(KEY)


def test_a_wake_up_asked_for_later_from_a_pass_thread_comes_by_the_event_loop() -> None:
    async def main() -> frozenset[str]:
        wakeups = Wakeups()
        trigger = wakeups.open(KEY)
        await asyncio.to_thread(wakeups.later, KEY, STATUS_DUE, 0.05)
        await asyncio.wait_for(trigger.wait(), 10)
        return wakeups.take(KEY)

    assert asyncio.run(main()) == {STATUS_DUE}
