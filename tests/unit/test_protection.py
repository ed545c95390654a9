"""Kubeconfig Secret protection: the finalizer's edits and who still needs a Secret (pure), and the engine's
protect/release, the releases after unpeerings and the sweep against the in-memory client."""

from __future__ import annotations

import itertools
import random
import threading
from typing import Any, cast

import pytest
from fakes import FakeClusterClient

from liqo_peering.engine import protection
from liqo_peering.engine.sweep import ProtectionSweep
from liqo_peering.engine.unpeering import Unpeerer
from liqo_peering.errors import ClusterForbidden
from liqo_peering.liqo import naming
from liqo_peering.liqo import resources as r

F = protection.FINALIZER
UNPEERING = naming.OPERATOR_FINALIZER


def peering(
    name: str, secret: str, namespace: str = "ns", deleting: bool = False, unpeered: bool = False
) -> dict[str, Any]:
    """A LiqoPeering; ``deleting``: its unpeering runs (the operator's finalizer holds it); ``unpeered``:
    being deleted, the operator's finalizer gone, another's still holding it."""
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "uid": f"uid-{namespace}-{name}"}
    if deleting or unpeered:
        meta["deletionTimestamp"] = "2026-11-24T10:00:00Z"
        meta["finalizers"] = ["someone/else"] if unpeered else [UNPEERING]
    else:
        meta["finalizers"] = [UNPEERING]
    return {"metadata": meta, "spec": {"remoteKubeconfigSecretRef": {"name": secret}}}


def test_adding_keeps_other_finalizers_and_is_a_no_op_when_there_or_going() -> None:
    assert protection.adding({}) == [F]
    assert protection.adding({"finalizers": ["other/one"]}) == ["other/one", F]
    assert protection.adding({"finalizers": ["other/one", F]}) is None
    # The API server refuses new finalizers on an object being deleted: do not try.
    assert protection.adding({"deletionTimestamp": "2026-11-24T10:00:00Z"}) is None


def test_removing_keeps_other_finalizers() -> None:
    assert protection.removing({"finalizers": ["a", F, "b"]}) == ["a", "b"]
    assert protection.removing({"finalizers": ["a"]}) is None
    assert protection.removing({}) is None


def test_users_count_peerings_being_unpeered_but_not_those_unpeered_nor_the_one_excluded() -> None:
    peerings = [
        peering("a", "kc"),
        peering("b", "kc", deleting=True),  # its unpeering still needs the Secret
        peering("c", "other"),
        peering("d", "kc", namespace="elsewhere"),
        peering("u", "kc", unpeered=True),  # over: another's finalizer alone keeps it
        {"metadata": {"name": "e", "namespace": "ns"}, "spec": {}},
    ]
    assert protection.users(peerings, "ns", "kc") == ["a", "b"]
    assert protection.users(peerings, "ns", "kc", exclude="b") == ["a"]
    assert protection.users(peerings, "ns", "kc", done={"uid-ns-b"}) == ["a"]  # its teardown ended here
    assert protection.users(peerings, "ns", "missing") == []
    # The Secret a peering mints its credential into is needed by it as well.
    assert protection.users(peerings, "ns", naming.minted_secret("c")) == ["c"]


def test_unpeered_once_being_deleted_without_the_operator_finalizer_or_done() -> None:
    assert not protection.unpeered(peering("a", "kc"))
    assert not protection.unpeered(peering("a", "kc", deleting=True))
    assert protection.unpeered(peering("a", "kc", deleting=True), done={"uid-ns-a"})
    assert protection.unpeered(peering("a", "kc", unpeered=True))


def test_unused_is_what_no_peering_still_needs_whatever_the_namespace() -> None:
    peerings = [
        peering("a", "kc"),
        peering("b", "shared", deleting=True),
        peering("c", "shared", unpeered=True),
        peering("d", "gone", unpeered=True),
        peering("e", "kc", namespace="other"),
    ]
    secrets = [("ns", "kc"), ("ns", "shared"), ("ns", "gone"), ("ns", "switched-away"), ("other", "kc"), ("x", "kc")]
    assert protection.unused(peerings, secrets) == [("ns", "gone"), ("ns", "switched-away"), ("x", "kc")]
    assert protection.unused(peerings, secrets, done={"uid-ns-b"}) == [
        ("ns", "gone"),
        ("ns", "shared"),
        ("ns", "switched-away"),
        ("x", "kc"),
    ]
    assert protection.unused([], secrets) == sorted(secrets)


