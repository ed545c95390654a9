"""A full pass reads its LiqoPeering from the API server: woken by a spec change (kopf's event), the shared
informer's cache may not hold that change yet, and nothing would wake the pass again until the resync."""

from __future__ import annotations

from typing import Any, cast

from liqo_peering.clients.cluster import ClusterClient
from liqo_peering.clients.events import EventRecorder
from liqo_peering.engine.discovery import KubeconfigPolicy
from liqo_peering.engine.reconcile import Outcome, Reconciler
from liqo_peering.liqo import resources as r
from liqo_peering.metrics import Metrics
from unit.fakes import EventsClient, FakeClusterClient


class _Reads(FakeClusterClient):
    """Says which way the pass read its LiqoPeering: ``get`` may be a cache's, ``read`` never is."""

    def __init__(self) -> None:
        super().__init__("consumer")
        self.ways: list[str] = []

    def get(
        self, res: r.Resource, name: str, namespace: str | None = None, carries: str | None = None
    ) -> dict[str, Any] | None:
        if res == r.LIQOPEERING:
            self.ways.append("get")
        return None  # gone: the pass ends there

    def read(self, res: r.Resource, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        self.ways.append("read")
        return None


def test_a_full_pass_reads_its_own_object_from_the_api_server_and_a_light_one_may_use_the_cache() -> None:
    local = _Reads()
    reconciler = Reconciler(local, EventRecorder(cast(ClusterClient, EventsClient())), Metrics(), KubeconfigPolicy())
    assert reconciler.reconcile("ns", "p").gone  # a full pass: nothing known from the last one
    assert reconciler.reconcile("ns", "p", known=Outcome()).gone  # Liqo's objects changed, nothing else
    assert local.ways == ["read", "get"]
