"""SetService against the in-memory API server (unit.fakes): a LiqoPeeringSet's passes write the LiqoPeerings,
status and Events the pure plan says, and its teardown deletes or orphans its LiqoPeerings. The runner's
lock and wake-ups for sets."""

from __future__ import annotations

import asyncio
import threading
from datetime import UTC, datetime
from typing import Any, cast

from liqo_peering.clients.cluster import ClusterClient
from liqo_peering.clients.events import EventRecorder
from liqo_peering.clients.informer import Scope
from liqo_peering.engine.kinds import PeeringSets
from liqo_peering.engine.peeringset import Selection, SetOutcome, SetService
from liqo_peering.engine.runner import ObjectKey, Runner
from liqo_peering.engine.wakeups import Wakeups
from liqo_peering.engine.watches import WatchHub, peering_routes, set_routes
from liqo_peering.liqo import naming
from liqo_peering.liqo import resources as r
from unit.fakes import FakeClusterClient

NS, SET = "fleet", "edge"
KOPF_FINALIZER = "peering.liqo-operator.io/finalizer"  # what the operator's kopf puts on each LiqoPeering


class Events:
    def __init__(self) -> None:
        self.sent: list[tuple[str, str, str, str]] = []

    def emit(self, body: dict[str, Any], type_: str, reason: str, message: str) -> None:
        self.sent.append((body["kind"], type_, reason, message))

    def reasons(self) -> list[str]:
        return [reason for _, _, reason, _ in self.sent]


def setup(**spec: Any) -> tuple[FakeClusterClient, SetService, Events]:
    local = FakeClusterClient("consumer")
    events = Events()
    service = SetService(local, cast(EventRecorder, events), now=lambda: datetime(2026, 1, 1, tzinfo=UTC))
    body = {
        "metadata": {"name": SET, "namespace": NS, "uid": "set-uid", "generation": 1},
        "spec": {"selector": {"matchLabels": {"fleet": "edge"}}, "template": {"timeout": "2m"}, **spec},
    }
    local.add(r.LIQOPEERINGSET, body)
    return local, service, events


def add_secret(local: FakeClusterClient, name: str, fleet: str | None = "edge") -> None:
    labels = {"fleet": fleet} if fleet else {}
    local.add(r.SECRET, {"metadata": {"name": name, "namespace": NS, "labels": labels}})


def children(local: FakeClusterClient) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in local.objects(r.LIQOPEERING)}


def settle(local: FakeClusterClient, peer_status: str = "ready") -> None:
    """Play each LiqoPeering's own reconcile: kopf's finalizer, and a status for its current generation."""
    for child in local.objects(r.LIQOPEERING):
        meta = child["metadata"]
        meta.setdefault("finalizers", [KOPF_FINALIZER])
        ready = "True" if peer_status == "ready" else "False"
        child["status"] = {
            "observedGeneration": meta["generation"],
            "peerStatus": peer_status,
            "remoteClusterID": f"{meta['name']}-id",
            "conditions": [{"type": "Ready", "status": ready, "reason": "PeeringEstablished", "message": ""}],
        }


def set_status(local: FakeClusterClient) -> dict[str, Any]:
    return dict(local.obj(r.LIQOPEERINGSET, SET, NS).get("status") or {})


def ready(local: FakeClusterClient) -> str:
    return next(c["status"] for c in set_status(local)["conditions"] if c["type"] == "Ready")


def finalizers(local: FakeClusterClient, secret: str) -> list[str]:
    return list(local.obj(r.SECRET, secret, NS)["metadata"].get("finalizers") or [])


def test_a_pass_creates_one_peering_per_selected_secret_and_reports() -> None:
    local, service, events = setup()
    add_secret(local, "a")
    add_secret(local, "b")
    add_secret(local, "other", fleet=None)
    # the Secrets its routes watch
    assert service.reconcile(NS, SET) == SetOutcome(selection=Selection(r.SECRET, "fleet=edge"))
    kids = children(local)
    assert sorted(kids) == ["edge-a", "edge-b"]
    a = kids["edge-a"]
    assert a["spec"] == {"remoteKubeconfigSecretRef": {"name": "a", "key": "kubeconfig"}, "timeout": "2m"}
    assert a["metadata"]["labels"][naming.SET_LABEL] == SET
    assert a["metadata"]["ownerReferences"][0]["uid"] == "set-uid"
    assert all(not finalizers(local, name) for name in ("a", "b", "other"))  # Secrets are never written
    assert (set_status(local)["desired"], set_status(local)["establishing"]) == (2, 2)
    assert events.reasons() == ["Created", "Created"] and events.sent[0][0] == "LiqoPeeringSet"
    settle(local)
    service.reconcile(NS, SET)
    assert ready(local) == "True" and set_status(local)["ready"] == 2
    writes = len(local.writes)
    service.reconcile(NS, SET)
    assert len(local.writes) == writes  # at rest: nothing written


