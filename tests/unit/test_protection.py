"""Kubeconfig Secret protection: the finalizer's edits and who still uses a Secret (pure), and the engine's
protect/release against the in-memory client."""

from __future__ import annotations

from typing import Any

from fakes import FakeClusterClient

from liqo_peering.engine import protection
from liqo_peering.liqo import resources as r

F = protection.FINALIZER


def peering(name: str, secret: str, namespace: str = "ns", deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if deleting:
        meta["deletionTimestamp"] = "2026-11-24T10:00:00Z"
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


def test_users_count_peerings_being_deleted_but_not_the_one_excluded_nor_other_namespaces() -> None:
    peerings = [
        peering("a", "kc"),
        peering("b", "kc", deleting=True),
        peering("c", "other"),
        peering("d", "kc", namespace="elsewhere"),
        {"metadata": {"name": "e", "namespace": "ns"}, "spec": {}},
    ]
    assert protection.users(peerings, "ns", "kc") == ["a", "b"]
    assert protection.users(peerings, "ns", "kc", exclude="b") == ["a"]
    assert protection.users(peerings, "ns", "missing") == []


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


def test_protect_does_nothing_to_an_absent_secret() -> None:
    local = FakeClusterClient("consumer")
    protection.protect(local, "ns", "kc")
    assert local.get(r.SECRET, "kc", "ns") is None
