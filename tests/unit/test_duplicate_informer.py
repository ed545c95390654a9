"""The duplicate check reads the shared informer of every LiqoPeering, by its index of remote cluster IDs: no
list request, and only the LiqoPeerings that peer with the same provider are read."""

from __future__ import annotations

from typing import Any

import pytest

from liqo_peering.clients.informer import Informer, Scope, SharedInformers
from liqo_peering.engine.duplicate import INDEX, DuplicateCheck
from liqo_peering.engine.sweep import ProtectionSweep
from liqo_peering.errors import DuplicatePeering
from liqo_peering.liqo import resources as r
from unit.fakes import FakeClusterClient


def peering(namespace: str, name: str, created: str, remote_id: str | None, version: int = 1) -> dict[str, Any]:
    meta = {"namespace": namespace, "name": name, "creationTimestamp": created, "resourceVersion": str(version)}
    return {"metadata": meta, "status": {"remoteClusterID": remote_id} if remote_id else {}}


def service(count: int) -> tuple[DuplicateCheck, FakeClusterClient, Informer]:
    """A check whose shared LiqoPeering informer has listed ``count`` peerings, each with a provider of its
    own, and "first" with provider "p"."""
    local = FakeClusterClient("consumer")
    for i in range(count):
        local.add(r.LIQOPEERING, peering(f"ns-{i % 7}", f"lp-{i}", "2026-01-02T00:00:00Z", f"provider-{i}"))
    local.add(r.LIQOPEERING, peering("a", "first", "2026-01-01T00:00:00Z", "p"))
    informers = SharedInformers()
    svc = DuplicateCheck(local, informers)
    informer = informers.of(local, Scope(r.LIQOPEERING))
    informer._listed(local.find(r.LIQOPEERING))  # as its list does once started
    return svc, local, informer


def no_lists(monkeypatch: pytest.MonkeyPatch, local: FakeClusterClient) -> None:
    def refuse(*_: Any, **__: Any) -> Any:
        raise AssertionError("the duplicate check listed LiqoPeerings")

    monkeypatch.setattr(local, "find", refuse)
    monkeypatch.setattr(local, "list_page", refuse)


@pytest.mark.parametrize("count", [1, 500])
def test_the_duplicate_check_makes_no_list_request(monkeypatch: pytest.MonkeyPatch, count: int) -> None:
    svc, local, informer = service(count)
    no_lists(monkeypatch, local)
    with pytest.raises(DuplicatePeering, match="LiqoPeering a/first already peers with provider p"):
        svc("b", "second", "2026-01-03T00:00:00Z", "p")
    svc("a", "first", "2026-01-01T00:00:00Z", "p")  # itself, and the older one
    svc("b", "other", "2026-01-03T00:00:00Z", "nobody-peers-with-it")
    assert [p["metadata"]["name"] for p in informer.indexed(INDEX, "p")] == ["first"]  # one read, of 1 or 501


def test_the_index_follows_the_watch(monkeypatch: pytest.MonkeyPatch) -> None:
    svc, local, informer = service(3)
    no_lists(monkeypatch, local)
    svc("b", "second", "2026-01-03T00:00:00Z", "q")
    informer.remember(peering("a", "first", "2026-01-01T00:00:00Z", "q", version=1000))  # its provider changed
    with pytest.raises(DuplicatePeering):
        svc("b", "second", "2026-01-03T00:00:00Z", "q")
    assert informer.indexed(INDEX, "p") == []
    informer.remember(peering("a", "first", "2026-01-01T00:00:00Z", "q", version=1001), deleted=True)
    svc("b", "second", "2026-01-03T00:00:00Z", "q")
    informer.forget("ns-1", "lp-1")
    assert informer.indexed(INDEX, "provider-1") == [] and len(informer.indexed(INDEX, "provider-2")) == 1


def test_before_the_informer_has_listed_the_check_lists() -> None:
    local = FakeClusterClient("consumer")
    local.add(r.LIQOPEERING, peering("a", "first", "2026-01-01T00:00:00Z", "p"))
    svc = DuplicateCheck(local, SharedInformers())
    with pytest.raises(DuplicatePeering):
        svc("b", "second", "2026-01-03T00:00:00Z", "p")


def test_the_sweep_watching_every_namespace_shares_the_duplicate_checks_informer() -> None:
    local, informers = FakeClusterClient("consumer"), SharedInformers()
    everywhere = ProtectionSweep(local, (), informers)
    assert everywhere.informers == [informers.of(local, Scope(r.LIQOPEERING))]
    some = ProtectionSweep(local, ("ns",), informers)
    assert some.informers[0] is informers.of(local, Scope(r.LIQOPEERING, "ns")) is not everywhere.informers[0]


def test_a_reader_subscribing_after_the_list_gets_it() -> None:
    informer = Informer(FakeClusterClient("consumer"), Scope(r.LIQOPEERING))
    first = peering("a", "first", "2026-01-01T00:00:00Z", "p")
    lists: list[list[dict[str, Any]]] = []
    informer.subscribe(lists.append, lambda _kind, _obj: None)
    informer._listed([first])
    late: list[list[dict[str, Any]]] = []
    informer.subscribe(late.append, lambda _kind, _obj: None)
    assert lists == late == [[first]]


class _Dead:
    """A watch response whose connection is gone: shutting it down fails as a socket does (ENOTCONN)."""

    def shutdown(self) -> None:
        raise OSError(107, "Transport endpoint is not connected")


def test_an_informer_stopped_as_its_watch_opens_on_a_dead_connection_does_not_fail() -> None:
    informer = Informer(FakeClusterClient("consumer"), Scope(r.LIQOPEERING))
    informer._stop.set()
    informer._opened(_Dead())  # the watch's on_open, called from the informer's own thread
