"""The watch hub and its informers, against an in-memory list/watch: informer semantics (a list is an
event), one informer per (cluster, kind, scope) shared by every peering, events routed by namespace."""

from __future__ import annotations

import queue
import threading
from collections.abc import Hashable, Iterator
from dataclasses import replace
from typing import Any, cast

import pytest

from liqo_peering.api.peeringset import LabelSelector
from liqo_peering.clients import informer as informer_module
from liqo_peering.clients.cluster import ClusterClient, selector_matches, selector_within
from liqo_peering.clients.informer import Scope
from liqo_peering.engine.watches import (
    VK_PODS,
    Route,
    WatchHub,
    consumer_scopes,
    credential_routes,
    labelled_scope,
    name_field,
    peering_routes,
    reverse_routes,
    set_routes,
    teardown_routes,
    unscoped,
)
from liqo_peering.errors import ApiError, ClusterForbidden, ClusterUnreachable
from liqo_peering.fleet import selector
from liqo_peering.health import Health
from liqo_peering.liqo import naming
from liqo_peering.liqo import resources as r
from liqo_peering.liqo.context import ClusterInfo, PeeringContext
from testenv.rbacproof import check as rbac_check

WAIT = 10.0


class ListWatch(ClusterClient):
    """A ClusterClient whose API server is a list: list returns the current objects, a watch streams
    what ``emit`` sends until stopped, and any other request is counted and answered from the list."""

    def __init__(self) -> None:
        super().__init__(cast(Any, None), "consumer", "fake")
        self.calls: list[tuple[str, str]] = []
        self.objects: list[dict[str, Any]] = []
        self.events: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.lists = 0
        self.fail_lists = 0

    def list_page(self, res: r.Resource, namespace: str | None, labels: Any = None, fields: Any = None) -> Any:
        if self.fail_lists:
            self.fail_lists -= 1
            raise ClusterUnreachable("provider", "https://198.18.0.2:6443", "down")
        self.lists += 1
        return list(self.objects), str(self.lists)

    def stream(self, res: r.Resource, namespace: str | None, version: str, *_: Any, **kw: Any) -> Iterator[Any]:
        stop = threading.Event()

        class Response:
            def shutdown(self) -> None:
                stop.set()

        kw["on_open"](Response())
        while not stop.is_set():
            try:
                event = self.events.get(timeout=0.05)
            except queue.Empty:
                continue
            if event is None:
                return  # the server ended the watch
            yield event

    def emit(self, kind: str, obj: dict[str, Any]) -> None:
        self.events.put({"type": kind, "object": obj})

    def _call(
        self, method: str, path: str, *, body: Any = None, query: Any = None, content_type: Any = None, **_: Any
    ) -> Any:
        self.calls.append((method, path))
        name = path.rsplit("/", 1)[-1]
        if method == "GET" and query is not None:  # a list
            return {"items": list(self.objects), "metadata": {"resourceVersion": "1"}}
        if method == "GET":
            found = [o for o in self.objects if o["metadata"]["name"] == name]
            if not found:
                raise ApiError("not found", status=404, body={"details": {"name": name}})
            return found[0]
        if method == "DELETE":
            return {}
        return {**body, "metadata": {**body["metadata"], "resourceVersion": "9"}}


class Wakes:
    def __init__(self) -> None:
        self.seen: list[tuple[Hashable, str]] = []
        self.cond = threading.Condition()

    def __call__(self, key: Hashable, kind: str) -> None:
        with self.cond:
            self.seen.append((key, kind))
            self.cond.notify_all()

    def wait_for(self, key: Hashable, count: int = 1) -> bool:
        with self.cond:
            return self.cond.wait_for(lambda: sum(1 for k, _ in self.seen if k == key) >= count, WAIT)

    def count(self, key: Hashable) -> int:
        with self.cond:
            return sum(1 for k, _ in self.seen if k == key)


@pytest.fixture
def watched() -> Iterator[tuple[ListWatch, Wakes, WatchHub]]:
    """A cluster, the wakes its hub reports, and the hub (stopped afterwards)."""
    cluster, wakes = ListWatch(), Wakes()
    hub = WatchHub(wakes)
    try:
        yield cluster, wakes, hub
    finally:
        hub.stop()


def obj(namespace: str, name: str = "x", version: str = "1") -> dict[str, Any]:
    return {"metadata": {"namespace": namespace, "name": name, "resourceVersion": version}}


def route(client: ListWatch, namespace: str) -> Route:
    return Route(
        cast(ClusterClient, client), Scope(r.CONNECTION, labels="liqo.io/remote-cluster-id"), namespace=namespace
    )


def test_a_change_before_the_watch_starts_wakes_the_peering(watched: tuple[ListWatch, Wakes, WatchHub]) -> None:
    """The lost wake-up: a pass reads the clusters, the change lands, then the watch starts. Listing
    without signalling (the old code) slept a whole resync interval; the list must count as an event."""
    cluster, wakes, hub = watched
    # The pass saw nothing; now Liqo writes the Connection; only then does the peering's route exist.
    cluster.objects.append(obj("tenant-a", "connected"))
    hub.set_routes("a", [route(cluster, "tenant-a")])
    assert wakes.wait_for("a")