def test_a_secret_that_stops_matching_or_goes_removes_its_peering() -> None:
    local, service, events = setup()
    add_secret(local, "a")
    add_secret(local, "b")
    service.reconcile(NS, SET)
    settle(local)
    # b is kept, terminating, by the kubeconfig protection's finalizer while its LiqoPeering unpeers.
    local.obj(r.SECRET, "b", NS)["metadata"]["finalizers"] = [naming.KUBECONFIG_IN_USE]
    local.obj(r.SECRET, "a", NS)["metadata"]["labels"] = {}
    local.delete(r.SECRET, "b", NS)
    service.reconcile(NS, SET)
    assert all(c["metadata"].get("deletionTimestamp") for c in children(local).values())
    assert {line["name"]: line["reason"] for line in set_status(local)["peerings"]} == {
        "edge-a": "Removing",
        "edge-b": "Removing",
    }
    assert ready(local) == "False"
    for key in [key for key in local.store if key[0] == r.LIQOPEERING.plural]:
        del local.store[key]  # the LiqoPeerings have unpeered
    service.reconcile(NS, SET)
    assert ready(local) == "True" and set_status(local)["desired"] == 0
    assert events.reasons().count("Deleted") == 2


def test_template_changes_update_every_peering_and_an_edit_is_overwritten() -> None:
    local, service, events = setup()
    add_secret(local, "a")
    add_secret(local, "b")
    service.reconcile(NS, SET)
    settle(local)
    local.obj(r.LIQOPEERINGSET, SET, NS)["spec"]["template"] = {"timeout": "3m"}
    service.reconcile(NS, SET)
    assert {c["spec"]["timeout"] for c in children(local).values()} == {"3m"}
    assert events.reasons().count("Updated") == 2
    settle(local)
    edited = local.obj(r.LIQOPEERING, "edge-a", NS)
    edited["spec"]["timeout"] = "9m"
    edited["metadata"]["generation"] += 1
    service.reconcile(NS, SET)
    assert local.obj(r.LIQOPEERING, "edge-a", NS)["spec"]["timeout"] == "3m"
    assert local.obj(r.LIQOPEERING, "edge-a", NS)["metadata"]["finalizers"] == [KOPF_FINALIZER]  # kept
    line = next(line for line in set_status(local)["peerings"] if line["name"] == "edge-a")
    assert line["reason"] == "Overwritten" and line["overwrittenAt"]
    assert events.sent[-1][1:3] == ("Warning", "Overwritten")


def test_max_concurrent_holds_the_rest_back() -> None:
    local, service, _ = setup(maxConcurrent=1)
    for name in ("a", "b", "c"):
        add_secret(local, name)
    service.reconcile(NS, SET)
    assert list(children(local)) == ["edge-a"] and set_status(local)["waiting"] == 2
    settle(local)
    service.reconcile(NS, SET)
    assert sorted(children(local)) == ["edge-a", "edge-b"]


def test_a_name_taken_by_a_peering_the_set_does_not_own_is_a_conflict() -> None:
    local, service, events = setup()
    add_secret(local, "a")
    local.add(r.LIQOPEERING, {"metadata": {"name": "edge-a", "namespace": NS}, "spec": {"timeout": "1m"}})
    service.reconcile(NS, SET)
    assert local.obj(r.LIQOPEERING, "edge-a", NS)["spec"] == {"timeout": "1m"}  # untouched
    (line,) = set_status(local)["peerings"]
    assert line["reason"] == "NameConflict" and set_status(local)["error"] == 1
    assert "NameConflict" in events.reasons()


def test_an_invalid_spec_stalls_the_set() -> None:
    local, service, _ = setup()
    local.obj(r.LIQOPEERINGSET, SET, NS)["spec"]["selector"] = {}
    service.reconcile(NS, SET)
    stalled = next(c for c in set_status(local)["conditions"] if c["type"] == "Stalled")
    assert stalled["reason"] == "InvalidSpec" and f"LiqoPeeringSet {NS}/{SET}" in stalled["message"]
    assert not children(local)


def test_teardown_with_delete_waits_for_the_peerings_to_unpeer() -> None:
    local, service, _ = setup()
    add_secret(local, "a")
    add_secret(local, "b")
    service.reconcile(NS, SET)
    settle(local)
    body = local.obj(r.LIQOPEERINGSET, SET, NS)
    assert service.teardown(body) == ["edge-a", "edge-b"]
    assert all(c["metadata"].get("deletionTimestamp") for c in children(local).values())
    assert next(c for c in set_status(local)["conditions"] if c["type"] == "Ready")["reason"] == "Deleting"
    local.finish_deletions()
    assert service.teardown(body) == []