def secret_client(finalizers: list[str] | None = None) -> FakeClusterClient:
    local = FakeClusterClient("consumer")
    meta: dict[str, Any] = {"name": "kc", "namespace": "ns"}
    if finalizers is not None:
        meta["finalizers"] = finalizers
    local.add(r.SECRET, {"metadata": meta, "data": {"kubeconfig": "eA=="}})
    return local


def finalizers(local: FakeClusterClient) -> list[str]:
    return list((local.get(r.SECRET, "kc", "ns") or {})["metadata"].get("finalizers") or [])


def test_protect_then_release_once_the_last_user_is_gone() -> None:
    local = secret_client(["someone/else"])
    protection.protect(local, "ns", "kc")
    protection.protect(local, "ns", "kc")  # idempotent
    assert finalizers(local) == ["someone/else", F]

    local.add(r.LIQOPEERING, peering("a", "kc"))
    local.add(r.LIQOPEERING, peering("b", "kc", deleting=True))
    assert protection.release(local, "ns", "kc", exclude="b") == ["a"]
    assert finalizers(local) == ["someone/else", F]  # "a" still needs it

    del local.store[(r.LIQOPEERING.plural, "ns", "a")]
    assert protection.release(local, "ns", "kc", exclude="b") == []
    assert finalizers(local) == ["someone/else"]  # only ours went


def deleting_together(count: int, secrets: tuple[str, ...] = ("kc",)) -> tuple[FakeClusterClient, list[dict[str, Any]]]:
    """``count`` LiqoPeerings being deleted, sharing ``secrets`` in turn, each Secret protected."""
    local = FakeClusterClient("consumer")
    for secret in secrets:
        local.add(r.SECRET, {"metadata": {"name": secret, "namespace": "ns", "finalizers": [F]}})
    bodies = [
        local.add(r.LIQOPEERING, peering(f"p{i}", secrets[i % len(secrets)], deleting=True)) for i in range(count)
    ]
    return local, bodies


def protected(local: FakeClusterClient, secret: str, namespace: str = "ns") -> bool:
    return F in local.obj(r.SECRET, secret, namespace)["metadata"].get("finalizers", [])


@pytest.mark.parametrize("order", list(itertools.permutations(range(3))))
def test_peerings_unpeered_together_release_with_the_last_whatever_the_order(order: tuple[int, ...]) -> None:
    """Each ends while the others still carry the operator's finalizer (kopf removes it only after the
    handler returns): the last one counts those that ended before it as done, and releases."""
    local, bodies = deleting_together(3)
    releases = protection.Releases()
    for step, i in enumerate(order):
        still = releases.after_unpeering(local, bodies[i])
        last = step == len(order) - 1
        assert protected(local, "kc") is not last
        assert still == ([] if last else sorted(bodies[j]["metadata"]["name"] for j in order[step + 1 :]))


def test_ten_peerings_on_two_secrets_unpeered_at_once_from_threads_leave_no_finalizer() -> None:
    local, bodies = deleting_together(10, ("kc", "kc2"))
    releases = protection.Releases()
    random.Random(7).shuffle(bodies)
    threads = [threading.Thread(target=releases.after_unpeering, args=(local, body)) for body in bodies]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not protected(local, "kc") and not protected(local, "kc2")


def test_releases_forget_the_peerings_that_are_gone() -> None:
    local, bodies = deleting_together(2)
    releases = protection.Releases()
    releases.after_unpeering(local, bodies[0])
    del local.store[(r.LIQOPEERING.plural, "ns", "p0")]
    local.add(r.LIQOPEERING, peering("p0", "kc"))  # the same name again: a new peering, a new uid
    local.obj(r.LIQOPEERING, "p0", "ns")["metadata"]["uid"] = "uid-new"
    assert releases.after_unpeering(local, bodies[1]) == ["p0"]
    assert protected(local, "kc")


def newer(local: FakeClusterClient, body: dict[str, Any]) -> dict[str, Any]:
    """``body`` as the next version the informer is sent."""
    body["metadata"]["resourceVersion"] = local._next_version()
    return body