def test_a_route_joining_a_running_informer_wakes_its_peering_once(watched: tuple[ListWatch, Wakes, WatchHub]) -> None:
    cluster, wakes, hub = watched
    hub.set_routes("a", [route(cluster, "tenant-a")])
    assert wakes.wait_for("a")
    hub.set_routes("b", [route(cluster, "tenant-b")])  # the informer listed before b's route existed
    assert wakes.wait_for("b")
    hub.set_routes("b", [route(cluster, "tenant-b")])  # the same routes again: nothing new to learn
    assert wakes.count("b") == 1
    assert cluster.lists == 1 and hub.stats() == {"informers": 1, "peerings": 2}  # shared


def test_events_reach_only_the_peerings_they_concern(watched: tuple[ListWatch, Wakes, WatchHub]) -> None:
    cluster, wakes, hub = watched
    hub.set_routes("a", [route(cluster, "tenant-a")])
    hub.set_routes("b", [route(cluster, "tenant-b")])
    assert wakes.wait_for("a") and wakes.wait_for("b")
    cluster.emit("MODIFIED", obj("tenant-a", version="2"))
    assert wakes.wait_for("a", 2)
    assert wakes.seen[0] == ("a", "relisted") and ("a", "Connection") in wakes.seen
    cluster.emit("MODIFIED", obj("tenant-b", version="3"))
    assert wakes.wait_for("b", 2)
    assert wakes.count("a") == 2


def test_a_restarted_watch_lists_again_and_wakes_everyone_routed(watched: tuple[ListWatch, Wakes, WatchHub]) -> None:
    cluster, wakes, hub = watched
    hub.set_routes("a", [route(cluster, "tenant-a")])
    assert wakes.wait_for("a")
    cluster.events.put({"type": "ERROR", "object": {"code": 410}})  # expired version: list again
    assert wakes.wait_for("a", 2)
    assert cluster.lists == 2


def test_an_unreachable_cluster_is_retried_and_its_first_list_wakes(watched: tuple[ListWatch, Wakes, WatchHub]) -> None:
    cluster, wakes, hub = watched
    cluster.fail_lists = 1
    hub.set_routes("a", [route(cluster, "tenant-a")])
    assert wakes.wait_for("a")  # after one backoff (1 s)
    assert cluster.lists == 1


def test_an_informer_stops_when_its_last_route_goes() -> None:
    cluster, wakes = ListWatch(), Wakes()
    hub = WatchHub(wakes)
    hub.set_routes("a", [route(cluster, "tenant-a")])
    hub.set_routes("b", [route(cluster, "tenant-b")])
    informer = next(iter(hub._informers.values()))
    hub.drop("a")
    assert hub.stats() == {"informers": 1, "peerings": 1}
    hub.drop("b")
    assert hub.stats() == {"informers": 0, "peerings": 0}
    informer._thread.join(WAIT)
    assert not informer.alive


def test_a_closed_client_leaves_no_informer_whatever_routes_still_name_it() -> None:
    """The soak once found two provider clients' informer sets running after their peerings were gone."""
    old, other, wakes = ListWatch(), ListWatch(), Wakes()
    hub = WatchHub(wakes)
    hub.set_routes("a", [route(old, "tenant-a"), route(other, "tenant-a")])
    hub.set_routes("b", [route(old, "tenant-b")])
    stale = hub._informers[route(old, "tenant-a").informer_key]
    hub.forget_client(cast(ClusterClient, old))
    assert hub.stats() == {"informers": 1, "peerings": 2}  # only the other client's informer is left
    stale._thread.join(WAIT)
    assert not stale.alive
    hub.drop("a")
    hub.drop("b")
    assert hub.stats() == {"informers": 0, "peerings": 0}


def labelled(namespace: str, name: str, peer: str) -> dict[str, Any]:
    return {"metadata": {"namespace": namespace, "name": name, "labels": {"liqo.io/remote-cluster-id": peer}}}


