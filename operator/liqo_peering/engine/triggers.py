"""Watches on both clusters that wake a peering's reconcile loop as soon as something changes.

Each (cluster, resource, namespace, field selector) gets one daemon thread running a Kubernetes watch;
any event calls ``notify``. ``ensure`` starts and stops watches as a peering's namespaces become known.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import structlog

from liqo_peering.clients.cluster import ClusterClient
from liqo_peering.liqo.resources import Resource

log = structlog.get_logger("liqo_peering.triggers")
WatchKey = tuple[int, Resource, str | None, str | None]


class PeeringWatches:
    """``notify(kind)`` gets the watched resource's kind, so the loop can take a fast path."""

    def __init__(self, notify: Callable[[str], None]) -> None:
        self.notify = notify
        self._watches: dict[WatchKey, threading.Event] = {}

    def ensure(self, wanted: list[tuple[ClusterClient, Resource, str | None, str | None]]) -> None:
        keys = {(id(c), res, ns, fs): (c, res, ns, fs) for c, res, ns, fs in wanted}
        for key in list(self._watches):
            if key not in keys:
                self._watches.pop(key).set()
        for key, (client, res, ns, fs) in keys.items():
            if key not in self._watches:
                stop = threading.Event()
                self._watches[key] = stop
                threading.Thread(
                    target=self._loop,
                    args=(client, res, ns, fs, stop),
                    daemon=True,
                    name=f"watch-{client.side}-{res.plural}",
                ).start()

    def stop(self) -> None:
        for stop in self._watches.values():
            stop.set()
        self._watches.clear()

    def _loop(
        self, client: ClusterClient, res: Resource, ns: str | None, fields: str | None, stop: threading.Event
    ) -> None:
        backoff = 1.0
        while not stop.is_set():
            try:
                client.watch(res, ns, stop, lambda _type, _obj: self.notify(res.kind), fields=fields)
                backoff = 1.0
            except Exception as exc:  # unreachable cluster or missing CRD: retry, the reconcile reports it
                log.debug("watch restarting", resource=res.plural, side=client.side, error=type(exc).__name__)
                stop.wait(backoff)
                backoff = min(backoff * 2, 30.0)