def test_teardown_with_orphan_leaves_the_peerings_without_the_owner_reference() -> None:
    local, service, _ = setup(deletionPolicy="Orphan")
    add_secret(local, "a")
    service.reconcile(NS, SET)
    settle(local)
    assert service.teardown(local.obj(r.LIQOPEERINGSET, SET, NS)) == []
    kid = children(local)["edge-a"]
    assert "ownerReferences" not in kid["metadata"] and not kid["metadata"].get("deletionTimestamp")
    assert kid["metadata"]["labels"][naming.SET_LABEL] == SET  # a set of that name adopts it again


def test_a_set_made_again_adopts_its_orphans() -> None:
    local, service, events = setup(deletionPolicy="Orphan")
    add_secret(local, "a")
    service.reconcile(NS, SET)
    settle(local)
    service.teardown(local.obj(r.LIQOPEERINGSET, SET, NS))
    local.obj(r.LIQOPEERINGSET, SET, NS)["metadata"]["uid"] = "new-uid"
    service.reconcile(NS, SET)
    assert children(local)["edge-a"]["metadata"]["ownerReferences"][0]["uid"] == "new-uid"
    assert events.reasons()[-1] == "Adopted"


def test_one_wake_up_table_serves_sets_and_peerings() -> None:
    """A LiqoPeering and a LiqoPeeringSet of the same name are two keys: a wake reaches only its own loop."""

    async def scenario() -> None:
        wakeups = Wakeups()
        peering, peering_set = ObjectKey("LiqoPeering", NS, "p"), ObjectKey("LiqoPeeringSet", NS, "p")
        for_peering, for_set = wakeups.open(peering), wakeups.open(peering_set)
        wakeups.wake(peering_set, "secrets")
        assert for_set.is_set() and not for_peering.is_set()
        assert wakeups.take(peering_set) == {"secrets"} and wakeups.take(peering) == frozenset()

    asyncio.run(scenario())


def test_teardown_waits_for_the_sets_running_pass() -> None:
    local, _, _ = setup()
    entered, release = threading.Event(), threading.Event()
    calls: list[str] = []

    class Slow(SetService):
        def reconcile(self, namespace: str, name: str) -> SetOutcome:
            calls.append("reconcile")
            entered.set()
            release.wait(5)
            return SetOutcome(gone=True)

        def teardown(self, body: dict[str, Any]) -> list[str]:
            calls.append("teardown")
            return []

    wakeups = Wakeups()
    kind = PeeringSets(Slow(cast(ClusterClient, local), cast(EventRecorder, Events())), 60)
    runner = Runner([kind], WatchHub(wakeups), wakeups)
    key = ObjectKey("LiqoPeeringSet", NS, SET)
    worker = threading.Thread(target=runner.one_pass, args=(key,))
    worker.start()
    entered.wait(5)
    done = threading.Thread(target=runner.teardown, args=(key, local.obj(r.LIQOPEERINGSET, SET, NS)))
    done.start()
    done.join(0.2)
    assert calls == ["reconcile"]
    release.set()
    worker.join(5)
    done.join(5)
    assert calls == ["reconcile", "teardown"]
    runner.stop()


def test_a_set_is_woken_by_the_secrets_it_selects_and_by_its_own_peerings_only() -> None:
    local = FakeClusterClient("consumer")
    kids, secrets = set_routes(local, NS, SET, (r.SECRET, "fleet=edge"))
    # Only the Secrets its selector selects: one that stops matching arrives as DELETED (the API server's).
    assert secrets.scope == Scope(r.SECRET, NS, labels="fleet=edge")
    assert secrets.matches({"metadata": {"namespace": NS, "name": "any", "labels": {}}})
    assert kids.scope == Scope(r.LIQOPEERING, NS, labels=naming.SET_LABEL)  # one informer for every set there
    assert kids.matches({"metadata": {"namespace": NS, "name": "edge-a", "labels": {naming.SET_LABEL: SET}}})
    assert not kids.matches({"metadata": {"namespace": NS, "name": "x-a", "labels": {naming.SET_LABEL: "other"}}})
    # A set whose spec is unreadable selects no Secret: only its LiqoPeerings wake it.
    assert set_routes(local, NS, SET, None) == [kids]
    # A LiqoPeering's kubeconfig Secret is watched by its name alone.
    peering_secret = peering_routes(local, None, None, (NS, "a"))[0]
    assert peering_secret.scope == Scope(r.SECRET, NS, fields="metadata.name=a")


def test_a_set_lists_the_secrets_its_selector_selects_set_based_terms_included() -> None:
    selector = {"matchExpressions": [{"key": "fleet", "operator": "In", "values": ["edge", "core"]}]}
    local, service, _ = setup(selector=selector)
    add_secret(local, "a")
    add_secret(local, "b", fleet="core")
    add_secret(local, "other", fleet="lab")
    outcome = service.reconcile(NS, SET)
    assert outcome.selection == Selection(r.SECRET, "fleet in (core,edge)")  # what its informer lists and watches
    refs = {c["spec"]["remoteKubeconfigSecretRef"]["name"] for c in children(local).values()}
    assert refs == {"a", "b"}
