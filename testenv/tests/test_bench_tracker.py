"""bench.tracker's kinds: with an owner, only what an object of that kind owns counts, as for the garbage
collector; a change that drops the ownerReference drops the object."""

from __future__ import annotations

from typing import Any

from bench.tracker import Kind, Tracker, all_gone
from testenv import kube as k


def _secret(name: str, owner: str | None) -> dict[str, Any]:
    refs = [{"kind": owner, "name": "x", "uid": "1", "apiVersion": "v1"}] if owner else []
    return {"metadata": {"namespace": "tenant", "name": name, "ownerReferences": refs}}


def test_an_owned_kind_counts_only_what_that_kind_owns() -> None:
    owned = Kind("consumer", k.SECRET, owner="Identity")
    assert owned.key == "consumer/secrets of Identity" and Kind("consumer", k.SECRET).key == "consumer/secrets"
    assert owned.holds(_secret("kubeconfig", "Identity"))
    assert not owned.holds(_secret("nonce", None)) and not owned.holds(_secret("other", "Tenant"))
    assert Kind("consumer", k.SECRET).holds(_secret("nonce", None))


def test_the_tracker_applies_the_owner_to_watch_events() -> None:
    owned = Kind("consumer", k.SECRET, owner="Identity")
    tracker = Tracker({}, [owned])
    tracker.state[owned.key] = {}
    tracker.expect("gone", all_gone([owned.key]))
    tracker._apply(owned, {"type": "ADDED", "object": _secret("nonce", None)})
    assert tracker.reached("gone") is not None  # nothing it owns: gone from the start
    tracker._apply(owned, {"type": "ADDED", "object": _secret("kubeconfig", "Identity")})
    assert list(tracker.state[owned.key]) == ["tenant/kubeconfig"]
    tracker.expect("released", all_gone([owned.key]))
    assert tracker.reached("released") is None
    tracker._apply(owned, {"type": "MODIFIED", "object": _secret("kubeconfig", None)})  # the owner let go
    assert tracker.reached("released") is not None