def test_reads_come_from_the_informer_cache_and_writes_go_into_it(watched: tuple[ListWatch, Wakes, WatchHub]) -> None:
    cluster, wakes, hub = watched
    cluster.objects = [labelled("tenant-a", "p", "p"), labelled("tenant-b", "q", "q")]
    hub.set_routes("a", [route(cluster, "tenant-a")])
    assert wakes.wait_for("a")
    # Served from the cache: no request.
    assert cluster.get(r.CONNECTION, "p", "tenant-a") == cluster.objects[0]
    found = cluster.find(r.CONNECTION, "tenant-b", labels="liqo.io/remote-cluster-id=q")
    assert [o["metadata"]["name"] for o in found] == ["q"]
    assert cluster.find(r.CONNECTION, "tenant-a", labels="liqo.io/remote-cluster-id=q") == []
    assert cluster.calls == []
    # A read the informer does not cover (another kind, or a field selector) asks the server.
    assert cluster.find(r.CONNECTION, "tenant-a", fields="metadata.name=p") is not None
    assert cluster.calls[-1][0] == "GET"
    # An apply's answer is cached at once: the next pass reads what it wrote.
    cluster.apply(r.CONNECTION, {**labelled("tenant-a", "new", "p"), "spec": {"x": 1}})
    calls = len(cluster.calls)
    assert cluster.get(r.CONNECTION, "new", "tenant-a")["spec"] == {"x": 1}  # type: ignore[index]
    assert len(cluster.calls) == calls
    # An answer older than what the watch already delivered never replaces it.
    informer = next(iter(hub._informers.values()))
    informer.remember(
        {**labelled("tenant-a", "new", "p"), "spec": {"x": 0}}
        | {"metadata": {"namespace": "tenant-a", "name": "new", "resourceVersion": "3"}}
    )
    assert cluster.get(r.CONNECTION, "new", "tenant-a")["spec"] == {"x": 1}  # type: ignore[index]
    # A delete forgets it: the object may linger (finalizers), so the next read asks the server.
    cluster.delete(r.CONNECTION, "p", "tenant-a")
    assert cluster.get(r.CONNECTION, "p", "tenant-a") is not None and cluster.calls[-1][0] == "GET"
    # An event updates the cache before the peering wakes.
    newer = labelled("tenant-a", "new", "p")
    newer["metadata"]["resourceVersion"] = "10"  # after the apply's answer (9)
    cluster.emit("MODIFIED", {**newer, "spec": {"x": 2}})
    assert wakes.wait_for("a", 2)
    assert cluster.get(r.CONNECTION, "new", "tenant-a")["spec"] == {"x": 2}  # type: ignore[index]
    # A miss asks the server (the cache never claims an object is absent).
    with pytest.raises(ApiError):
        cluster._call("GET", "/x/absent")
    assert cluster.get(r.CONNECTION, "absent", "tenant-a") is None
    hub.stop()
    assert not cluster._covering(r.CONNECTION, "tenant-a")  # stopped informers serve nothing


def test_selectors() -> None:
    assert selector_within("liqo.io/remote-cluster-id", "liqo.io/remote-cluster-id=p,a=b")
    assert selector_within(None, "a=b") and selector_within("a=b", "a=b,c=d")
    assert not selector_within("a=b", "c=d") and not selector_within("a", "b=c")
    assert selector_matches("a,b=c", {"a": "x", "b": "c"}) and not selector_matches("a", {"b": "c"})
    # A list without a selector is not within an informer's selector: that informer lacks the other objects.
    assert selector_within(None, None) and not selector_within("a", None) and not selector_within("a!=b", "a=c")


def test_set_based_selectors_as_the_api_server_reads_them() -> None:
    labels = {"fleet": "edge", "tier": "b"}
    assert selector_matches("fleet in (core, edge),tier notin (a),!legacy", labels)
    assert not selector_matches("fleet in (core)", labels) and not selector_matches("tier notin (a,b)", labels)
    assert selector_matches("tier notin (a)", {}) and not selector_matches("tier in (a)", {})
    assert selector_matches("fleet==edge,tier!=c", labels) and not selector_matches("fleet!=edge", labels)
    # One spelling per term: the spaces and the order of an In's values do not make another selector.
    assert selector_within("fleet in (edge,core)", "fleet in ( core , edge ),tier=b")
    assert not selector_within("fleet in (edge,core)", "fleet in (edge)")


def test_a_set_selector_as_one_query() -> None:
    query = selector.as_query(
        LabelSelector.model_validate(
            {
                "matchLabels": {"team": "a", "env": "prod"},
                "matchExpressions": [
                    {"key": "fleet", "operator": "In", "values": ["edge", "core", "edge"]},
                    {"key": "tier", "operator": "NotIn", "values": ["x"]},
                    {"key": "kubeconfig", "operator": "Exists"},
                    {"key": "legacy", "operator": "DoesNotExist"},
                ],
            }
        )
    )
    assert query == "!legacy,env=prod,fleet in (core,edge),kubeconfig,team=a,tier notin (x)"
    labels = {"team": "a", "env": "prod", "fleet": "core", "kubeconfig": ""}
    assert selector_matches(query, labels) and not selector_matches(query, {**labels, "legacy": "1"})


def test_a_relisted_kubeconfig_secret_says_so(watched: tuple[ListWatch, Wakes, WatchHub]) -> None:
    """Discovery is redone only when the kubeconfig may have changed: its informer's list says so."""
    cluster, wakes, hub = watched
    hub.set_routes("a", [Route(cluster, Scope(r.SECRET, "ns"), name="kubeconfig", wake_as="kubeconfig")])
    assert wakes.wait_for("a")
    assert wakes.seen[0] == ("a", "kubeconfig")


class Probed(ListWatch):
    """A cluster whose /readyz answers as ``health`` says (None: up)."""

    def __init__(self) -> None:
        super().__init__()
        self.health: ClusterUnreachable | None = None
        self.probes = 0

    def probe(self) -> ClusterUnreachable | None:
        self.probes += 1
        return self.health