def listed(sweep: ProtectionSweep, local: FakeClusterClient) -> None:
    """The sweep's informer lists what the client holds (as its thread does once started)."""
    (informer,) = sweep.informers
    informer._listed(local.find(r.LIQOPEERING, informer.scope.namespace))  # calls the sweep's on_list


def test_the_sweep_releases_what_no_peering_needs_at_start_and_as_peerings_go() -> None:
    local, bodies = deleting_together(4, ("kc", "kc2"))
    local.add(r.SECRET, {"metadata": {"name": "left", "namespace": "ns", "finalizers": ["other/one", F]}})
    local.add(r.SECRET, {"metadata": {"name": "foreign", "namespace": "x", "finalizers": [F]}})  # not watched
    local.add(r.LIQOPEERING, peering("stays", "kc2"))
    sweep = ProtectionSweep(local, ["ns"])
    sweep._list_protected()  # at start: the Secrets carrying the finalizer
    assert sweep.sweep() == []  # nothing until its informer has listed
    listed(sweep, local)
    assert sweep._due.is_set()
    assert sweep.sweep() == [("ns", "left")]  # left by an operator stopped before it released it
    assert local.obj(r.SECRET, "left", "ns")["metadata"]["finalizers"] == ["other/one"]
    assert protected(local, "kc") and protected(local, "kc2") and protected(local, "foreign", "x")
    writes = len(local.writes)
    sweep._due.clear()
    assert sweep.sweep() == [] and len(local.writes) == writes  # quiet at rest

    (informer,) = sweep.informers
    for body in bodies:  # the peerings go, each seen gone by the informer
        informer.remember(body, deleted=True)
        sweep._changed("DELETED", body)
        assert sweep._due.is_set()
        sweep._due.clear()
        sweep.sweep()
    assert not protected(local, "kc")
    assert protected(local, "kc2")  # "stays" needs it


def test_the_sweep_looks_again_when_a_peering_switches_secret_or_its_unpeering_ends() -> None:
    local = FakeClusterClient("consumer")
    for secret in ("old", "new"):
        local.add(r.SECRET, {"metadata": {"name": secret, "namespace": "ns", "finalizers": [F]}})
    local.add(r.LIQOPEERING, peering("a", "old"))
    sweep = ProtectionSweep(local, ["ns"])
    listed(sweep, local)
    sweep._due.clear()
    (informer,) = sweep.informers

    status_only = newer(local, peering("a", "old"))
    status_only["status"] = {"peerStatus": "ready"}
    sweep._changed("MODIFIED", status_only)
    assert not sweep._due.is_set()  # what it needs is the same

    switched = newer(local, peering("a", "new"))
    informer.remember(switched)
    sweep._changed("MODIFIED", switched)
    assert sweep._due.is_set()
    assert sweep.sweep() == [("ns", "old")]

    sweep._due.clear()
    over = newer(local, peering("a", "new", unpeered=True))
    informer.remember(over)
    sweep._changed("MODIFIED", over)  # another's finalizer keeps it; its unpeering is over
    assert sweep._due.is_set()
    assert sweep.sweep() == [("ns", "new")]

    informer._listed([])  # a relist: what went while the watch was down is forgotten
    assert sweep._seen == {}


def test_protect_does_nothing_to_an_absent_secret() -> None:
    local = FakeClusterClient("consumer")
    protection.protect(local, "ns", "kc")
    assert local.get(r.SECRET, "kc", "ns") is None


class RefusingClient(FakeClusterClient):
    """Refuses every finalizer edit, as an admission webhook can."""

    def edit_finalizers(self, *args: Any, **kwargs: Any) -> bool:
        raise ClusterForbidden("secrets is forbidden", side="consumer")


class Quiet:
    """Events and metrics that take anything."""

    def __getattr__(self, name: str) -> Any:
        return lambda *_: None


def test_a_refused_release_does_not_hold_the_deletion_back() -> None:
    """The LiqoPeering goes; the sweep retries the release once it is gone."""
    local = RefusingClient("consumer")
    local.add(r.SECRET, {"metadata": {"name": "kc", "namespace": "ns", "finalizers": [F]}})
    body = local.add(r.LIQOPEERING, peering("a", "kc", deleting=True))
    unpeerer = Unpeerer(local, cast(Any, Quiet()), cast(Any, Quiet()), cast(Any, None))
    unpeerer.finished(body)  # raises nothing
    assert protected(local, "kc")
