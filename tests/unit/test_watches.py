"""The watch hub and its informers, against an in-memory list/watch: informer semantics (a list is an
event), one informer per (cluster, kind, scope) shared by every peering, events routed by namespace."""

from __future__ import annotations

import queue
import threading
from collections.abc import Hashable, Iterator
from typing import Any, cast

from liqo_peering.clients.cluster import ClusterClient
from liqo_peering.clients.informer import Scope
from liqo_peering.engine.watches import Route, WatchHub
from liqo_peering.errors import ClusterUnreachable
from liqo_peering.liqo import resources as r

WAIT = 10.0


class ListWatch:
    """List returns the current objects; a watch streams what ``emit`` sends until stopped or ``end``."""

    side = "consumer"

    def __init__(self) -> None:
        self.objects: list[dict[str, Any]] = []
        self.events: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.lists = 0
        self.fail_lists = 0

    def list_page(self, res: r.Resource, namespace: str | None, labels: Any = None, fields: Any = None) -> Any:
        if self.fail_lists:
            self.fail_lists -= 1
            raise ClusterUnreachable("down")
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


def obj(namespace: str, name: str = "x", version: str = "1") -> dict[str, Any]:
    return {"metadata": {"namespace": namespace, "name": name, "resourceVersion": version}}


def route(client: ListWatch, namespace: str) -> Route:
    return Route(
        cast(ClusterClient, client), Scope(r.CONNECTION, labels="liqo.io/remote-cluster-id"), namespace=namespace
    )


def test_a_change_before_the_watch_starts_wakes_the_peering() -> None:
    """The lost wake-up: a pass reads the clusters, the change lands, then the watch starts. Listing
    without signalling (the old code) slept a whole resync interval; the list must count as an event."""
    cluster, wakes = ListWatch(), Wakes()
    hub = WatchHub(wakes)
    # The pass saw nothing; now Liqo writes the Connection; only then does the peering's route exist.
    cluster.objects.append(obj("tenant-a", "connected"))
    hub.set_routes("a", [route(cluster, "tenant-a")])
    try:
        assert wakes.wait_for("a")
    finally:
        hub.stop()


def test_a_route_joining_a_running_informer_wakes_its_peering_once() -> None:
    cluster, wakes = ListWatch(), Wakes()
    hub = WatchHub(wakes)
    try:
        hub.set_routes("a", [route(cluster, "tenant-a")])
        assert wakes.wait_for("a")
        hub.set_routes("b", [route(cluster, "tenant-b")])  # the informer listed before b's route existed
        assert wakes.wait_for("b")
        hub.set_routes("b", [route(cluster, "tenant-b")])  # the same routes again: nothing new to learn
        assert wakes.count("b") == 1
        assert cluster.lists == 1 and hub.stats() == {"informers": 1, "peerings": 2}  # shared
    finally:
        hub.stop()


def test_events_reach_only_the_peerings_they_concern() -> None:
    cluster, wakes = ListWatch(), Wakes()
    hub = WatchHub(wakes)
    try:
        hub.set_routes("a", [route(cluster, "tenant-a")])
        hub.set_routes("b", [route(cluster, "tenant-b")])
        assert wakes.wait_for("a") and wakes.wait_for("b")
        cluster.emit("MODIFIED", obj("tenant-a", version="2"))
        assert wakes.wait_for("a", 2)
        cluster.emit("MODIFIED", obj("tenant-b", version="3"))
        assert wakes.wait_for("b", 2)
        assert wakes.count("a") == 2
    finally:
        hub.stop()


def test_a_restarted_watch_lists_again_and_wakes_everyone_routed() -> None:
    cluster, wakes = ListWatch(), Wakes()
    hub = WatchHub(wakes)
    try:
        hub.set_routes("a", [route(cluster, "tenant-a")])
        assert wakes.wait_for("a")
        cluster.events.put({"type": "ERROR", "object": {"code": 410}})  # expired version: list again
        assert wakes.wait_for("a", 2)
        assert cluster.lists == 2
    finally:
        hub.stop()


def test_an_unreachable_cluster_is_retried_and_its_first_list_wakes() -> None:
    cluster, wakes = ListWatch(), Wakes()
    cluster.fail_lists = 1
    hub = WatchHub(wakes)
    try:
        hub.set_routes("a", [route(cluster, "tenant-a")])
        assert wakes.wait_for("a")  # after one backoff (1 s)
        assert cluster.lists == 1
    finally:
        hub.stop()


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