def test_a_provider_that_goes_down_and_comes_back_wakes_its_peerings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(informer_module, "PROBE_SECONDS", 0.01)
    cluster, wakes = Probed(), Wakes()
    hub = WatchHub(wakes)
    try:
        hub.set_routes("a", [Route(cast(ClusterClient, cluster), Scope(r.HEALTH))])
        assert wakes.wait_for("a", 1)  # the first probe, like a first list
        probes = cluster.probes
        cluster_wakes = wakes.count("a")
        assert cluster.down is None
        cluster.health = ClusterUnreachable("provider", "https://198.18.0.2:6443", "no answer")
        assert wakes.wait_for("a", cluster_wakes + 1)
        assert cluster.down is not None and cluster.probes > probes
        cluster.health = None
        assert wakes.wait_for("a", cluster_wakes + 2)
        assert cluster.down is None
        settled = wakes.count("a")
        time_to_probe = cluster.probes + 5
        while cluster.probes < time_to_probe:  # probes go on; no change, no wake
            threading.Event().wait(0.01)
        assert wakes.count("a") == settled
    finally:
        hub.stop()
    assert cluster.down is None  # nobody probes it any more: calls find out for themselves


def test_a_call_answered_since_the_last_probe_spares_the_next(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(informer_module, "PROBE_SECONDS", 0.01)
    cluster, wakes = Probed(), Wakes()
    rounds = threading.Condition()
    asked = [0]  # rounds of the probe loop, each asking first whether a call was answered
    answering = [True]

    def answered_within(seconds: float) -> bool:
        with rounds:
            asked[0] += 1
            rounds.notify_all()
            return answering[0]

    def after(count: int) -> bool:
        with rounds:
            return rounds.wait_for(lambda: asked[0] >= count, WAIT)

    monkeypatch.setattr(cluster, "answered_within", answered_within)
    hub = WatchHub(wakes)
    try:
        hub.set_routes("a", [Route(cast(ClusterClient, cluster), Scope(r.HEALTH))])
        assert wakes.wait_for("a", 1) and after(5)  # rounds after calls were answered: up, and no probe
        assert cluster.probes == 0 and cluster.down is None
        with rounds:
            answering[0], flipped = False, asked[0]  # the calls stop getting answers: the probe asks again
        assert after(flipped + 3)
        assert cluster.probes >= 1
    finally:
        hub.stop()


def test_a_client_marked_down_fails_at_once_without_a_request() -> None:
    client = ClusterClient(cast(Any, None), "provider", "https://198.18.0.2:6443")  # no ApiClient to call
    client.down = ClusterUnreachable("provider", "https://198.18.0.2:6443", "timed out")
    with pytest.raises(ClusterUnreachable) as raised:
        client.get(r.TENANT, "t", "ns")
    assert raised.value.reason == "ProviderUnreachable"


class NoWatch(ListWatch):
    """May list, may not watch (Liqo's peering-user)."""

    def stream(self, *_: Any, **__: Any) -> Iterator[Any]:
        raise ClusterForbidden("may not watch", side="provider")


def test_a_refused_watch_polls_and_wakes_only_on_change(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(informer_module, "POLL_SECONDS", 0.01)
    cluster, wakes = NoWatch(), Wakes()
    hub = WatchHub(wakes)
    try:
        hub.set_routes("a", [route(cast(ListWatch, cluster), "tenant-a")])
        assert wakes.wait_for("a", 1)
        lists = cluster.lists
        while cluster.lists < lists + 5:  # polling, nothing changed: no wake
            threading.Event().wait(0.01)
        assert wakes.count("a") == 1
        cluster.objects.append(obj("tenant-a", version="2"))
        assert wakes.wait_for("a", 2)
        assert cast(ClusterClient, cluster).get(r.CONNECTION, "x", "tenant-a") is not None  # served from the cache
    finally:
        hub.stop()


def test_readiness_waits_for_the_informers_on_this_cluster_only(watched: tuple[ListWatch, Wakes, WatchHub]) -> None:
    """/readyz (health.py) names an informer on the consumer that has not synced; the provider's do not
    count: a provider that is down is one peering's error, not the operator's."""
    cluster, wakes, hub = watched
    provider = ListWatch()
    provider.side = "provider"
    cluster.fail_lists = provider.fail_lists = 1_000_000  # neither can list
    health = Health()
    health.started.set()
    health.readiness.append(lambda: hub.unsynced("consumer"))
    hub.set_routes("a", [route(cluster, "tenant-a"), route(provider, "tenant-a")])
    assert health.readiness_problems() == ["informer connections in all namespaces has not synced"]
    cluster.fail_lists = 0
    assert wakes.wait_for("a")  # listed: synced
    assert health.readiness_problems() == []


def test_an_informer_of_one_name_serves_no_list(watched: tuple[ListWatch, Wakes, WatchHub]) -> None:
    """A cluster-wide informer of the Secrets of one name (Liqo's nonce) holds no other Secret: a list of a
    namespace's Secrets asks the server, or a kubeconfig Secret beside it would read as absent."""
    cluster, wakes, hub = watched
    nonce = {"metadata": {"namespace": "team-a", "name": "nonce"}}
    cluster.objects = [nonce]
    scope = Scope(r.SECRET, fields="metadata.name=nonce")
    hub.set_routes("a", [Route(cast(ClusterClient, cluster), scope, namespace="team-a")])
    assert wakes.wait_for("a")
    cluster.objects = [nonce, {"metadata": {"namespace": "team-a", "name": "provider-kubeconfig"}}]
    assert cluster.get(r.SECRET, "nonce", "team-a") == nonce and cluster.calls == []  # by name: the cache
    names = {s["metadata"]["name"] for s in cluster.find(r.SECRET, "team-a")}
    assert names == {"nonce", "provider-kubeconfig"} and cluster.calls[-1][0] == "GET"  # a list: the server


# A peering from c1 to p1, with its tenant namespace on each cluster.
TENANTS = PeeringContext(
    "team-a",
    "to-provider",
    ClusterInfo("c1", (), ""),
    ClusterInfo("p1", (), ""),
    consumer_tenant_ns="liqo-tenant-p1",
    provider_tenant_ns="liqo-tenant-c1",
)


def test_an_unpeering_deleting_tenant_namespaces_is_woken_by_their_deletion() -> None:
    local, remote = ListWatch(), ListWatch()
    ctx = TENANTS

    def namespaces(routes: list[Route]) -> list[tuple[ClusterClient, str | None, str | None]]:
        return [(rt.client, rt.scope.fields, rt.name) for rt in routes if rt.scope.res == r.NAMESPACE]

    assert namespaces(teardown_routes(local, remote, ctx)) == []
    both = (("consumer", "liqo-tenant-p1"), ("provider", "liqo-tenant-c1"))
    assert namespaces(teardown_routes(local, remote, ctx, namespaces=both)) == [
        (local, "metadata.name=liqo-tenant-p1", "liqo-tenant-p1"),
        (remote, "metadata.name=liqo-tenant-c1", "liqo-tenant-c1"),
    ]
    # Force-delete: this cluster only, the provider never asked.
    forced = teardown_routes(local, None, ctx, namespaces=(("consumer", "liqo-tenant-p1"),))
    assert namespaces(forced) == [(local, "metadata.name=liqo-tenant-p1", "liqo-tenant-p1")]
    assert all(rt.client is local for rt in forced)


@pytest.mark.parametrize("location", ["Provider", "Consumer"])
def test_the_gateways_watched_are_where_the_location_puts_them(location: str) -> None:
    """A peering and its unpeering are woken by the gateway each cluster holds for it, and no informer is started
    for the kind a cluster does not hold: the server on the cluster of spec.networking.gatewayServer.location."""
    consumer = ClusterInfo("consumer-id", ("10.100.0.0/16",), "10.110.0.0/16")
    provider = ClusterInfo("provider-id", ("10.200.0.0/16",), "10.210.0.0/16")
    c_ns, p_ns = "liqo-tenant-provider-id", "liqo-tenant-consumer-id"
    ctx = PeeringContext("team-a", "p", consumer, provider, consumer_tenant_ns=c_ns, provider_tenant_ns=p_ns)
    local, remote = ListWatch(), ListWatch()
    on_consumer = r.GATEWAY_SERVER if location == "Consumer" else r.GATEWAY_CLIENT
    on_provider = r.GATEWAY_CLIENT if location == "Consumer" else r.GATEWAY_SERVER
    gateway_location: Any = location
    for routes in (
        peering_routes(local, remote, ctx, ("team-a", "kubeconfig"), gateway_location=gateway_location),
        teardown_routes(local, remote, ctx, gateway_location=gateway_location),
    ):
        gateways = {
            (route.client is local, route.scope.res)
            for route in routes
            if route.scope.res in (r.GATEWAY_SERVER, r.GATEWAY_CLIENT)
        }
        assert gateways == {(True, on_consumer), (False, on_provider)}
        here = {"metadata": {"name": "provider-id", "namespace": c_ns, "labels": {naming.REMOTE_CLUSTER_ID: "x"}}}
        there = {"metadata": {"name": "consumer-id", "namespace": p_ns}}
        assert any(x.client is local and x.scope.res == on_consumer and x.matches(here) for x in routes)
        assert any(x.client is remote and x.scope.res == on_provider and x.matches(there) for x in routes)
    # The provider's gateway Deployments only where it holds the client, whose readiness the pass waits for.
    routes = peering_routes(local, remote, ctx, ("team-a", "kubeconfig"), gateway_location=gateway_location)
    watched = [x.scope for x in routes if x.client is remote and x.scope.res == r.DEPLOYMENT]
    assert watched == (
        [Scope(r.DEPLOYMENT, p_ns, labels=naming.GATEWAY_COMPONENT_SELECTOR)] if location == "Consumer" else []
    )


@pytest.mark.parametrize("namespaced", [False, True])
def test_an_unpeering_is_woken_by_its_virtual_kubelets_pods(namespaced: bool) -> None:
    """A ResourceSlice whose virtual kubelet restarts for a renewed certificate waits for it (engine/teardown.py):
    its Pods wake the unpeering, from the informer peerings share (or the tenant namespace's, where the
    operator reads only there)."""
    ctx = TENANTS
    local = ListWatch()
    routes = teardown_routes(local, None, ctx, namespaced_tenant_reads=namespaced)
    (pods,) = [route for route in routes if route.scope.res == r.POD]
    assert pods.scope == (Scope(r.POD, "liqo-tenant-p1", VK_PODS.labels) if namespaced else VK_PODS)
    assert pods.matches({"metadata": {"name": "vk", "namespace": "liqo-tenant-p1"}})
    assert not pods.matches({"metadata": {"name": "vk", "namespace": "liqo-tenant-other"}})


def test_every_informer_on_the_consumer_carries_a_selector() -> None:
    """What the operator watches on the consumer follows its peerings, not the cluster: every informer a
    peering, its unpeering, its reverse direction or a set starts there lists and watches with a label or a
    field selector (the audit of test_peering's first test checks the same on a real API server)."""
    consumer = ClusterInfo("consumer-id", ("10.100.0.0/16",), "10.110.0.0/16", liqo_namespace="liqo")
    provider = ClusterInfo("provider-id", ("10.200.0.0/16",), "10.210.0.0/16", liqo_namespace="liqo")
    c_ns, p_ns = "liqo-tenant-provider-id", "liqo-tenant-consumer-id"
    ctx = PeeringContext("team-a", "p", consumer, provider, consumer_tenant_ns=c_ns, provider_tenant_ns=p_ns)
    local, remote = ListWatch(), ListWatch()
    both = (("consumer", c_ns), ("provider", p_ns))
    routes = [
        *peering_routes(local, remote, ctx, ("team-a", "kubeconfig"), minted_secret="p-minted", reverse=True),
        *peering_routes(local, remote, ctx, ("team-a", "kubeconfig"), namespaced_tenant_reads=True),
        *peering_routes(local, remote, ctx, ("team-a", "kubeconfig"), gateway_location="Consumer"),
        *teardown_routes(local, remote, ctx, reverse=True, namespaces=both),
        *reverse_routes(local, remote, ctx),
        *set_routes(local, "team-a", "edge", (r.SECRET, "fleet=edge")),
        *set_routes(local, "team-a", "edge", (r.CAPI_CLUSTER, "fleet=edge")),
    ]
    assert not [route.scope for route in routes if unscoped(route.scope)]
    bare = [route.scope for route in routes if route.client is local and not (route.scope.labels or route.scope.fields)]
    assert bare == []
    # The gateways' Deployments by Liqo's label (on the provider, only where it holds the client, whose readiness a
    # pass waits for); the kubeconfig Secrets by their names.
    deployments = {(route.client is local, route.scope) for route in routes if route.scope.res == r.DEPLOYMENT}
    assert deployments == {
        (True, Scope(r.DEPLOYMENT, labels=naming.GATEWAY_COMPONENT_SELECTOR)),
        (False, Scope(r.DEPLOYMENT, p_ns, labels=naming.GATEWAY_COMPONENT_SELECTOR)),
    }
    secrets = {(route.scope, route.name) for route in routes if route.wake_as == "kubeconfig"}
    assert secrets == {
        (Scope(r.SECRET, "team-a", fields=name_field("kubeconfig")), "kubeconfig"),
        (Scope(r.SECRET, "team-a", labels="peering.liqo-operator.io/credentials=minted"), "p-minted"),
    }
    # A peering that does not mint reads the minted Secrets' cache too (one left over is revoked), but their
    # changes are no kubeconfig change of its own.
    (leftover,) = [
        route
        for route in peering_routes(local, None, None, ("team-a", "kubeconfig"), minted_secret="p", mints=False)
        if route.scope.labels
    ]
    assert leftover.name == "p" and leftover.wake_as is None


def test_every_read_the_rbac_proof_takes_as_cached_is_of_an_informer_on_the_consumer() -> None:
    """testenv/rbacproof excepts a `get` grant no request used only for the kinds (and names) the operator reads
    through an informer here: such a read reaches the API server only when that cache cannot answer."""
    consumer = ClusterInfo("consumer-id", ("10.100.0.0/16",), "10.110.0.0/16", liqo_namespace="liqo")
    provider = ClusterInfo("provider-id", ("10.200.0.0/16",), "10.210.0.0/16", liqo_namespace="liqo")
    c_ns, p_ns = "liqo-tenant-provider-id", "liqo-tenant-consumer-id"
    ctx = PeeringContext("team-a", "p", consumer, provider, consumer_tenant_ns=c_ns, provider_tenant_ns=p_ns)
    local, remote = ListWatch(), ListWatch()
    routes = [
        *peering_routes(local, remote, ctx, ("team-a", "kubeconfig"), reverse=True),
        *teardown_routes(local, remote, ctx, reverse=True),
        *reverse_routes(local, remote, ctx),
    ]
    # Scope(r.LIQOPEERING): the duplicate check's informer (engine/duplicate.py), which the sweep shares.
    scopes = [*consumer_scopes(), Scope(r.LIQOPEERING), *(route.scope for route in routes if route.client is local)]
    kinds = {(scope.res.group, scope.res.plural) for scope in scopes}
    assert set(rbac_check.CACHED_READS) <= kinds, set(rbac_check.CACHED_READS) - kinds
    names = {(s.res.group, s.res.plural, s.fields.removeprefix("metadata.name=")) for s in scopes if s.fields}
    assert set(rbac_check.NAMED_CACHED_READS) <= names, set(rbac_check.NAMED_CACHED_READS) - names


@pytest.mark.parametrize("namespaced", [False, True], ids=["cluster-wide", "watchNamespaces"])
def test_the_consumers_cluster_wide_scopes_are_those_started_with_the_operator(namespaced: bool) -> None:
    consumer = ClusterInfo("consumer-id", ("10.100.0.0/16",), "10.110.0.0/16", liqo_namespace="liqo")
    provider = ClusterInfo("provider-id", ("10.200.0.0/16",), "10.210.0.0/16", liqo_namespace="liqo")
    ctx = PeeringContext("team-a", "p", consumer, provider, consumer_tenant_ns="t-c", provider_tenant_ns="t-p")
    local, remote = ListWatch(), ListWatch()
    routed = {
        route.scope
        for location in ("Provider", "Consumer")
        for route in peering_routes(
            local, remote, ctx, ("team-a", "kubeconfig"), namespaced, gateway_location=cast(Any, location)
        )
        if route.client is local and route.scope.namespace is None
    }
    assert routed == set(consumer_scopes(namespaced))
    assert all(not unscoped(scope) for scope in routed)
    # Whole only where Liqo labels every object of the kind: a namespace's Secrets (a kubeconfig Secret beside
    # the minted ones) and Deployments (gateways from one's own templates) are not all labelled.
    every = peering_routes(local, remote, ctx, ("team-a", "kubeconfig"), namespaced, minted_secret="p-minted")
    assert not [route.scope for route in every if route.scope.whole and route.scope.res in (r.SECRET, r.DEPLOYMENT)]


def test_pinned_informers_run_without_routes_and_hold_readiness_only_once_routed(
    watched: tuple[ListWatch, Wakes, WatchHub],
) -> None:
    cluster, wakes, hub = watched
    scope = Scope(r.CONNECTION, labels="liqo.io/remote-cluster-id", whole=True)
    cluster.fail_lists = 10**6  # Liqo not installed yet: its informer cannot list
    hub.pin(cast(ClusterClient, cluster), [scope])
    assert hub.stats()["informers"] == 1
    assert hub.unsynced("consumer") == []  # no peering needs it yet: the operator is ready
    hub.set_routes("a", [Route(cast(ClusterClient, cluster), scope, namespace="tenant-a")])
    assert hub.unsynced("consumer") != []
    cluster.fail_lists = 0
    assert wakes.wait_for("a")
    hub.set_routes("a", [])
    assert hub.stats()["informers"] == 1  # its last route gone, it runs on


def test_a_changed_kubeconfig_reference_is_a_new_informer_that_lists_and_wakes(
    watched: tuple[ListWatch, Wakes, WatchHub],
) -> None:
    """Watched by name: a reference to another Secret starts that name's informer (its list wakes the
    peering, whatever happened before) and stops the old one."""
    cluster, wakes, hub = watched
    client = cast(ClusterClient, cluster)
    hub.set_routes("a", peering_routes(client, None, None, ("team-a", "old")))
    assert wakes.wait_for("a")
    hub.set_routes("a", peering_routes(client, None, None, ("team-a", "new")))
    assert wakes.wait_for("a", 2) and ("a", "kubeconfig") in wakes.seen
    assert [i.scope.fields for i in hub._informers.values()] == [name_field("new")]


def test_a_list_of_one_name_comes_from_that_names_informer(watched: tuple[ListWatch, Wakes, WatchHub]) -> None:
    """An absent kubeconfig Secret is known absent from its informer, without asking the API server each pass;
    a list of the namespace (no field selector) or of another name still asks it."""
    cluster, wakes, hub = watched
    cluster.objects = [{"metadata": {"namespace": "team-a", "name": "other", "resourceVersion": "1"}}]
    hub.set_routes("a", peering_routes(cast(ClusterClient, cluster), None, None, ("team-a", "kubeconfig")))
    assert wakes.wait_for("a")
    asked = len(cluster.calls)
    assert cluster.find(r.SECRET, "team-a", fields=name_field("kubeconfig")) == []
    assert len(cluster.calls) == asked
    cluster.find(r.SECRET, "team-a")
    cluster.find(r.SECRET, "team-a", fields=name_field("other"))
    assert len(cluster.calls) == asked + 2


def test_a_list_without_a_selector_is_not_served_by_an_informer_with_one(
    watched: tuple[ListWatch, Wakes, WatchHub],
) -> None:
    """The LiqoPeerings of a namespace, listed while a set's informer (its LiqoPeerings only) runs there: the
    others are not in that cache, so the list asks the API server."""
    cluster, wakes, hub = watched
    hub.set_routes("set", set_routes(cast(ClusterClient, cluster), "team-a", "edge"))
    assert wakes.wait_for("set")
    asked = len(cluster.calls)
    cluster.find(r.LIQOPEERING, "team-a", labels=f"{naming.SET_LABEL}=edge")
    assert len(cluster.calls) == asked  # within the informer's selector: the cache
    cluster.find(r.LIQOPEERING, "team-a")
    assert len(cluster.calls) == asked + 1


@pytest.mark.parametrize(
    ("scope", "known"),
    [
        (Scope(r.CONNECTION, "tenant-a"), True),  # every object of the namespace
        (Scope(r.CONNECTION, labels="liqo.io/remote-cluster-id", whole=True), True),  # Liqo labels them all
        (Scope(r.CONNECTION, "tenant-a", fields="metadata.name=absent"), True),  # that very name
        (Scope(r.CONNECTION, labels="liqo.io/remote-cluster-id"), False),  # one without the label may exist
        (Scope(r.CONNECTION, "tenant-a", fields="metadata.name=other"), False),  # another name
    ],
    ids=["namespace", "whole-labels", "its-name", "labels", "other-name"],
)
def test_a_synced_informer_that_holds_the_name_answers_absent_without_a_request(
    watched: tuple[ListWatch, Wakes, WatchHub], scope: Scope, known: bool
) -> None:
    cluster, wakes, hub = watched
    cluster.objects = [labelled("tenant-a", "p", "p")] if scope.fields is None else []
    hub.set_routes("a", [Route(cast(ClusterClient, cluster), scope, namespace="tenant-a")])
    assert wakes.wait_for("a")
    assert cluster.get(r.CONNECTION, "absent", "tenant-a") is None
    assert (cluster.calls == []) is known, cluster.calls


@pytest.mark.parametrize(
    ("carries", "known"),
    [
        ("liqo.io/remote-cluster-id=p", True),  # within the informer's selector: it would hold the object
        ("liqo.io/remote-cluster-id", True),
        ("app=other", False),  # labels the informer does not select by
        (None, False),
    ],
    ids=["value", "key", "other-labels", "nothing-said"],
)
def test_a_read_of_an_object_known_to_carry_the_scopes_labels_is_answered_by_the_informer(
    watched: tuple[ListWatch, Wakes, WatchHub], carries: str | None, known: bool
) -> None:
    """A gateway Deployment from Liqo's templates carries their label: a synced informer of that label that
    does not hold it knows it absent, though other Deployments without the label may exist."""
    cluster, wakes, hub = watched
    cluster.objects = [labelled("tenant-a", "p", "p")]
    scope = Scope(r.CONNECTION, labels="liqo.io/remote-cluster-id")
    hub.set_routes("a", [Route(cast(ClusterClient, cluster), scope, namespace="tenant-a")])
    assert wakes.wait_for("a")
    assert cluster.get(r.CONNECTION, "absent", "tenant-a", carries=carries) is None
    assert (cluster.calls == []) is known, cluster.calls


def test_a_deleted_object_is_asked_for_until_its_next_event(watched: tuple[ListWatch, Wakes, WatchHub]) -> None:
    cluster, wakes, hub = watched
    cluster.objects = [labelled("tenant-a", "p", "p")]
    hub.set_routes("a", [Route(cast(ClusterClient, cluster), Scope(r.CONNECTION, "tenant-a"), namespace="tenant-a")])
    assert wakes.wait_for("a")
    cluster.delete(r.CONNECTION, "p", "tenant-a")  # it may linger: finalizers
    assert cluster.get(r.CONNECTION, "p", "tenant-a") is not None and cluster.calls[-1][0] == "GET"
    gone = labelled("tenant-a", "p", "p")
    gone["metadata"]["resourceVersion"] = "20"
    cluster.objects = []
    cluster.emit("DELETED", gone)
    assert wakes.wait_for("a", 2)
    calls = len(cluster.calls)
    assert cluster.get(r.CONNECTION, "p", "tenant-a") is None and len(cluster.calls) == calls


@pytest.mark.parametrize("reverse", [False, True])
def test_an_unpeering_keeps_the_informers_of_its_credential_and_of_the_tenants_here(reverse: bool) -> None:
    """Each unpeering pass reads the peering's credential and whether the provider consumes this cluster too
    (the Tenants here): the teardown routes keep the informers its peering had for the one (a changed credential
    wakes it) and start one for the other, so that a pass asks the API servers for neither."""
    ctx = TENANTS
    local, remote = ListWatch(), ListWatch()
    credentials = credential_routes(local, ("team-a", "kubeconfig"), None, "p-minted", True)
    peering = peering_routes(local, remote, ctx, ("team-a", "kubeconfig"), minted_secret="p-minted")
    assert credentials == [route for route in peering if route.wake_as == "kubeconfig"]
    routes = teardown_routes(local, remote, ctx, reverse=reverse, credentials=credentials)
    assert [route for route in routes if route in credentials] == credentials
    (tenants,) = [route for route in routes if route.client is local and route.scope.res == r.TENANT]
    assert tenants.scope == labelled_scope(r.TENANT)
    assert tenants.matches({"metadata": {"name": "p1", "namespace": "liqo-tenant-p1"}})
    # Nothing of the peering made yet: only what its credential comes from.
    assert teardown_routes(local, remote, replace(ctx, consumer_tenant_ns=""), credentials=credentials) == credentials
